"""The GPU's bitwise checks beyond the CPU-vs-GPU field comparison of ``dycore validate``
(``dycore validate --checks libm,restart``; what ``scripts/gpu_check.py`` asks for by name):

libm     strict mode (fma=0) per operation (acos, cos, sqrt, mul+add) and both eig3 solvers,
         GPU against CPU: differing entries, ulp distance (+, *, / and sqrt are correctly
         rounded on both sides and must agree bit for bit; acos and cos are different
         approximations, libdevice vs the CPU's libm, which no compiler option reconciles)
restart  bitwise restart on the GPU (deterministic assembly + strict FP), per solver mode: N
         steps in one run, against N/2 steps + a restart from the output file + N/2, and
         against a restart from the checkpoint written at N/2; the last snapshot and every
         per-step diagnostic after the restart compared bit for bit (docs/output.md, "Restart")
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np

from dycore.checks.common import compare_arrays, with_backend

__all__ = ["CHECKS", "libm_check", "restart_check", "run_checks"]


def libm_check(small: bool = False, echo=print) -> dict:
    """Strict GPU kernels against the CPU per operation on 2^20 uniform points in [-1, 1] and
    for both eig3 solvers on 2^16 SPD 3x3 matrices (``small``: 2^10 and 2^8, the simulator).

    Returns
    -------
    dict: name -> :func:`compare_arrays` of CPU and GPU results
    """
    from dycore.backend.gpu_kernels import kernel_compiler
    from dycore.checks import strict_cpu_loops_gen as strict_cpu_loops
    from dycore.checks import strict_gpu_loops_gen as strict_gpu_loops
    rng = np.random.default_rng(0)
    n = 1 << (10 if small else 20)
    x = rng.uniform(-1.0, 1.0, n)
    out, ref = np.zeros((n, 4)), np.zeros((n, 4))
    strict = kernel_compiler(True)
    strict(strict_gpu_loops.KERNELS["libm_point"])[(n + 255) // 256, 256](x, out)
    strict_cpu_loops.DRIVERS["libm_point"](x, ref)
    row = {name: compare_arrays(ref[:, j], out[:, j])
           for j, name in enumerate(("acos", "cos", "sqrt", "v*1.25 + 0.5*v"))}
    m = rng.standard_normal((1 << (8 if small else 16), 3, 3))
    a = np.einsum("kij,klj->kil", m, m) + 0.1 * np.eye(3)      # SPD, like the metric tensor
    kern = strict(strict_gpu_loops.KERNELS["eig3_point"])
    for method, name in ((0, "eig3 jacobi"), (1, "eig3 closed form")):
        ev, vec = np.zeros((a.shape[0], 3)), np.zeros((a.shape[0], 3, 3))
        kern[(a.shape[0] + 127) // 128, 128](a, method, ev, vec)
        evr, vecr = np.zeros_like(ev), np.zeros_like(vec)
        strict_cpu_loops.DRIVERS["eig3_point"](a, method, evr, vecr)
        row[name + " eigenvalues"] = compare_arrays(evr, ev)
        row[name + " eigenvectors"] = compare_arrays(vecr, vec)
    for name, r in row.items():
        echo(f"strict GPU vs CPU {name:31s}: {r['n_differ']:8d} of {r['entries']} differ, "
             f"max ulp {r['max_ulp']}, max rel {r['max_rel']:.2e}")
    return row


def _restart_config(cfg, mode: str, nsteps: int, path: Path):
    """``cfg`` on the GPU in bitwise mode (deterministic assembly, strict FP, solver ``mode``),
    ``nsteps`` steps, a snapshot and a checkpoint every ``nsteps // 2`` steps, output ``path``."""
    from dycore.config import Config
    data = with_backend(cfg, name="gpu", solver_mode=mode, assembly="deterministic",
                        strict=True).model_dump()
    every = (nsteps // 2) * data["time"]["dt"]
    data["time"]["t_end"] = nsteps * data["time"]["dt"]
    data["output"].update(path=str(path), output_interval=every, checkpoint_interval=every,
                          formats=["netcdf"], progress=False)
    return Config.model_validate(data)


def _last_record(path: Path, after_step: int) -> dict:
    """The last snapshot's fields and time, and every per-step variable after ``after_step``,
    of an output file (NumPy arrays, as stored)."""
    import netCDF4

    from dycore.io.netcdf import FIELDS
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        times = np.asarray(ds["time"][:])
        last = int(np.flatnonzero(np.isfinite(times))[-1])
        out = {"time": times[last:last + 1]}
        out.update({name: np.asarray(ds[name][last]) for name in FIELDS})
        rows = np.asarray(ds["step"][:]) > after_step
        for name, var in ds.variables.items():
            if var.dimensions[:1] == ("step",):
                out[f"step:{name}"] = np.asarray(var[:])[rows]
    return out


def restart_check(cfg, nsteps: int, folder: Path, modes=("device", "host"), echo=print) -> dict:
    """Bitwise GPU restart per solver mode (module docstring); output files under ``folder``.

    Returns
    -------
    dict: mode -> ``bitwise`` (bool), ``differing_from_output_file`` /
    ``differing_from_checkpoint`` (names of what differs), ``max_abs_diff_from_...``

    Raises
    ------
    ConfigError when ``nsteps`` < 2.
    """
    from dycore.errors import ConfigError
    from dycore.io.restart import checkpoint_path
    from dycore.timestepping.simulation import run_from_config
    half = nsteps // 2
    if half < 1:
        raise ConfigError(f"--restart-steps: expected at least 2, got {nsteps}")
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for mode in modes:
        one, split, again = (folder / f"restart_{mode}_{name}.nc"
                             for name in ("one", "split", "checkpoint"))
        t0 = time.perf_counter()
        run_from_config(_restart_config(cfg, mode, nsteps, one), overwrite=True)
        run_from_config(_restart_config(cfg, mode, nsteps, split), max_steps=half,
                        overwrite=True)
        saved = folder / f"restart_{mode}_saved.checkpoint.nc"
        shutil.copy(checkpoint_path(split), saved)
        run_from_config(_restart_config(cfg, mode, nsteps, split), restart=split)
        run_from_config(_restart_config(cfg, mode, nsteps, again), restart=saved,
                        overwrite=True)
        want = _last_record(one, half)
        row = {"steps": nsteps, "restart_at_step": half,
               "seconds": round(time.perf_counter() - t0, 1)}
        for label, path in (("output_file", split), ("checkpoint", again)):
            got = _last_record(path, half)
            row[f"differing_from_{label}"] = sorted(k for k in want if not np.array_equal(
                got[k], want[k], equal_nan=got[k].dtype.kind == "f"))
            row[f"max_abs_diff_from_{label}"] = {
                k: float(np.max(np.abs(got[k] - want[k]))) for k in want
                if not k.startswith("step:") and got[k].shape == want[k].shape}
        row["bitwise"] = not (row["differing_from_output_file"]
                              or row["differing_from_checkpoint"])
        out[mode] = row
        verdict = {label: "BITWISE EQUAL" if not row[f"differing_from_{label}"] else
                   f"DIFFERENT in {', '.join(row[f'differing_from_{label}'])}"
                   for label in ("output_file", "checkpoint")}
        echo(f"restart ({mode} solvers, deterministic + strict): {nsteps} steps in one run vs "
             f"{half} + restart + {nsteps - half}: from the output file {verdict['output_file']}"
             f", from the checkpoint {verdict['checkpoint']} ({row['seconds']} s)")
    return out


#: the checks ``dycore validate --checks`` runs besides ``fields`` (the CPU-vs-GPU comparison)
CHECKS = ("libm", "restart")


def run_checks(cfg, checks, output_dir: Path, restart_steps: int = 20,
               restart_modes=("device", "host"), small: bool | None = None,
               echo=print) -> tuple:
    """Run the named ``checks`` (of :data:`CHECKS`) and write ``validate_checks.json`` into
    ``output_dir``. ``small`` (default: under numba-cuda's simulator, which is slow): the
    libm check on fewer points.

    Returns
    -------
    (passed, message, results): passed is False when a correctly rounded operation (sqrt,
    mul+add) differs in strict mode or a restart is not bitwise
    """
    import json
    from dycore.backend import gpu_usable
    results, failures = {}, []
    if small is None:
        small = gpu_usable()[1] == "CUDA simulator"
    if "libm" in checks:
        r = results["libm"] = libm_check(small, echo)
        failures += [f"strict {k} differs" for k in ("sqrt", "v*1.25 + 0.5*v")
                     if r[k]["n_differ"]]
    if "restart" in checks:
        r = results["restart"] = restart_check(cfg, restart_steps, output_dir / "restart",
                                               tuple(restart_modes), echo)
        failures += [f"restart ({m} solvers) not bitwise" for m, v in r.items()
                     if not v["bitwise"]]
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "validate_checks.json").write_text(json.dumps(results, indent=1))
    message = "; ".join(failures) or f"{', '.join(checks)}: passed"
    return not failures, message, results
