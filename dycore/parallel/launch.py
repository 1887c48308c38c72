"""Launch safety: what the launcher's environment says against what mpi4py's MPI sees.

``mpiexec``/``srun`` tell each process how many ranks it is one of through environment
variables. If mpi4py was built against another MPI library than the launcher's (e.g. the
packages installed with ``pip --target`` next to a system Open MPI, or the ``mpich`` wheel's
mpi4py under a Slurm ``srun`` without PMI), ``MPI_Init`` does not find the launcher, every
process becomes a world of ONE rank, and K independent single-rank runs race on one output
file. :func:`launched_ranks` reads the variables (no MPI import); :func:`check_world` raises
when the launcher announces K > 1 ranks and the world has one.

The launch line (docs/parallel.md): ``mpiexec -n K dycore run CONFIG`` with the ``mpiexec``
of the ``mpich`` wheel (beside the Python of the environment, ``$(python -c "import sys,
os; print(os.path.dirname(sys.executable))")/mpiexec``), or the mpiexec of the MPI mpi4py was
built against.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from dycore.errors import BackendUnavailableError

__all__ = ["LAUNCHER_VARIABLES", "binding_advice", "check_world", "find_mpiexec",
           "launched_ranks", "launcher_ranks", "rank_cores"]

#: (variable, launcher, counts the -n 1 case) — the rank count a launcher announces, in the
#: order they are read. The first three make ``dycore run`` take the MPI branch even for one
#: rank (``mpiexec -n 1``); the others only when they announce more than one process (a
#: serial run under ``srun -n 1`` or in a one-rank Hydra job stays serial).
LAUNCHER_VARIABLES = (
    ("PMI_SIZE", "MPICH / Intel MPI mpiexec (Hydra, PMI)", True),
    ("OMPI_COMM_WORLD_SIZE", "Open MPI mpirun / mpiexec", True),
    ("PMIX_SIZE", "a PMIx launcher", True),
    ("MV2_COMM_WORLD_SIZE", "MVAPICH2 mpirun_rsh", False),
    ("MPI_LOCALNRANKS", "MPICH's Hydra (ranks on this node)", False),
    ("SLURM_STEP_NUM_TASKS", "Slurm srun", False),
)


def launcher_ranks(environ=None) -> tuple[str, int] | None:
    """The first launcher variable of :data:`LAUNCHER_VARIABLES` that announces ranks.

    Parameters
    ----------
    environ : mapping (default ``os.environ``)

    Returns
    -------
    (variable name, rank count), or None when no launcher variable applies (a value that is
    not a positive integer is ignored; the variables of the last group count only above 1).
    """
    env = os.environ if environ is None else environ
    for var, _, counts_one in LAUNCHER_VARIABLES:
        value = env.get(var, "").strip()
        if value.isdigit() and int(value) >= (1 if counts_one else 2):
            return var, int(value)
    return None


def launched_ranks(environ=None) -> int:
    """Rank count announced by an MPI launcher in the environment; 0 when not launched."""
    found = launcher_ranks(environ)
    return 0 if found is None else found[1]


def _library() -> str:
    try:
        from mpi4py import MPI
        return " ".join(MPI.Get_library_version().strip().splitlines()[0].split())
    except Exception as exc:                                      # noqa: BLE001
        return f"unknown ({type(exc).__name__}: {exc})"


def check_world(size: int, environ=None, library: str | None = None) -> None:
    """Refuse a world of one rank when the launcher started several processes.

    Parameters
    ----------
    size : int — ``MPI.COMM_WORLD.size`` as mpi4py sees it
    environ : mapping (default ``os.environ``)
    library : str — mpi4py's MPI library for the message (default: asked from mpi4py)

    Raises
    ------
    BackendUnavailableError naming the launcher variable, the rank count it announces, the
    MPI library mpi4py loaded, and the fix — on every rank alike, before any output is opened.
    """
    found = launcher_ranks(environ)
    if found is None or size != 1 or found[1] <= 1:
        return
    var, k = found
    who = dict((v, w) for v, w, _ in LAUNCHER_VARIABLES)[var]
    lib = library if library is not None else _library()
    raise BackendUnavailableError(
        f"launched as {k} processes ({var}={k}, set by {who}) but mpi4py's MPI sees a world of "
        f"1 rank: mpi4py is linked to another MPI library than the launcher's (mpi4py: {lib}), "
        f"so the {k} processes would each run the whole case alone and write the same output. "
        "Fix: launch with the mpiexec of mpi4py's MPI (with the mpich wheel of the mpi extra: "
        "the mpiexec beside this Python, `python -m pip show -f mpich`), or rebuild mpi4py "
        "against the launcher's MPI (`MPICC=<its mpicc> python -m pip install --no-binary "
        "mpi4py --force-reinstall mpi4py`); docs/parallel.md, 'Launching'")


def find_mpiexec() -> str | None:
    """The ``mpiexec`` to launch ranks with: the one beside this Python (the ``mpich`` wheel's,
    which belongs to mpi4py's MPI), else the first on ``PATH``; None when there is none."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def rank_cores() -> tuple[str, int, int]:
    """(host name, cores this process may run on, cores of the host): what
    :func:`binding_advice` reads, one tuple per rank (``os.sched_getaffinity`` where the
    system has it, else every core)."""
    import socket
    cpus = os.cpu_count() or 1
    try:
        mine = len(os.sched_getaffinity(0))
    except AttributeError:                       # (macOS, Windows: no affinity call)
        mine = cpus
    return socket.gethostname(), mine, cpus


def binding_advice(ranks) -> str | None:
    """A warning when the launcher bound every rank of a host to one core while the host has
    at least two cores for each of them, else None.

    Open MPI's ``mpiexec`` binds each rank to one core by default, so the set-up's parallel
    loops (the mesh's node graph, element assembly) run on one thread a rank: at 30.7 M tets
    on four ranks of a 16-core host each rank's piece took 46.7 s, against 37.5 s unbound
    (one H200 host; docs/performance.md).

    Parameters
    ----------
    ranks : sequence of :func:`rank_cores` tuples, one per rank (``comm.allgather``)

    Returns
    -------
    str (the hosts, their ranks and cores, and the launch options that give each rank T
    cores) or None
    """
    hosts: dict[str, list] = {}
    for host, mine, cpus in ranks:
        hosts.setdefault(host, []).append((int(mine), int(cpus)))
    bound = []
    for host, rs in sorted(hosts.items()):
        cpus = min(c for _, c in rs)
        if max(m for m, _ in rs) == 1 and cpus >= 2 * len(rs):
            bound.append((host, len(rs), cpus))
    if not bound:
        return None
    t = min(c // k for _, k, c in bound)
    where = ", ".join(f"{k} on {h} ({c} cores)" for h, k, c in bound)
    return (f"each MPI rank is bound to one core ({where}): the set-up's parallel loops run "
            f"on one thread. Give each rank {t} cores: Open MPI `mpiexec --map-by "
            f"slot:PE={t} --bind-to core`, MPICH `mpiexec -bind-to core:{t}` (or no binding: "
            "`--bind-to none`); docs/parallel.md, 'Launching'")
