"""``dycore run`` under ``mpiexec``: the command's MPI branch (errors and output once, rank 0).

``dycore.cli`` calls :func:`cmd_run_mpi` when :func:`~dycore.parallel.run.launched_ranks` says
the process was started by an MPI launcher (``mpiexec -n K dycore run CONFIG`` or
``mpiexec -n K python -m dycore run CONFIG``; ``-n 1`` also takes this branch, the serial code
path is plain ``dycore run``).
"""
from __future__ import annotations

import contextlib
import logging

from dycore.errors import ConfigError, DycoreError

__all__ = ["cmd_run_mpi"]

EXIT_OK, EXIT_ERROR, EXIT_CONFIG_ERROR = 0, 1, 2


def cmd_run_mpi(args, config) -> int:
    """Run ``config`` over the launched ranks with ``args`` of ``dycore run``.

    Returns the exit status. A DycoreError (raised alike on every rank) propagates on rank 0
    only, where the CLI prints it; the other ranks return the same status silently, and their
    ``dycore`` log (warnings, progress) is silenced. ``--restart`` writes a new file
    (``--output NEW``); appending to the restart file raises ConfigError.
    """
    from dycore.parallel.mpi import world

    comm = world()
    if comm.rank != 0:         # warnings and progress once: rank 0 logs for all
        logging.getLogger("dycore").setLevel(logging.CRITICAL + 1)
    try:                       # every rank sees the same files: the same verdict
        from dycore.io.safety import check_outputs_not_inputs, run_inputs_and_outputs
        restart = args.restart[0] if getattr(args, "restart", None) is not None else None
        check_outputs_not_inputs(*run_inputs_and_outputs(config, restart))
    except DycoreError:
        if comm.rank == 0:
            raise
        return EXIT_ERROR
    with _rank0_output_lock(comm, config) as refused:
        if refused is not None:                         # another process writes the output
            if comm.rank == 0:
                raise refused
            return EXIT_ERROR
        return _run(args, config, comm)


@contextlib.contextmanager
def _rank0_output_lock(comm, config):
    """Rank 0 (the only writer) holds the output's lock (:func:`dycore.io.safety.output_lock`)
    for the block; yields None, or on every rank the OutputError of a refused lock."""
    from dycore.errors import OutputError
    from dycore.io.safety import output_lock

    with contextlib.ExitStack() as stack:
        message = None
        if comm.rank == 0:
            try:
                stack.enter_context(output_lock(config.output_path))
            except OutputError as exc:
                message = str(exc)
        message = comm.bcast(message, root=0)
        yield None if message is None else OutputError(message)


def _run(args, config, comm) -> int:
    from dycore.parallel.mpi import abort_on_error
    from dycore.parallel.run import run_distributed

    try:
        restart, restart_at = (args.restart if getattr(args, "restart", None) is not None
                               else (None, None))
        # anything but a DycoreError may be one rank's alone: abort every rank with it
        with abort_on_error(comm, passthrough=(DycoreError,)):
            summary = run_distributed(config, max_steps=args.steps, overwrite=args.overwrite,
                                      comm=comm, restart=restart, restart_at=restart_at)
    except DycoreError as exc:
        if comm.rank == 0:
            raise
        return EXIT_CONFIG_ERROR if isinstance(exc, ConfigError) else EXIT_ERROR
    if comm.rank != 0:
        return EXIT_OK
    if not getattr(args, "quiet", False):
        print(summary.timers_table)
    print(f"{summary.steps} steps to t = {summary.t:g} s in {summary.wall_time:.2f} s wall time "
          f"on {comm.size} MPI ranks")
    print(f"output: {summary.output_path}")
    if "xdmf" in config.output.formats:          # written with each snapshot on rank 0
        from dycore.io.xdmf import xdmf_summary
        print(xdmf_summary(summary.output_path))
    return EXIT_OK
