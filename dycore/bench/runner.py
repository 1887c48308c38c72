"""``dycore bench``: kernel, assembly, step and scaling tables (docs/equations.md §8; paper Tables 3–10).

Parts (``--parts``; all but ``run`` by default):

kernels   standalone element kernels (:mod:`dycore.bench.kernels`): GPU (CUDA events), ``@njit``
          on 1 core and on all cores, speedups, achieved GB/s from the minimum bytes as a
          fraction of the copy bandwidth measured in the same run (device copy for the GPU,
          an ``@njit`` prange copy for the CPU with the same thread count)
assembly  tracer CSR matrix + rhs: GPU atomic + lookup, GPU atomic + binary search, GPU
          deterministic (element arrays + gather); CPU element loop + gather, 1 and all cores
steps     one Simulation per available variant: warm-up step, then K timed steps; per-stage
          table with shares, and the per-step time
scaling   the step at several mesh sizes: time per element, device memory per element (GPU)
run       whole runs as ``dycore run`` does them (:mod:`dycore.bench.run_split`): set-up, first
          step, steps, output on the critical path, total wall time
operators, modes, device, solver_ab, pressure_profile
          the GPU machine's parts (:mod:`dycore.bench.gpu_parts`; ``scripts/gpu_check.py``)

GPU columns appear only where a GPU is usable; under numba-cuda's simulator they appear only with
``--paths gpu`` (a code-path check: simulator timings mean nothing).
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from dycore.bench.gpu_parts import GPU_PARTS, run_gpu_part
from dycore.bench.report import fmt_num, fmt_time, format_table
from dycore.bench.steps import numba_threads, run_variant, step_variants
from dycore.bench.timing import (copy_bandwidth, host_copy_bandwidth, kernel_resources, time_cpu,
                                 time_gpu)
from dycore.errors import BackendUnavailableError, ConfigError

__all__ = ["run_bench", "parse_mesh", "parse_sizes", "PARTS", "DEFAULT_PARTS", "DEFAULT_SIZES"]

PARTS = ("kernels", "assembly", "steps", "scaling", "run", *GPU_PARTS)
#: the parts run when none are named (``run`` writes output files: asked for by name)
DEFAULT_PARTS = ("kernels", "assembly", "steps", "scaling")
#: mesh sizes (nx, ny, nz) of the scaling table without --mesh (x 6 tetrahedra per cell)
DEFAULT_SIZES = ((12, 12, 10), (24, 24, 20), (48, 48, 40), (96, 96, 80))


def parse_mesh(text: str) -> tuple[int, int, int]:
    """``"NX,NY,NZ"`` or ``"NXxNYxNZ"`` -> (nx, ny, nz), each >= 1."""
    parts = text.replace("x", ",").split(",")
    try:
        vals = tuple(int(p) for p in parts)
    except ValueError:
        raise ConfigError(f"mesh size {text!r}: expected NX,NY,NZ (integers)") from None
    if len(vals) != 3 or min(vals) < 1:
        raise ConfigError(f"mesh size {text!r}: expected three positive integers NX,NY,NZ")
    return vals


def parse_sizes(items: list[str]) -> list[tuple[int, int, int]]:
    """Mesh sizes from ``["12x12x10", "24,24,20 48x48x40"]`` (space- or ``;``-separated)."""
    out = []
    for item in items:
        for tok in item.replace(";", " ").split():
            out.append(parse_mesh(tok))
    return out


def _default_sizes(mesh):
    """Scaling sizes: DEFAULT_SIZES, or 1x, 1.5x, 2x the --mesh size when one is given."""
    if mesh is None:
        return list(DEFAULT_SIZES)
    return [tuple(max(1, int(round(f * v))) for v in mesh) for f in (1.0, 1.5, 2.0)]


class _Bench:
    """State of one benchmark run (options, devices, results, log)."""

    def __init__(self, config_path, backend, repeat, steps, mesh, sizes, parts, block,
                 cpu_max_elements, echo):
        self.config_path = None if config_path is None else Path(config_path)
        self.repeat, self.steps, self.block = repeat, steps, block
        self.mesh_size = mesh
        self.sizes = sizes if sizes else _default_sizes(mesh)
        self.parts = parts
        self.cpu_max_elements = cpu_max_elements
        self.echo = echo
        self.tables: dict[str, str] = {}
        self.cpu, self.gpu, self.sim, self.device_solver, self.gpu_why = self._devices(backend)
        self.res: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"),
                          "config": None if config_path is None else str(config_path),
                          "options": {"backend": backend, "repeat": repeat, "steps": steps,
                                      "mesh": mesh, "sizes": self.sizes, "parts": list(parts),
                                      "block": block, "cpu_max_elements": cpu_max_elements},
                          "machine": self._machine()}

    # -- set-up --------------------------------------------------------------------------
    @staticmethod
    def _devices(choice):
        from numba import config as numba_config

        from dycore.backend import gpu_usable

        sim = bool(numba_config.ENABLE_CUDASIM)
        cpu = choice in ("cpu", "both")
        gpu, why = False, "not requested"
        if choice in ("gpu", "both"):
            ok, why = gpu_usable()
            if ok and sim and choice == "both":
                ok, why = False, "CUDA simulator (give --paths gpu to run the GPU code path)"
            if ok and not sim:
                try:
                    import cupy  # noqa: F401
                except ImportError as exc:
                    ok, why = False, f"CuPy missing ({exc})"
            if not ok and choice == "gpu":
                raise BackendUnavailableError(f"bench --paths gpu: no usable GPU ({why})")
            gpu = ok
        return cpu, gpu, sim, gpu and not sim, why

    def _machine(self):
        import numba

        info = {"python": platform.python_version(), "numpy": np.__version__,
                "numba": numba.__version__, "cpu_cores": os.cpu_count(),
                "numba_threads": numba.get_num_threads(), "gpu": None,
                "gpu_note": self.gpu_why}
        if self.gpu:
            info["gpu"] = "CUDA simulator" if self.sim else self.gpu_why
            try:
                import cupy
                info["cupy"] = cupy.__version__
            except ImportError:
                pass
        return info

    def make_config(self, backend: dict | None = None, size=None, output_path=None):
        """The configuration with the mesh size, backend overrides and no progress bar (and
        ``output.path``, for the ``run`` part)."""
        from pydantic import ValidationError

        from dycore.config import Config, load_config

        over: dict = {"output": {"progress": False}}
        if output_path is not None:
            over["output"]["path"] = str(output_path)
        size = size or self.mesh_size
        if size is not None:
            over["mesh"] = dict(zip(("nx", "ny", "nz"), size))
        if backend:
            over["backend"] = dict(backend)
        if self.config_path is not None:
            return load_config(self.config_path, over)
        try:
            return Config.model_validate(over)
        except ValidationError as exc:
            raise ConfigError(str(exc)) from None

    def say(self, text: str = "") -> None:
        self.echo(text)

    def table(self, name: str, text: str) -> None:
        self.tables[name] = text
        self.say(text)
        self.say()

    # -- parts ---------------------------------------------------------------------------
    def build_mesh(self):
        from dycore import cases

        from dycore.assembly.sparsity import build_sparsity

        cfg = self.make_config()
        m = cfg.mesh
        mesh = cases.build_config_mesh(cfg)
        sp = build_sparsity(mesh.tets, mesh.nnodes)
        self.res["mesh"] = {"nx": m.nx, "ny": m.ny, "nz": m.nz, "nodes": int(mesh.nnodes),
                            "tets": int(mesh.nele), "nnz": int(sp.nnz)}
        self.say(f"mesh {m.nx}x{m.ny}x{m.nz}: {mesh.nnodes} nodes, {mesh.nele} tetrahedra, "
                 f"{sp.nnz} nonzeros")
        return mesh, sp

    def bandwidth(self):
        bw = {}
        if self.cpu:
            bw["host_all_cores"] = host_copy_bandwidth(max(3, self.repeat))
            with numba_threads(1):
                bw["host_1_core"] = host_copy_bandwidth(max(3, self.repeat))
        if self.gpu and not self.sim:
            bw["device"] = copy_bandwidth(max(5, self.repeat))
        self.res["bandwidth"] = bw
        rows = [[k, f"{v['GB_per_s']:.1f}", fmt_time(v), f"{v['bytes'] / 2**20:.0f}"]
                for k, v in bw.items()]
        self.table("bandwidth", format_table(
            "copy bandwidth (bytes read + written per second; the reference for GB/s fractions)",
            ["copy", "GB/s", "time [ms] median [min-max]", "MiB"], rows))
        return bw

    def kernels(self, mesh, bw):
        from numba import cuda

        from dycore.backend.gpu_kernels import grid
        from dycore.bench.kernels import KERNELS, gpu_kernel, kernel_args, make_inputs

        data = make_inputs(mesh.tets, mesh.coords)
        nele, nn = mesh.nele, mesh.nnodes
        out, rows = {}, []
        for k in KERNELS:
            args = kernel_args(k, data)
            nbytes = k.min_bytes(nele, nn)
            row: dict = {"min_bytes": nbytes, "bytes_formula": k.formula,
                         "paper_a100_ms_554k_tets": k.paper_ms}
            if self.cpu:
                row["cpu_all_cores"] = time_cpu(lambda: k.cpu(*args), self.repeat)
                with numba_threads(1):
                    row["cpu_1_core"] = time_cpu(lambda: k.cpu(*args), self.repeat)
            if self.gpu:
                dargs = [cuda.to_device(a) for a in args]
                kern, g = gpu_kernel(k), grid(nele, self.block)
                row["gpu"] = time_gpu(lambda: kern[g](*dargs), self.repeat)
                row["gpu_resources"] = kernel_resources(kern)
                del dargs
            for path, ref in (("gpu", "device"), ("cpu_all_cores", "host_all_cores"),
                              ("cpu_1_core", "host_1_core")):
                if path in row:
                    gbs = nbytes / (row[path]["median_ms"] * 1e-3) / 1e9
                    row[f"{path}_GB_per_s"] = gbs
                    row[f"{path}_bw_fraction"] = (gbs / bw[ref]["GB_per_s"]) if ref in bw else None
            if "gpu" in row and self.cpu:
                row["speedup_vs_1_core"] = row["cpu_1_core"]["median_ms"] / row["gpu"]["median_ms"]
                row["speedup_vs_all_cores"] = (row["cpu_all_cores"]["median_ms"]
                                               / row["gpu"]["median_ms"])
            out[k.name] = row
            cells = [k.name, f"{nbytes / 1e6:.2f}"]
            if self.gpu:
                cells += [fmt_time(row["gpu"]), fmt_num(row["gpu_GB_per_s"], ".3g"),
                          fmt_num(_pct(row["gpu_bw_fraction"]), ".0f", "%"),
                          _resources_text(row["gpu_resources"])]
            if self.cpu:
                cells += [fmt_time(row["cpu_1_core"]), fmt_time(row["cpu_all_cores"]),
                          fmt_num(row["cpu_1_core_GB_per_s"], ".3g"),
                          fmt_num(_pct(row["cpu_1_core_bw_fraction"]), ".0f", "%"),
                          fmt_num(row["cpu_all_cores_GB_per_s"], ".3g"),
                          fmt_num(_pct(row["cpu_all_cores_bw_fraction"]), ".0f", "%")]
            if self.gpu and self.cpu:
                cells += [fmt_num(row["speedup_vs_1_core"], ".1f", "x"),
                          fmt_num(row["speedup_vs_all_cores"], ".1f", "x")]
            cells.append(f"{k.paper_ms:g}")
            rows.append(cells)
        nth = _threads()
        headers = ["kernel", "min MB"]
        if self.gpu:
            headers += ["GPU ms", "GPU GB/s", "of copy", "regs/local B"]
        if self.cpu:
            headers += ["CPU 1c ms", f"CPU {nth}c ms", "1c GB/s", "of copy", f"{nth}c GB/s",
                        "of copy"]
        if self.gpu and self.cpu:
            headers += ["GPU/1c", f"GPU/{nth}c"]
        headers.append("paper A100 ms")
        self.res["kernels"] = out
        self.table("kernels", format_table(
            f"element kernels (paper Tables 3-5), {nele} tetrahedra, median [min-max] of "
            f"{self.repeat} after warm-up; GB/s from the minimum bytes (each input read once, "
            f"each output written once); paper column: A100, 554,394 tetrahedra",
            headers, rows))

    def assembly(self, mesh, sp):
        from dycore.backend.cpu import CPUBackend
        from dycore.bench.assembly import lookup_by_search, tracer_inputs
        from dycore.backend.timers import StageTimers

        if not np.array_equal(lookup_by_search(sp.indptr, sp.indices, mesh.tets), sp.lookup):
            raise AssertionError("csr_find disagrees with the lookup table")
        h = tracer_inputs(mesh.nnodes)
        out, ref = {}, None
        if self.cpu:
            ca = CPUBackend().assembler(mesh, sp, StageTimers())
            call = _tracer_call(ca, h)
            ref = [np.array(a, copy=True) for a in call(True)]
            nth = _threads()
            for label, threads in ((f"cpu {nth} cores (element loop + gather)", 0),
                                   ("cpu 1 core (element loop + gather)", 1)):
                with numba_threads(threads):
                    out[label] = {"matrix_rhs": time_cpu(lambda: call(True), self.repeat),
                                  "rhs_only": time_cpu(lambda: call(False), self.repeat),
                                  "max_rel_diff_vs_cpu": 0.0}
        if self.gpu:
            for label, (fn, stream) in self._gpu_assembly_calls(mesh, sp, h).items():
                got = [np.asarray(_host(a)) for a in fn(True)]
                row = {"matrix_rhs": time_gpu(lambda: fn(True), self.repeat, stream=stream),
                       "rhs_only": time_gpu(lambda: fn(False), self.repeat, stream=stream)}
                if ref is not None:
                    row["max_rel_diff_vs_cpu"] = max(_rel(r, g) for r, g in zip(ref, got))
                out[label] = row
        base = next((v for k, v in out.items() if k.startswith("cpu 1 core")), None)
        rows = []
        for label, row in out.items():
            sp1 = (base["matrix_rhs"]["median_ms"] / row["matrix_rhs"]["median_ms"]
                   if base else None)
            row["speedup_vs_1_core"] = sp1
            rows.append([label, fmt_time(row["matrix_rhs"]), fmt_time(row["rhs_only"]),
                         fmt_num(sp1, ".1f", "x"),
                         fmt_num(row.get("max_rel_diff_vs_cpu"), ".1e")])
        self.res["assembly"] = out
        self.table("assembly", format_table(
            f"tracer CSR matrix + rhs assembly (paper Table 6), {mesh.nele} tetrahedra, "
            f"{sp.nnz} nonzeros; ms median [min-max] of {self.repeat} (integration included)",
            ["variant", "matrix+rhs ms", "rhs only ms", "vs 1 core", "max rel diff vs CPU"],
            rows, ["paper (A100, 554,394 tets): CSR matrix 0.842 ms, rhs 0.116 ms"]))

    def _gpu_assembly_calls(self, mesh, sp, h):
        """{label: (the tracer assembly call, the numba stream it issues its kernels on)}."""
        from dycore.backend.gpu import gpu_backend
        from dycore.backend.timers import StageTimers

        calls = {}
        for mode, label in (("atomic", "gpu atomic + lookup table"),
                            ("deterministic", "gpu deterministic (elements + gather)")):
            b = gpu_backend(solver_mode="host", assembly=mode, block=self.block)
            d = {k: (b.to_device(v) if isinstance(v, np.ndarray) else v) for k, v in h.items()}
            calls[label] = (_tracer_call(b.assembler(mesh, sp, StageTimers(b.marker)), d),
                            b.nb_stream)
        b = gpu_backend(solver_mode="host", assembly="atomic", block=self.block)
        d = {k: (b.to_device(v) if isinstance(v, np.ndarray) else v) for k, v in h.items()}
        bsearch = _tracer_call(b.assembler(mesh, sp, StageTimers(b.marker)), d, search=True)
        calls["gpu atomic + binary search (csr_find)"] = (bsearch, b.nb_stream)
        return calls

    def run_table(self):
        from dycore.bench.run_split import run_variants, time_runs

        variants = run_variants(self.cpu, self.gpu, self.device_solver)
        out = time_runs(lambda backend, path: self.make_config(backend, output_path=path),
                        variants, self.steps)
        self.res["run"] = out
        rows = [[label, str(r["steps"]), f"{r['setup_s']:.2f}", f"{r['first_step_s']:.2f}",
                 f"{r['step_ms']:.2f}", f"{r['output_s']:.2f}", f"{r['total_s']:.2f}",
                 f"{100 * r['output_s'] / max(r['total_s'], 1e-12):.1f}"]
                for label, r in out.items()]
        self.table("run", format_table(
            "whole runs as `dycore run` does them (output to a temporary file): wall time [s] "
            "of the set-up before step 1, the first step (kernel compile or cache load, graph "
            "capture), the mean of the other steps [ms], output on the critical path, total",
            ["variant", "steps", "set-up s", "first step s", "step ms", "output s", "total s",
             "output %"], rows))

    def step_table(self):
        out = {}
        for label, backend, threads in step_variants(self.cpu, self.gpu, self.device_solver):
            r = run_variant(self.make_config, label, backend, threads, self.steps)
            out[label] = r
            self.say(r["table"])
            self.say()
        base = next((v for k, v in out.items() if k == "cpu 1 core"), None)
        rows = []
        for label, r in out.items():
            sp1 = base["step"]["median_ms"] / r["step"]["median_ms"] if base else None
            r["speedup_vs_1_core"] = sp1
            c, d = r["per_step"], r["last_diagnostics"]
            its = "/".join(str(int(d.get(f"solver_iterations_{s}", 0)))
                           for s in ("pressure", "momentum", "tracer"))
            rows.append([label, fmt_time(r["step"], 1), f"{r['build_s']:.2f}",
                         f"{r['warmup_s']:.2f}", fmt_num(sp1, ".2f", "x"),
                         f"{c['launches']:.0f}", f"{c['graph_replays']:.0f}",
                         f"{c['graph_kernels']:.0f}", f"{c['syncs']:.0f}",
                         f"{c['allocations']:.0f}", its])
        self.res["steps"] = out
        nele = next(iter(out.values()))["nele"] if out else 0
        self.table("steps", format_table(
            f"time step (paper Tables 8-10), {nele} tetrahedra: ms per step, median [min-max] "
            f"of {self.steps} after the warm-up step(s); per step (median, counted by the backend): "
            f"kernel launches issued from Python, CUDA-graph replays and the kernels they ran, "
            f"host syncs, CuPy allocations; solver iterations of the last step (all solves)",
            ["variant", "step ms", "build s", "warm-up s", "vs 1 core", "launches", "replays",
             "graph kernels", "syncs", "allocs", "its p/m/t"], rows,
            ["paper (554,394 tets): 41.8 s 1 CPU core, 17.1 s 1 GPU, 4.88 s 4 cores + 1 GPU"]))

    def scaling(self):
        variants = []
        if self.gpu:
            variants.append(("gpu + device solvers", {"name": "gpu", "solver_mode": "device"})
                            if self.device_solver else
                            ("gpu + host solvers", {"name": "gpu", "solver_mode": "host"}))
        if self.cpu:
            variants.append((f"cpu {_threads()} cores", {"name": "cpu"}))
        out, rows = [], []
        for size in self.sizes:
            nele = 6 * size[0] * size[1] * size[2]
            for label, backend in variants:
                key = f"{size[0]}x{size[1]}x{size[2]}"
                if backend["name"] == "cpu" and nele > self.cpu_max_elements:
                    out.append({"size": key, "variant": label, "nele": nele,
                                "skipped": f"over --cpu-max-elements {self.cpu_max_elements}"})
                    rows.append([key, label, str(nele), "skipped", "-", "-", "-"])
                    continue
                r = run_variant(lambda b, s=size: self.make_config(b, s), label, backend, 0,
                                self.steps)
                per_ele_us = r["step"]["median_ms"] * 1e3 / r["nele"]
                mem = None if r["device_bytes"] is None else r["device_bytes"] / r["nele"]
                out.append({"size": key, "variant": label, "nele": r["nele"],
                            "nnodes": r["nnodes"], "step": r["step"], "build_s": r["build_s"],
                            "us_per_element": per_ele_us, "device_bytes": r["device_bytes"],
                            "device_bytes_per_element": mem})
                rows.append([key, label, str(r["nele"]), fmt_time(r["step"], 1),
                             f"{per_ele_us:.3f}", fmt_num(mem, ".0f"), f"{r['build_s']:.2f}"])
                self.say(f"  scaling {key} {label}: {fmt_time(r['step'], 1)} ms per step")
        self.res["scaling"] = out
        self.table("scaling", format_table(
            f"scaling: ms per step, median [min-max] of {self.steps} after the warm-up step(s)",
            ["mesh", "variant", "tets", "step ms", "us/element", "GPU B/element", "build s"],
            rows))

    # -- driver --------------------------------------------------------------------------
    def run(self) -> dict:
        m = self.res["machine"]
        self.say(f"dycore bench: python {m['python']}, numba {m['numba']}, "
                 f"{m['numba_threads']} numba threads, GPU: {m['gpu'] or 'none'} "
                 f"({m['gpu_note']})")
        need_mesh = any(p in self.parts for p in ("kernels", "assembly", "operators", "modes"))
        mesh, sp = self.build_mesh() if need_mesh else (None, None)
        if "kernels" in self.parts:
            self.kernels(mesh, self.bandwidth())
        if "assembly" in self.parts:
            self.assembly(mesh, sp)
        if "steps" in self.parts:
            self.step_table()
        if "scaling" in self.parts:
            self.scaling()
        if "run" in self.parts:
            self.run_table()
        for part in (p for p in self.parts if p in GPU_PARTS):     # in the order given
            run_gpu_part(self, part, mesh, sp)
        self.res["tables"] = self.tables
        return self.res


def _threads() -> int:
    import numba
    return numba.get_num_threads()


def _resources_text(res) -> str:
    """``registers/local bytes`` per thread, or ``-`` (simulator)."""
    return "-" if res is None else f"{res['registers_per_thread']}/{res['local_bytes_per_thread']}"


def _pct(x):
    return None if x is None else 100.0 * x


def _host(a):
    """A host copy of a NumPy or CuPy array."""
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a


def _rel(ref, got) -> float:
    """max |got − ref| / max |ref| (:func:`dycore.checks.common.compare_arrays`)."""
    from dycore.checks.common import compare_arrays
    return compare_arrays(ref, got)["max_rel"]


def _tracer_call(asm, d, **kw):
    """``call(want_matrix)`` -> the assembled (values, rhs) or (rhs,) of ``asm.tracer``."""
    def call(want_matrix):
        values, rhs = asm.tracer("bench", d["u_nl"], d["c_old"], d["src"], d["sigma"],
                                 d["c_ref"], d["kdiag"], d["dt_theta"], want_matrix=want_matrix,
                                 **kw)
        return (values, rhs) if want_matrix else (rhs,)
    return call


def run_bench(config=None, *, backend="both", repeat=5, steps=3, mesh=None, sizes=None,
              parts=DEFAULT_PARTS, block=128, cpu_max_elements=150_000, json_path=None,
              echo=print) -> dict:
    """Run the benchmark and return (and optionally write) its results.

    Parameters
    ----------
    config : path, optional
        YAML configuration (default: every default, the 48x48x40 mesh).
    backend : {"cpu", "gpu", "both"}
        Which paths to time; ``both`` leaves out the GPU where none is usable.
    repeat : int
        Timed repetitions of every kernel / assembly (after warm-up).
    steps : int
        Timed steps per Simulation (after one warm-up step).
    mesh : (nx, ny, nz), optional
        Mesh size overriding the configuration's.
    sizes : list of (nx, ny, nz), optional
        Scaling mesh sizes (default :data:`DEFAULT_SIZES`, or 1x/1.5x/2x ``mesh``).
    parts : sequence of str
        Subset of :data:`PARTS`.
    block : int
        GPU threads per block of the element kernels.
    cpu_max_elements : int
        Scaling sizes with more tetrahedra are skipped on the CPU.
    json_path : path, optional
        Where to write the results as JSON (with the text tables under ``tables``).
    echo : callable
        Receives every printed line.

    Returns
    -------
    dict
        Results keyed by part (``kernels``, ``assembly``, ``steps``, ``scaling``), plus
        ``machine``, ``options``, ``mesh``, ``bandwidth`` and ``tables``.
    """
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise ConfigError(f"bench --parts: unknown part {bad[0]!r} (choose from {', '.join(PARTS)})")
    bench = _Bench(config, backend, repeat, steps, mesh, sizes, tuple(parts), block,
                   cpu_max_elements, echo)
    try:
        return bench.run()
    finally:
        if json_path is not None:
            bench.res["tables"] = bench.tables
            path = Path(json_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(bench.res, indent=1, default=_json_default))


def _json_default(obj):
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)
