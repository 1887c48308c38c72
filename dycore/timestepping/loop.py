"""The one time loop of dycore: step, then run the callbacks whose schedule fires.

:func:`run_loop` is the loop of :meth:`Simulation.run
<dycore.timestepping.simulation.Simulation.run>` and of the distributed simulation's ``run``
(:class:`~dycore.parallel.simulation.DistributedSimulation`); ``dycore run``
(:func:`~dycore.timestepping.simulation.run_from_config`), ``mpiexec dycore run``, ``dycore
validate`` (the GPU simulation stepped in lockstep by a callback), the regression run and
``dycore bench`` all step through it. What a run does besides stepping -- stability check,
diagnostics, snapshots, checkpoints, progress -- is a callback
(:mod:`dycore.timestepping.callbacks`) with a schedule (:mod:`dycore.timestepping.schedules`).

A simulation the loop drives has ``step() -> dict`` (one step, its diagnostics),
``state.t`` [s], ``config.time.dt`` [s], ``timers`` (a StageTimers), ``output_fields()`` (the
host fields a writer may keep: ``{name: (nnodes,) float64}``; None where a rank writes
nothing) and ``agree(value)`` (the value every rank acts on: rank 0's; itself when serial).
"""
from __future__ import annotations

import contextlib
import time

__all__ = ["Step", "run_loop"]


class Step:
    """What the callbacks see of the step just taken (or, in ``initialize``, of the start).

    Attributes
    ----------
    k : int — step number since t = 0; t, t_prev : model time after / before the step [s]
    dt : float — ``time.dt`` [s]; last : bool — the run's last step; end : int — its number
    diag : dict — the step's diagnostics (``max_abs_w`` [m/s], ... as in the output file;
        empty at the start); problem : str or None — set by a failed stability check
    split : RunSplit of the run (wall time of the steps and of the output)
    stop : bool — set True (or return True from a callback) to end the run after this step
    """

    def __init__(self, sim, k: int, t_prev: float, dt: float, end: int, diag: dict, split,
                 checks=(), before_output=()):
        self.sim, self.k, self.t, self.t_prev = sim, int(k), sim.state.t, float(t_prev)
        self.dt, self.end, self.last = float(dt), int(end), int(k) == int(end)
        self.diag, self.split = diag, split
        self.problem = None
        self.stop = False
        self._checks, self._before_output = checks, before_output
        self._fields, self._fetched = None, False

    @contextlib.contextmanager
    def output(self, label: str = "output"):
        """Time a block as output work: the stage timer ``label`` and the run's split."""
        with self.sim.timers(label), self.split.output():
            yield

    def fields(self):
        """The host fields after this step (``sim.output_fields()``, fetched once per step);
        the first call runs the callbacks' ``check_fields`` (which may raise), then their
        ``before_output`` (e.g. the diagnostics written before a snapshot)."""
        if not self._fetched:          # (None on the ranks that write nothing: fetched once too)
            with self.output():
                fields = self.sim.output_fields()
            for check in self._checks:
                check(self.sim, self, fields)
            self._fields, self._fetched = fields, True
            for hook in self._before_output:
                hook(self.sim, self)
        return self._fields


def _as_callback(cb):
    from dycore.timestepping.callbacks import Callback, FunctionCallback

    return cb if isinstance(cb, Callback) else FunctionCallback(cb)


def run_loop(sim, steps: int, callbacks=(), *, k0: int | None = None, split=None) -> int:
    """Take ``steps`` steps of ``sim``; after each, every callback whose schedule fires.

    Parameters
    ----------
    sim : a simulation (see the module docstring)
    steps : int >= 0
    callbacks : :class:`~dycore.timestepping.callbacks.Callback` objects, or plain callables
        ``fn(sim, diag)`` (called after every step; ``diag`` has ``step`` and ``t`` added),
        run in the order given. Each callback's ``initialize(sim, start)`` runs before the
        first step, and its ``finalize(sim, step, error)`` after the last one (also when a step
        or a callback raised: ``error`` is the exception, which then propagates).
    k0 : step number of the current state (default ``round(state.t / time.dt)``)
    split : RunSplit timing the steps and the output (default: a new one)

    Returns
    -------
    int : the steps taken (fewer than ``steps`` when a callback stopped the run).
    """
    from dycore.timestepping.run_split import RunSplit

    dt = sim.config.time.dt
    k0 = int(round(sim.state.t / dt)) if k0 is None else int(k0)
    k_end = k0 + int(steps)
    split = RunSplit(time.perf_counter()) if split is None else split
    cbs = [_as_callback(cb) for cb in callbacks]
    checks = [cb.check_fields for cb in cbs if hasattr(cb, "check_fields")]
    before = [cb.before_output for cb in cbs if hasattr(cb, "before_output")]
    step = Step(sim, k0, sim.state.t, dt, k_end, {}, split, checks, before)
    taken, error = 0, None
    try:
        for cb in cbs:
            cb.initialize(sim, step)
        for k in range(k0 + 1, k_end + 1):
            t_prev = sim.state.t
            with split.steps():
                diag = sim.step()
            taken += 1
            step = Step(sim, k, t_prev, dt, k_end, diag, split, checks, before)
            for cb in cbs:
                if cb.schedule(step) and cb(sim, step):
                    step.stop = True
            if step.stop:
                break
    except BaseException as exc:
        error = exc
        raise
    finally:
        for cb in cbs:
            cb.finalize(sim, step, error)
    return taken
