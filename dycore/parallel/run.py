"""``mpiexec -n K dycore run CONFIG``: a run decomposed over K CPU or GPU ranks, one output file.

:func:`~dycore.parallel.launch.launched_ranks` tells from the launcher's environment (no MPI
import) whether this process was started by ``mpiexec``; the CLI then calls :func:`run_distributed` on every rank.
Each step runs on all ranks (:class:`~dycore.parallel.simulation.DistributedSimulation`; with
``backend.name: gpu`` and ``solver_mode: device`` one GPU per rank,
:class:`~dycore.parallel.gpu_simulation.GpuRankSimulation`);
snapshots, checkpoints and diagnostics are gathered to rank 0, which alone writes the same
netCDF file a serial run writes (:class:`~dycore.io.netcdf.SnapshotWriter`, on its writer thread
as in a serial run; parallel netCDF is not used) and alone shows progress.

Errors: decisions every rank takes from global values (a solver that fails, the stability
watch, a configuration or output-path check made before the build) raise the same
:class:`~dycore.errors.DycoreError` on every rank, and the CLI prints it once (rank 0). Anything
raised on rank 0 alone while the others wait (writing the file) or any unexpected exception
goes through :func:`~dycore.parallel.mpi.abort_on_error`: one message naming the rank, and
``MPI_Abort`` ends every rank.
"""
from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

from dycore.errors import ConfigError, DycoreError
from dycore.parallel.launch import launched_ranks

__all__ = ["default_reduction", "launched_ranks", "run_distributed"]

log = logging.getLogger("dycore")


class NoWriter:
    """The writer of the ranks that write nothing: every method is a no-op (with
    :func:`root_only` nothing calls them; :class:`~dycore.timestepping.callbacks.Snapshots`
    and the others only name them)."""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None

    def close(self) -> None:
        return None


def root_only(comm, out=None, cleanup=None):
    """``submit(fn, *args, **kwargs)`` for the run's callbacks: ``fn`` runs on rank 0 only,
    where an exception (a write that fails there alone) aborts every rank
    (:func:`~dycore.parallel.mpi.abort_on_error`).

    ``out`` (rank 0's :class:`~dycore.io.background.BackgroundWriter`, or None): the call is
    queued on its writer thread, as in a serial run; the error of a queued write is raised by
    the next submit (or the final drain) and aborts every rank there, after ``cleanup`` (rank
    0 closes its files: :func:`~dycore.parallel.mpi.abort_on_error`)."""
    from dycore.parallel.mpi import abort_on_error

    def submit(fn, *args, **kwargs):
        if comm.rank == 0:
            with abort_on_error(comm, cleanup=cleanup):
                if out is None:
                    return fn(*args, **kwargs)
                return out.submit(fn, *args, **kwargs)
        return None
    return submit


def _restart_point(comm, config, restart, restart_at, path):
    """The restart point of ``--restart`` (:func:`~dycore.io.restart.find_restart`), read and
    checked on rank 0 alone: rank 0 gets the whole point, the other ranks a copy without its
    global arrays (``fields``, ``coords``, ``cell_nodes`` None; the fields reach them as their
    local slices, :meth:`DistributedSimulation.load_fields`).

    Raises
    ------
    The DycoreError of the read or of a check (on every rank): a file that is no restart point,
    another case or mesh configuration, appending to the restart file (serial only), a
    snapshot at or after ``time.t_end``. Another exception on rank 0 aborts every rank.
    """
    import dataclasses

    from dycore.parallel.mpi import abort_on_error

    point, problem = None, None
    if comm.rank == 0:
        with abort_on_error(comm, passthrough=(DycoreError,)):
            try:
                point = _read_restart_point(config, restart, restart_at, path)
            except DycoreError as exc:
                problem = exc
    problem = comm.bcast(problem, root=0)
    if problem is not None:
        raise problem
    light = None
    if comm.rank == 0:
        light = dataclasses.replace(point, fields=None, coords=None, cell_nodes=None)
    light = comm.bcast(light, root=0)
    return point if comm.rank == 0 else light


def _read_restart_point(config, restart, restart_at, path):
    """:func:`_restart_point`'s read and checks (serial)."""
    from dycore.io.restart import find_restart
    from dycore.timestepping.simulation import _same_file, check_restart_config

    point = find_restart(restart, restart_at, dt=config.time.dt)
    check_restart_config(config, point)
    if _same_file(path, point.checkpoint_of or point.path):
        raise ConfigError(f"--restart {point.path}: appending to the restart file is not "
                          "available in MPI runs; write a new file with --output NEW")
    if point.step >= config.time.n_steps:
        raise ConfigError(f"--restart {point.path}: its snapshot at t = {point.t:g} s "
                          f"(step {point.step}) is at or after time.t_end = "
                          f"{config.time.t_end:g} s; pass a later --t-end")
    return point


def default_reduction(config) -> str:
    """The ranks' dot products when the caller names none: ``backend.reduction`` unless it is
    ``auto``.

    ``auto`` means ``"exact"`` (correctly rounded: the same bits on any rank count) on CPU ranks
    and on GPU ranks that ask for reproducible sums (``backend.assembly: deterministic`` or
    ``strict``); ``"allreduce"`` (per-rank partials and an all-reduce sum) on GPU ranks with
    atomic assembly, whose sums differ from run to run anyway: measured on two H200s, the
    paper-mesh rank step 62.0 ms with the exact reduction against 37.8 ms
    (docs/performance.md).
    """
    b = config.backend
    if b.reduction != "auto":
        return b.reduction
    if b.name == "gpu" and b.assembly != "deterministic" and not b.strict:
        return "allreduce"
    return "exact"


def run_distributed(config, *, max_steps: int | None = None, overwrite: bool = False,
                    progress: bool | None = None, reduction: str | None = None, comm=None,
                    restart=None, restart_at: float | None = None):
    """Run the configured case over the ranks of ``comm`` (default ``MPI.COMM_WORLD``).

    Parameters
    ----------
    config : Config; max_steps : int or None (steps to take, else to time.t_end)
    overwrite : replace an existing output file; progress : as :func:`run_from_config`
    reduction : dot products of the solvers ("exact": same bits on any rank count;
        "allreduce"); None: :func:`default_reduction`
    restart, restart_at : as :func:`~dycore.timestepping.simulation.run_from_config`, into a
        NEW output file only (appending to the restart file is serial-only: ConfigError);
        ``max_steps`` then counts the steps after the restart. Rank 0 alone reads the file
        and sends each rank its local values

    Returns
    -------
    RunSummary on rank 0, None on the other ranks.

    Raises
    ------
    DycoreError subclasses, alike on every rank (see the module docstring).
    """
    from dycore import __version__
    from dycore.io.background import BackgroundWriter
    from dycore.io.followers import attach_followers
    from dycore.io.netcdf import SnapshotWriter
    from dycore.io.restart import checkpoint_path
    from dycore.parallel.launch import binding_advice, rank_cores
    from dycore.parallel.mpi import abort_on_error, world
    from dycore.parallel.simulation import DistributedSimulation
    from dycore.preflight import check_before_build
    from dycore.timestepping.callbacks import (Checkpoints, Diagnostics, Progress,
                                               Snapshots, StabilityCheck)
    from dycore.timestepping.schedules import AtEnd, IterationInterval, snapshot_every
    from dycore.timestepping.simulation import RunSummary

    comm = comm if comm is not None else world()
    reduction = reduction or default_reduction(config)
    root = comm.rank == 0
    advice = binding_advice(comm.allgather(rank_cores()))
    if root and advice:
        log.warning(advice)
    wall0 = time.perf_counter()
    path = Path(config.output_path)
    gpu = config.backend.name == "gpu"
    if gpu and config.backend.solver_mode != "device":
        raise ConfigError("backend.name: gpu in MPI runs needs backend.solver_mode: device "
                          "(GPU ranks solve on the device; pass --solver-mode device)")
    point, k0 = None, 0
    if restart is not None:            # rank 0 reads the file; the others get its verdict
        point = _restart_point(comm, config, restart, restart_at, path)
        k0 = point.step
    check_before_build(config, path, overwrite=overwrite)      # same verdict on every rank
    if root and overwrite and point is None:
        checkpoint_path(path).unlink(missing_ok=True)
    if gpu:                         # one GPU per rank (docs/parallel.md, "GPU ranks")
        from dycore.parallel.gpu_simulation import GpuRankSimulation
        sim = GpuRankSimulation(config, comm, reduction=reduction)
    else:
        sim = DistributedSimulation(config, comm, reduction=reduction)
    kind = "gpu" if gpu else "cpu"
    if point is not None:
        sim.check_restart_mesh(point)             # on rank 0, raised on every rank
        sim.load_fields(point.fields, point.t)
        if root:
            log.info("restart from %s at t = %g s (step %d); writing %s", point.path, point.t,
                     k0, path)
    t_start = sim.state.t
    tc, oc = config.time, config.output
    n_steps = tc.n_steps if max_steps is None else min(tc.n_steps, k0 + max_steps)
    if root:
        log.info("backend: %s, %d MPI ranks (%s reduction); halo of rank 0: %d values",
                 sim.describe() if gpu else "cpu", comm.size, reduction,
                 sim.halo_values_per_exchange)
        gm = [name for name in ("momentum", "tracer")
              if getattr(config.solvers, name).method == "gmres"]
        if gm:
            log.info("solvers.%s.method gmres: solved with BiCGStab on MPI ranks",
                     "/".join(gm))
    from dycore.parallel.halo import HaloExchange
    before = dict(HaloExchange.totals)
    if gpu:
        t = sim.transport
        c = sim.backend.counters             # (captured exchanges counted at each replay)
        before_gpu = (c.halo_bytes, c.halo_exchanges, getattr(t, "seconds", 0.0))
    writer = NoWriter()
    with abort_on_error(comm):
        if root:
            writer = SnapshotWriter(path, sim.mesh, config_yaml=config.resolved_yaml(),
                                    version=__version__, title=f"dycore {config.case.name}",
                                    picard_iterations=tc.nonlinear_iterations)
            writer = attach_followers(writer, config, sim.mesh)   # sections, XDMF series
    # collective gathers run on every rank; rank 0's writes on its writer thread, as in a
    # serial run (dycore.io.background): the ranks step on while it writes and compresses
    out = BackgroundWriter() if root else None

    def close_files():          # before an abort: the finished snapshots stay readable
        out.close()
        writer.close()
    submit = root_only(comm, out, cleanup=close_files)
    snapshots = Snapshots(writer, IterationInterval(snapshot_every(oc.output_interval, tc.dt))
                          | AtEnd(), submit=submit)

    def unstable(step, problem: str) -> str:
        return (f"unstable run at step {step.k} (t = {step.t:g} s): {problem}; stopped. {path} "
                f"keeps the snapshots up to t = {snapshots.last_t:g} s")

    callbacks = [StabilityCheck(describe=unstable),
                 Diagnostics(writer, IterationInterval(oc.diagnostics_every_steps) | AtEnd(),
                             submit=submit),
                 snapshots]
    if config.checkpoint_steps > 0:
        callbacks.append(Checkpoints(checkpoint_path(path),
                                     IterationInterval(config.checkpoint_steps), output=path,
                                     submit=submit))
    callbacks.append(Progress((oc.progress if progress is None else progress) and root))
    table = ""
    agreed = True       # False: an error of this rank alone, which abort_on_error turns into
    try:                # MPI_Abort (the other ranks may wait in a collective of the step)
        sim.run(steps=n_steps - k0, callbacks=callbacks)
        if root:
            with abort_on_error(comm, cleanup=close_files):   # a write that failed on the
                out.close()                                     # thread: every rank stops
    except DycoreError:
        raise           # raised alike on every rank (an unstable run): they meet in close()
    except BaseException:
        agreed = False
        raise
    finally:
        try:
            if root:
                with contextlib.suppress(Exception):   # already failing: keep the first error
                    out.close()
            if root and writer is not None:
                with contextlib.suppress(Exception):
                    k = k0 + int(round((sim.state.t - t_start) / tc.dt))
                    table = sim.timers.table(
                        f"stage timers of rank 0 ({kind}, {comm.size} MPI ranks, "
                        f"{sim.mesh.nele} tetrahedra, {sim.mesh.nnodes} nodes, {k - k0} steps)")
                    writer.write_timers(sim.timers.as_dict(), table)
                writer.close()
        finally:    # CUDA graphs, then the NCCL communicator, on every rank (a barrier):
            if gpu and agreed:      # else no rank could exit
                sim.close()
    diag = sim.last_diagnostics
    k = k0 + int(round((sim.state.t - t_start) / tc.dt))
    halo = {key: HaloExchange.totals[key] - before[key] for key in before}
    if gpu:                          # the device halo's bytes, counted by the backend
        t, c = sim.transport, sim.backend.counters
        halo = {"bytes": c.halo_bytes - before_gpu[0],
                "exchanges": c.halo_exchanges - before_gpu[1],
                "seconds": getattr(t, "seconds", 0.0) - before_gpu[2]}
    halo = comm.gather(halo, root=0)
    if not root:
        return None
    steps = max(k - k0, 1)
    log.info("halo exchanges per step: %.0f kB sent by all ranks, %.1f exchanges and %.3f s "
             "per rank (mean over ranks)", sum(h["bytes"] for h in halo) / steps / 1e3,
             sum(h["exchanges"] for h in halo) / len(halo) / steps,
             sum(h["seconds"] for h in halo) / len(halo) / steps)
    return RunSummary(output_path=path, steps=n_steps - k0, t=sim.state.t,
                      wall_time=time.perf_counter() - wall0, timers_table=table,
                      last_diagnostics=diag, backend=f"{kind}, {comm.size} MPI ranks")
