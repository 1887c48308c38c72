"""``dycore doctor``: what a bug report needs, and whether a GPU run can work here.

Like ``xarray.show_versions()``: Python and the platform, the versions of the packages a run
uses, the GPU (name, driver, the CUDA version the driver supports and the one the installed
wheels are built for), NCCL, cuDSS (the direct pressure solve), MPI (mpi4py's library and the
``mpiexec`` on PATH, and whether they are the same implementation), the numba kernel cache
directory and whether it is writable.

Every probe is a function that returns :class:`Line` s and catches its own failure (reported as
a line, never raised), and nothing CUDA-related is imported at module level: the command runs
on any machine. :func:`gpu_verdict` turns the probes into the answer "can a GPU run work"; the
command exits :data:`EXIT_GPU_OK` (0) when it can, :data:`EXIT_NO_GPU` (3) when it cannot (CPU
runs are not affected).
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

__all__ = ["Line", "Report", "collect", "gpu_verdict", "driver_supports", "EXIT_GPU_OK",
           "EXIT_NO_GPU", "PACKAGES", "MIN_DRIVER"]

#: exit status of ``dycore doctor``: a GPU run can work / cannot work here
EXIT_GPU_OK, EXIT_NO_GPU = 0, 3

#: distributions whose versions a bug report needs (name as pip knows it)
PACKAGES = ("numpy", "scipy", "numba", "numba-cuda", "cuda-bindings", "cuda-toolkit",
            "netCDF4", "h5py", "pyamg", "pydantic", "xarray", "meshio", "matplotlib",
            "mpi4py", "mpich", "pymetis", "nvtx")

#: the oldest Linux driver (major, minor) of each CUDA major version: CUDA 13.x needs a
#: 580 driver, CUDA 12.x a 525.60.13 one (NVIDIA's CUDA toolkit release notes, "CUDA Toolkit
#: and Corresponding Driver Versions", minor-version compatibility)
MIN_DRIVER = {12: (525, 60), 13: (580, 0)}

_TIMEOUT_S = 20


@dataclass
class Line:
    """One finding: ``section`` / ``name``: ``value``; ``ok`` False marks a problem, None a
    plain fact."""

    section: str
    name: str
    value: str
    ok: bool | None = None


@dataclass
class Report:
    """Every finding of :func:`collect` and the facts :func:`gpu_verdict` needs."""

    lines: list[Line] = field(default_factory=list)
    facts: dict = field(default_factory=dict)

    def add(self, section: str, name: str, value, ok: bool | None = None) -> None:
        self.lines.append(Line(section, name, str(value), ok))

    def text(self) -> str:
        """The report as aligned text, one section after another."""
        out, section = [], None
        width = max((len(line.name) for line in self.lines), default=0)
        for line in self.lines:
            if line.section != section:
                section = line.section
                out += ["", section, "-" * len(section)]
            mark = {True: "", False: "  <-- problem", None: ""}[line.ok]
            out.append(f"{line.name:<{width}}  {line.value}{mark}")
        return "\n".join(out[1:]) + "\n"

    def to_dict(self) -> dict:
        return {"lines": [asdict(line) for line in self.lines], "facts": self.facts}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _run(argv: list[str]) -> str:
    """stdout (+ stderr) of a short command, or raise OSError / SubprocessError."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    return (proc.stdout + proc.stderr).strip()


def _probe(report: Report, section: str, fn) -> None:
    """Run one probe; its failure is a line of the report, not an exception."""
    try:
        fn(report)
    except Exception as exc:  # noqa: BLE001 - the point of a probe
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        report.add(section, f"probe {fn.__name__.lstrip('_')}", f"failed: "
                   f"{type(exc).__name__}: {first}", False)


# ------------------------------------------------------------------------------- probes
def _system(report: Report) -> None:
    from dycore import __version__

    report.add("system", "dycore", f"{__version__} ({Path(__file__).resolve().parent})")
    report.add("system", "python", f"{platform.python_version()} ({sys.executable})")
    report.add("system", "platform", platform.platform())
    report.add("system", "cpu cores", os.cpu_count())
    for name in ("NUMBA_NUM_THREADS", "NUMBA_ENABLE_CUDASIM", "NUMBA_CACHE_DIR",
                 "CUDA_VISIBLE_DEVICES", "DYCORE_NVTX"):
        if os.environ.get(name):
            report.add("system", name, os.environ[name])


def _packages(report: Report) -> None:
    for dist in PACKAGES:
        report.add("packages", dist, _version(dist) or "not installed")
    cupy = sorted(d.metadata["Name"] for d in metadata.distributions()
                  if (d.metadata["Name"] or "").lower().startswith("cupy"))
    report.add("packages", "cupy", ", ".join(f"{n} {_version(n)}" for n in cupy)
               or "not installed")
    report.facts["cupy_dists"] = cupy


def _netcdf_libraries(report: Report) -> None:
    import netCDF4

    report.add("packages", "netCDF C / HDF5", f"{netCDF4.__netcdf4libversion__} / "
               f"{netCDF4.__hdf5libversion__}")


def _wheel_cuda_major() -> tuple[int | None, str]:
    """The CUDA major version the installed wheels are built for, and where it was read."""
    for dist in ("cuda-bindings", "cuda-toolkit"):
        v = _version(dist)
        if v:
            return int(v.split(".")[0]), f"{dist} {v}"
    for dist in ("cupy-cuda13x", "cupy-cuda12x"):
        if _version(dist):
            return int(dist[len("cupy-cuda"):][:2]), dist
    return None, "no CUDA wheels installed"


def _gpu(report: Report) -> None:
    facts = report.facts
    major, source = _wheel_cuda_major()
    facts["wheel_cuda_major"] = major
    report.add("gpu", "CUDA of the wheels", f"{major}.x ({source})" if major else source)
    smi = shutil.which("nvidia-smi")
    facts["driver"] = None
    if smi is None:
        report.add("gpu", "nvidia-smi", "not on PATH (no NVIDIA driver installed?)")
    else:
        out = _run([smi, "--query-gpu=name,driver_version,memory.total,compute_cap",
                    "--format=csv,noheader"])
        rows = [r for r in out.splitlines() if r.strip()]
        for k, row in enumerate(rows):
            report.add("gpu", f"GPU {k}", row)
        match = re.search(r",\s*(\d+)\.(\d+)", rows[0]) if rows else None
        if match:
            facts["driver"] = (int(match.group(1)), int(match.group(2)))
            report.add("gpu", "driver", ".".join(map(str, facts["driver"])))
        else:
            report.add("gpu", "nvidia-smi", out.splitlines()[0] if out else "no output", False)
    from dycore.backend import gpu_usable         # imports numba.cuda: no CUDA context yet

    usable, why = gpu_usable()
    facts["numba_cuda_device"] = usable
    facts["numba_cuda_why"] = why
    report.add("gpu", "numba-cuda device", why, usable)
    if usable and why != "CUDA simulator":
        from numba.cuda.cudadrv.driver import driver

        facts["driver_cuda"] = tuple(driver.get_version())
        report.add("gpu", "driver's CUDA version", ".".join(map(str, facts["driver_cuda"])))
    try:
        import cupy

        facts["cupy"] = cupy.__version__
        report.add("gpu", "cupy import", f"{cupy.__version__}", True)
    except Exception as exc:  # noqa: BLE001 - ImportError, or CUDA libraries missing
        facts["cupy"] = None
        report.add("gpu", "cupy import", f"fails ({type(exc).__name__}: "
                   f"{str(exc).splitlines()[0] if str(exc) else ''}); pip install -e \".[gpu]\"",
                   None)


def _nccl(report: Report) -> None:
    wheels = sorted(d.metadata["Name"] for d in metadata.distributions()
                    if (d.metadata["Name"] or "").lower().startswith("nvidia-nccl"))
    report.add("nccl", "wheel", ", ".join(f"{n} {_version(n)}" for n in wheels)
               or "not installed")
    if report.facts.get("cupy"):
        try:
            from cupy.cuda import nccl

            version = nccl.get_version() if getattr(nccl, "available", True) else None
        except Exception as exc:  # noqa: BLE001 - NCCL library missing or broken
            first = str(exc).splitlines()[0] if str(exc) else ""
            version, why = None, f"{type(exc).__name__}: {first}"
        else:
            why = "not available"
        report.add("nccl", "cupy.cuda.nccl", f"version {version}" if version else
                   f"{why} (needed only by runs over several GPUs)")
    else:
        report.add("nccl", "cupy.cuda.nccl", "(no CuPy)")


def _cudss(report: Report) -> None:
    """cuDSS through nvmath-python: the direct pressure solve (``solvers.pressure.method``)."""
    report.add("cudss", "nvmath-python", _version("nvmath-python") or "not installed")
    wheels = sorted(d.metadata["Name"] for d in metadata.distributions()
                    if (d.metadata["Name"] or "").lower().startswith("nvidia-cudss"))
    report.add("cudss", "wheel", ", ".join(f"{n} {_version(n)}" for n in wheels)
               or "not installed")
    from dycore.solvers.direct import comm_layer
    layer = report.facts["cudss_comm_layer"] = comm_layer()
    report.add("cudss", "NCCL communication layer", layer or "not installed (GPU ranks "
               "replicate the factorisation)")
    if not report.facts.get("cupy"):
        report.add("cudss", "library", "(no CuPy)")
        return
    try:
        from nvmath.bindings import cudss
        version = ".".join(str(cudss.get_property(k)) for k in range(3))
    except Exception as exc:  # noqa: BLE001 - not installed or its library missing
        first = str(exc).splitlines()[0] if str(exc) else ""
        report.add("cudss", "library", f"{type(exc).__name__}: {first} (method auto runs CG; "
                   "pip install -e \".[gpu-direct]\" for the direct pressure solve)")
    else:
        report.add("cudss", "library", f"version {version} (method auto: direct pressure "
                   "solve)")


def _mpi_family(text: str) -> str | None:
    low = text.lower()
    for family in ("open mpi", "mpich", "intel(r) mpi", "mvapich"):
        if family in low or family.replace("(r)", "") in low:
            return family.replace("(r)", "")
    if "hydra" in low:
        return "mpich"
    if "open-mpi" in low or "openrte" in low:
        return "open mpi"
    return None


def _mpi(report: Report) -> None:
    facts = report.facts
    library = None
    if _version("mpi4py"):
        import mpi4py

        mpi4py.rc.initialize = False            # no MPI_Init: version queries only
        mpi4py.rc.finalize = False
        from mpi4py import MPI

        library = " ".join(MPI.Get_library_version().strip().splitlines()[0].split())
        report.add("mpi", "mpi4py library", library)
    else:
        report.add("mpi", "mpi4py", "not installed (pip install -e \".[mpi]\" for mpiexec runs)")
    mpiexec = shutil.which("mpiexec")
    launcher = None
    if mpiexec is None:
        report.add("mpi", "mpiexec", "not on PATH")
    else:
        launcher = _run([mpiexec, "--version"])
        lines = [" ".join(line.split()) for line in launcher.splitlines() if line.strip()]
        named = next((line for line in lines if "version" in line.lower()),
                     lines[0] if lines else "no output")
        report.add("mpi", "mpiexec", f"{mpiexec} ({named})")
    a, b = _mpi_family(library or ""), _mpi_family(launcher or "")
    layer = facts.get("cudss_comm_layer")
    why = ("no cuDSS NCCL communication layer" if not layer else
           f"mpi4py runs {a or 'no known MPI'}, cuDSS's layer needs Open MPI"
           if a != "open mpi" else "")
    report.add("mpi", "factorisation over GPU ranks",
               "distributed possible (cuDSS NCCL layer, Open MPI)" if not why else
               f"replicated only: {why} (solvers.pressure.factorisation; docs/parallel.md)")
    if library and launcher:
        agree = a is not None and a == b
        facts["mpi_agree"] = agree
        report.add("mpi", "mpi4py and mpiexec", f"agree ({a})" if agree else
                   f"differ (mpi4py: {a or 'unknown'}, mpiexec: {b or 'unknown'}): an "
                   "mpiexec run would start independent single-rank jobs", agree)


def _kernel_cache(report: Report) -> None:
    """Where numba writes the cached @njit element functions (``cache=True``)."""
    from dycore.fem import transform

    dispatcher = next(v for v in vars(transform).values() if hasattr(v, "_cache")
                      and hasattr(v._cache, "_cache_path"))
    path = Path(dispatcher._cache._cache_path)
    report.facts["kernel_cache"] = str(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".dycore-doctor-"):
            pass
        writable = True
    except OSError as exc:
        writable = False
        report.add("kernel cache", "error", exc.strerror or str(exc), False)
    state = ("writable" if writable else
             "NOT writable: every run compiles the kernels anew; set NUMBA_CACHE_DIR")
    report.add("kernel cache", "numba cache", f"{path} ({state})", writable)


# ------------------------------------------------------------------------------ verdict
def driver_supports(cuda_major: int | None, driver: tuple[int, int] | None
                    ) -> tuple[bool, str]:
    """Whether a Linux driver ``(major, minor)`` runs wheels built for CUDA ``cuda_major``
    (:data:`MIN_DRIVER`); (True, "") when either is unknown (nothing to check)."""
    if cuda_major is None or driver is None or cuda_major not in MIN_DRIVER:
        return True, ""
    need = MIN_DRIVER[cuda_major]
    if tuple(driver) >= need:
        return True, ""
    return False, (f"CUDA {cuda_major} wheels need driver >= {need[0]}"
                   f"{'.' + str(need[1]) if need[1] else ''}, the driver is "
                   f"{driver[0]}.{driver[1]:02d}")


def gpu_verdict(facts: dict) -> tuple[bool, list[str]]:
    """(a GPU run can work, the reasons it cannot) from :attr:`Report.facts`."""
    why = []
    if not facts.get("numba_cuda_device"):
        why.append(facts.get("numba_cuda_why") or "numba-cuda finds no CUDA device")
    elif facts.get("numba_cuda_why") == "CUDA simulator":
        why.append("NUMBA_ENABLE_CUDASIM=1: the CUDA simulator, not a GPU")
    ok, reason = driver_supports(facts.get("wheel_cuda_major"), facts.get("driver"))
    if not ok:
        why.append(reason)
    driver_cuda, wheels = facts.get("driver_cuda"), facts.get("wheel_cuda_major")
    if driver_cuda and wheels and driver_cuda[0] < wheels:
        why.append(f"the driver supports CUDA {driver_cuda[0]}.{driver_cuda[1]}, the wheels "
                   f"are CUDA {wheels}")
    if not facts.get("cupy"):
        why.append("CuPy does not import (pip install -e \".[gpu]\")")
    return not why, why


def collect() -> Report:
    """Run every probe; returns the :class:`Report` (its verdict lines last)."""
    report = Report()
    for section, probe in (("system", _system), ("packages", _packages),
                           ("packages", _netcdf_libraries), ("gpu", _gpu), ("nccl", _nccl),
                           ("cudss", _cudss), ("mpi", _mpi), ("kernel cache", _kernel_cache)):
        _probe(report, section, probe)
    ok, why = gpu_verdict(report.facts)
    report.facts["gpu_run"] = ok
    report.add("verdict", "CPU run", "can work")
    report.add("verdict", "GPU run", "can work" if ok else "cannot work: " + "; ".join(why), ok)
    return report


def main_text(as_json: bool = False) -> tuple[str, int]:
    """The printed report (text or JSON) and the exit status of ``dycore doctor``."""
    report = collect()
    status = EXIT_GPU_OK if report.facts["gpu_run"] else EXIT_NO_GPU
    if as_json:
        return json.dumps(report.to_dict(), indent=2, default=str) + "\n", status
    verdict = "a GPU run can work" if status == EXIT_GPU_OK else "no GPU run here"
    head = (f"dycore doctor: paste this whole report into a bug report\n"
            f"exit status {status}: {verdict}\n\n")
    return head + report.text(), status
