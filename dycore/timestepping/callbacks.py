"""Callbacks of the run loop: what a run does besides stepping, each with a schedule.

:func:`~dycore.timestepping.loop.run_loop` calls, for every callback in the order given,
``initialize(sim, start)`` before the first step, ``cb(sim, step)`` after each step its
``schedule`` fires at (:mod:`dycore.timestepping.schedules`), and ``finalize(sim, step,
error)`` at the end (also after an exception). ``dycore run`` uses, in this order::

    StabilityCheck()                                    # every step; raises InstabilityError
    Diagnostics(writer, IterationInterval(n) | AtEnd()) # buffered, flushed before a snapshot
    Snapshots(writer, IterationInterval(every) | AtEnd())
    Checkpoints(path, IterationInterval(m))             # after the snapshot of the same step
    Progress()

Writes go through ``submit(fn, *args, **kwargs)``: a direct call by default, the writer thread
(:class:`~dycore.io.background.BackgroundWriter`) in ``dycore run``, rank 0 only in an MPI run.
A callback of your own subclasses :class:`Callback` (docs/architecture.md has an example); a
plain function ``fn(sim, diag)`` is called after every step.
"""
from __future__ import annotations

from pathlib import Path

from dycore.timestepping.schedules import EveryStep

__all__ = ["Callback", "FunctionCallback", "StabilityCheck", "Diagnostics", "Snapshots",
           "Checkpoints", "Progress", "Lockstep", "NetCDFWriter"]


def _direct(fn, *args, **kwargs):
    return fn(*args, **kwargs)


class Callback:
    """Base class: override ``__call__`` (and ``initialize``/``finalize`` when needed).

    Attributes
    ----------
    schedule : the :mod:`~dycore.timestepping.schedules` schedule (default: every step)

    Optional methods the loop looks for: ``check_fields(sim, step, fields)`` runs when a
    callback first asks for ``step.fields()`` and may raise; ``before_output(sim, step)`` runs
    after the checks, before the fields are written.
    """

    schedule = EveryStep()

    def initialize(self, sim, step) -> None:
        """Before the first step (``step``: the start, ``step.diag`` empty)."""

    def __call__(self, sim, step):
        """After a step the schedule fires at; returning True ends the run after it."""
        return None

    def finalize(self, sim, step, error) -> None:
        """After the last step taken, or the exception ``error`` (then re-raised)."""


class FunctionCallback(Callback):
    """A plain function ``fn(sim, diag)`` called after every step (``schedule`` to choose
    other steps); ``diag`` is a copy of the step's diagnostics with ``step`` (the step number
    since t = 0) and ``t`` [s] added. Returning True ends the run."""

    def __init__(self, fn, schedule=None):
        self.fn = fn
        if schedule is not None:
            self.schedule = schedule

    def __call__(self, sim, step):
        return self.fn(sim, dict(step.diag, step=step.k, t=step.t))


class StabilityCheck(Callback):
    """Stop with InstabilityError when a step's diagnostics are non-finite or max|w| exceeds
    ``stability.max_speed_factor`` x the inflow speed, and when the host fields fetched for
    output have a non-finite or too large velocity (:class:`~dycore.preflight.StabilityWatch`).

    Parameters
    ----------
    watch : StabilityWatch (default: from the simulation's configuration and case)
    describe : ``describe(step, problem) -> str``, the error message (default
        ``"unstable run at t = T s: PROBLEM"``)
    """

    def __init__(self, watch=None, describe=None):
        self.watch, self.describe = watch, describe

    def initialize(self, sim, step) -> None:
        if self.watch is None:
            from dycore.preflight import StabilityWatch, inflow_speed

            params = getattr(sim, "params", None)
            if params is None:
                params = sim.config.case.build_parameters()
            self.watch = StabilityWatch(sim.config.stability.max_speed_factor,
                                        inflow_speed(params))

    def _error(self, step, problem):
        from dycore.errors import InstabilityError

        text = (self.describe(step, problem) if self.describe is not None
                else f"unstable run at t = {step.t:g} s: {problem}")
        return InstabilityError(text)

    def __call__(self, sim, step):
        problem = self.watch.step_problem(step.diag)
        if problem:
            step.problem = problem
            raise self._error(step, problem)

    def check_fields(self, sim, step, fields) -> None:
        problem = sim.agree(self.watch.fields_problem(fields) if fields is not None else None)
        if problem:
            raise self._error(step, problem)


class NetCDFWriter:
    """A netCDF output file (:class:`~dycore.io.netcdf.SnapshotWriter`) opened when the run
    starts, with the simulation's mesh and configuration, and closed when it ends; give the same
    object to :class:`Snapshots` and :class:`Diagnostics` to write both into one file.

    Parameters
    ----------
    path : str or Path
    overwrite : replace an existing file (else OutputError when ``path`` exists)

    Raises
    ------
    OutputError (when the run starts) for an existing ``path`` without ``overwrite``, or a file
    that cannot be written.
    """

    def __init__(self, path, *, overwrite: bool = False):
        self.path, self.overwrite = Path(path), bool(overwrite)
        self.writer, self._users = None, 0

    def open(self, sim):
        """The open SnapshotWriter (created by the first caller)."""
        if self.writer is None:
            from dycore import __version__
            from dycore.errors import OutputError
            from dycore.io.netcdf import SnapshotWriter

            if self.path.exists() and not self.overwrite:
                raise OutputError(f"{self.path}: exists; pass overwrite=True to replace it")
            cfg = sim.config
            self.writer = SnapshotWriter(self.path, sim.mesh, config_yaml=cfg.resolved_yaml(),
                                         version=__version__, title=f"dycore {cfg.case.name}",
                                         picard_iterations=cfg.time.nonlinear_iterations)
        self._users += 1
        return self.writer

    def release(self) -> None:
        """One user done; the last one closes the file."""
        self._users -= 1
        if self._users <= 0 and self.writer is not None:
            self.writer.close()
            self.writer = None


def _open(writer, sim):
    return writer.open(sim) if isinstance(writer, NetCDFWriter) else writer


class Snapshots(Callback):
    """Write the host fields (``step.fields()``) at the scheduled steps, and (``initial``) the
    state the run starts from.

    Parameters
    ----------
    writer : NetCDFWriter, or an object with ``write_snapshot(t, fields, step=)``
        (SnapshotWriter, ...)
    schedule : when (e.g. ``TimeInterval(300)``)
    initial : write the starting state too (off when appending to a file that has it)
    submit : how a write is made (default: a direct call)

    Attributes
    ----------
    last_t : model time of the last snapshot written (the start's when none) [s]
    """

    def __init__(self, writer, schedule, *, initial: bool = True, submit=None):
        self.target, self.schedule, self.initial = writer, schedule, initial
        self.submit = _direct if submit is None else submit
        self.writer, self.last_t = None, None

    def initialize(self, sim, step) -> None:
        self.writer = _open(self.target, sim)
        self.last_t = step.t
        if self.initial:
            with step.output():
                self.submit(self.writer.write_snapshot, step.t, sim.output_fields(),
                            step=step.k)

    def __call__(self, sim, step):
        fields = step.fields()
        with step.output():
            self.submit(self.writer.write_snapshot, step.t, fields, step=step.k)
        self.last_t = step.t

    def finalize(self, sim, step, error) -> None:
        if isinstance(self.target, NetCDFWriter) and self.writer is not None:
            self.target.release()


class Diagnostics(Callback):
    """Record the step's diagnostics at the scheduled steps, and at a step the stability check
    stopped.

    Parameters
    ----------
    writer : NetCDFWriter, or an object with ``write_diagnostics_rows(rows)``
    schedule : when (default: every step)
    buffered : keep the records in memory and write them together before the next snapshot
        or checkpoint (``before_output``) and at the end; False: write each at once
    submit : how a write is made (default: a direct call)
    """

    def __init__(self, writer, schedule=None, *, buffered: bool = True, submit=None):
        self.target, self.buffered = writer, buffered
        if schedule is not None:
            self.schedule = schedule
        self.submit = _direct if submit is None else submit
        self.writer, self._rows, self._last = None, [], None

    def initialize(self, sim, step) -> None:
        self.writer = _open(self.target, sim)

    def _add(self, step) -> None:
        self._last = step.k
        row = (int(step.k), float(step.t), dict(step.diag))
        if self.buffered:
            self._rows.append(row)
        else:
            with step.output():
                self.submit(self.writer.write_diagnostics_rows, [row])

    def _flush(self) -> None:
        if self._rows:
            rows, self._rows = self._rows, []
            self.submit(self.writer.write_diagnostics_rows, rows)

    def __call__(self, sim, step):
        self._add(step)

    def before_output(self, sim, step) -> None:
        with step.output():
            self._flush()

    def finalize(self, sim, step, error) -> None:
        try:
            if error is not None and step.problem and self._last != step.k:
                self._add(step)         # the unstable step's record, before the file closes
            self._flush()
        finally:
            if isinstance(self.target, NetCDFWriter) and self.writer is not None:
                self.target.release()


class Checkpoints(Callback):
    """Replace the checkpoint file at the scheduled steps
    (:func:`dycore.io.restart.write_checkpoint`, atomically).

    Parameters
    ----------
    path : the checkpoint file; schedule : when
    output : the output file the checkpoint continues (default: ``path``)
    submit : how a write is made (default: a direct call)
    """

    def __init__(self, path, schedule, *, output=None, submit=None):
        self.path, self.schedule = Path(path), schedule
        self.output = self.path if output is None else Path(output)
        self.submit = _direct if submit is None else submit

    def __call__(self, sim, step):
        from dycore import __version__
        from dycore.io.restart import write_checkpoint

        fields = step.fields()
        with step.output("checkpoint"):
            self.submit(write_checkpoint, self.path, sim.mesh, step.t, step.k, fields,
                        config_yaml=sim.config.resolved_yaml(), version=__version__,
                        output=self.output,
                        picard_iterations=sim.config.time.nonlinear_iterations)


class Progress(Callback):
    """Show the run's progress (:class:`dycore.timestepping.progress.Progress`: a tqdm bar on a
    terminal or in Jupyter, log lines otherwise).

    Parameters
    ----------
    enabled : False shows nothing; desc : the bar's name (default: the case)
    """

    def __init__(self, enabled: bool = True, desc: str | None = None):
        self.enabled, self.desc, self.display = enabled, desc, None

    def initialize(self, sim, step) -> None:
        from dycore.timestepping.progress import Progress as Display

        self.display = Display(step.end - step.k, self.desc or sim.config.case.name,
                               self.enabled)

    def __call__(self, sim, step):
        self.display.update(step.t, step.diag["max_abs_w"])

    def finalize(self, sim, step, error) -> None:
        if self.display is not None:
            self.display.close()


class Lockstep(Callback):
    """Step other simulations after every step of the run's own (``dycore validate``: the GPU
    simulation beside the CPU one)."""

    def __init__(self, *others):
        self.others = others

    def __call__(self, sim, step):
        for other in self.others:
            other.step()
