"""``dycore bench --parts run``: whole runs as ``dycore run`` does them, split into set-up, steps,
output and total wall time (:class:`dycore.timestepping.run_split.RunSplit`).

Each variant (GPU with device solvers where a GPU is usable, the CPU otherwise or as well) runs
:func:`dycore.timestepping.simulation.run_from_config` for ``steps`` steps into a temporary
output file (deleted afterwards). The set-up cache (:mod:`dycore.io.setup_cache`) is used as
``dycore run`` uses it, so a first run reports the cold set-up and a repeated one the warm set-up;
``cache`` says which pieces were loaded.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

__all__ = ["run_variants", "time_runs"]


def run_variants(cpu: bool, gpu: bool, device_solver: bool) -> list[tuple[str, dict]]:
    """(label, backend overrides) of every run variant available."""
    out = []
    if gpu and device_solver:
        out.append(("gpu + device solvers", {"name": "gpu", "solver_mode": "device"}))
    elif gpu:
        out.append(("gpu + host solvers", {"name": "gpu", "solver_mode": "host"}))
    if cpu:
        out.append(("cpu", {"name": "cpu"}))
    return out


def time_runs(make_config, variants, steps: int) -> dict:
    """Run every variant for ``steps`` steps; {label: split dict + backend, tets, cache hits}.

    Parameters
    ----------
    make_config : callable(backend overrides, output path) -> Config
    variants : list of (label, backend overrides), e.g. :func:`run_variants`
    steps : int — steps per run (time.t_end of the configuration bounds them too)
    """
    from dycore.timestepping.simulation import run_from_config

    out = {}
    for label, backend in variants:
        with tempfile.TemporaryDirectory(prefix="dycore-bench-run-") as folder:
            cfg = make_config(backend, Path(folder) / "bench_run.nc")
            summary = run_from_config(cfg, max_steps=steps, progress=False, overwrite=True)
        out[label] = dict(summary.split, backend=summary.backend, text=summary.split_text)
    return out
