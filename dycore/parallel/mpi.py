"""MPI start-up for CPU ranks: the world communicator and one-message, all-ranks error exit.

mpi4py (with the ``mpich`` wheel, which also installs ``mpiexec``) comes with the ``mpi``
extra. :func:`abort_on_error` turns an exception on any rank into one message on stderr
(prefixed with the rank) and ``MPI_Abort``, so a failure on one rank ends every rank instead
of leaving the others waiting in a collective.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time

from dycore.errors import BackendUnavailableError

__all__ = ["abort_on_error", "idle_wait", "large", "world"]


def world():
    """``MPI.COMM_WORLD``.

    Raises
    ------
    BackendUnavailableError if mpi4py (or its MPI library) is not installed, or if the
    launcher announces several processes and this one is a world of one rank (mpi4py linked
    to another MPI than the launcher's: :func:`~dycore.parallel.launch.check_world`).
    """
    try:
        from mpi4py import MPI
    except ImportError as exc:                                    # pragma: no cover
        raise BackendUnavailableError(
            f"MPI runs need mpi4py and an MPI library: pip install -e \".[mpi]\" ({exc})"
        ) from exc
    from dycore.parallel.launch import check_world
    check_world(MPI.COMM_WORLD.size)
    return MPI.COMM_WORLD


def large(comm):
    """``comm`` for pickled messages of any size: mpi4py's ``pkl5`` wrapper of the same
    communicator (pickle protocol 5, the out-of-band buffers sent apart, each as large as it
    needs). A plain pickled message must stay below 2 GiB: at 30.7 M tets on 2 ranks a rank's
    pressure rows alone are ≈ 3 GB (MPI_ERR_ARG). Both ends of a message use it: the set-up's
    pieces, its gathers and the restart's scatter.

    comm : mpi4py intra-communicator. Returns an ``mpi4py.util.pkl5.Intracomm`` (``send``,
    ``recv``, ``gather``, ``bcast``, ... as the communicator's lower-case methods); anything
    else (a stand-in with those methods) comes back as it is."""
    from mpi4py import MPI
    from mpi4py.util import pkl5
    return pkl5.Intracomm(comm) if isinstance(comm, MPI.Intracomm) else comm


def idle_wait(comm, poll_s: float = 0.005) -> None:
    """A barrier that sleeps instead of spinning (collective): ``comm.Ibarrier()`` tested
    every ``poll_s`` seconds. Ranks that wait for rank 0's serial work (its mesh, its
    partition) call it before the broadcast that follows, so they leave the cores to rank 0's
    parallel loops; a blocking MPI collective polls at full speed on every waiting rank
    (Open MPI's default), and a parallel loop is as slow as its slowest thread."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(poll_s)


@contextlib.contextmanager
def abort_on_error(comm, exit_code: int = 1, passthrough: tuple = (), cleanup=None):
    """Run the block; on an exception print ``rank R: Type: message`` once and abort all ranks.

    ``SystemExit`` with status 0 and exceptions of the types in ``passthrough`` (errors every
    rank raises alike, which the caller reports) propagate. Other ranks are killed by
    ``MPI_Abort`` (the launcher reports the exit status ``exit_code``). ``cleanup`` (a callable,
    optional) runs first, its own errors ignored: rank 0 closes its output file there, so the
    snapshots written before the error stay readable.
    """
    try:
        yield
    except passthrough:
        raise
    except SystemExit as exc:
        if exc.code in (0, None):
            raise
        _cleanup(cleanup)
        _abort(comm, f"exit status {exc.code}", exit_code)
    except BaseException as exc:                                  # noqa: BLE001
        _cleanup(cleanup)
        _abort(comm, f"{type(exc).__name__}: {exc}", exit_code)


def _cleanup(cleanup) -> None:
    if cleanup is not None:
        with contextlib.suppress(BaseException):
            cleanup()


# seconds between printing the message and MPI_Abort: the launcher forwards a rank's stderr
# asynchronously and drops what it has not forwarded when the abort kills its proxies (with
# MPICH's hydra, 6 of 20 messages were lost without the pause, 0 of 80 with it)
ABORT_GRACE_S = 0.5


def _abort(comm, message: str, exit_code: int) -> None:
    print(f"rank {comm.rank} of {comm.size}: {message}", file=sys.stderr, flush=True)
    time.sleep(ABORT_GRACE_S)
    try:
        comm.Abort(exit_code)
    finally:                    # MPI_Abort may return before the launcher kills this process
        os._exit(exit_code)
