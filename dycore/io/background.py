"""Output off the critical path: file writes run on one writer thread while the GPU steps on.

A run hands every write (snapshots, buffered per-step diagnostics, checkpoints, the timer table)
to :class:`BackgroundWriter` as a call; one thread performs the calls in the order they were
submitted, so the file sees exactly the sequence of writes of a serial run (a snapshot before the
checkpoint that follows it, every diagnostics record before the snapshot that closes its
interval) and a killed run keeps every record the thread finished (each write ends with
``sync()``, :mod:`dycore.io.netcdf`). netCDF4 releases the GIL inside the library, so zlib
compression and the disk writes overlap the main thread's kernel launches and graph replays.

The arrays handed over must not change afterwards: the run passes fresh host copies
(``Simulation.host_fields``). At most ``max_pending`` calls wait; a further submit blocks until
the thread catches up (a bound on host memory when the disk is slower than the run). An error on
the thread is raised in the main thread by the next :meth:`~BackgroundWriter.submit`,
:meth:`~BackgroundWriter.drain` or :meth:`~BackgroundWriter.close`, and nothing after the failed
call is written.
"""
from __future__ import annotations

import gc
import queue
import threading
import time

__all__ = ["BackgroundWriter", "DiagnosticsBuffer"]

_STOP = object()


class BackgroundWriter:
    """Run submitted calls on one writer thread, in order.

    Parameters
    ----------
    max_pending : int
        Calls that may wait before :meth:`submit` blocks (≥ 1).
    threaded : bool
        False runs every call at once in the caller's thread (same order, same errors): the
        serial reference, and the mode of runs that must not start threads.

    Notes
    -----
    Starting the thread first collects the caller's garbage (``gc.collect()``) so that no
    finaliser of an object the caller dropped (an unclosed netCDF or xarray dataset) runs on the
    writer thread beside the caller: netCDF-C and HDF5 are not thread-safe.

    Attributes
    ----------
    busy_s : float
        Seconds the calls took on the writer thread (overlapped with the run's steps).
    wait_s : float
        Seconds the main thread waited for the writer (blocked submits, drains, close).
    """

    def __init__(self, max_pending: int = 4, threaded: bool = True):
        if max_pending < 1:
            raise ValueError(f"max_pending {max_pending}: expected >= 1")
        self.threaded = threaded
        self.busy_s = 0.0
        self.wait_s = 0.0
        self._error: BaseException | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending)
        self._thread = None
        if threaded:
            # Garbage the caller left behind (an xarray or uxarray dataset nobody closed, say)
            # is finalised now, in the caller's thread. Left to the writer thread's first
            # collection, its finalisers (a netCDF close, a PROJ context freed) would run beside
            # the caller, and netCDF/HDF5 are not thread-safe: a segfault seen in CI.
            gc.collect()
            self._thread = threading.Thread(target=self._work, name="dycore-writer", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                if self._error is None:          # after a failure nothing more is written
                    fn, args, kwargs = item
                    t0 = time.perf_counter()
                    try:
                        fn(*args, **kwargs)
                    except BaseException as exc:   # re-raised in the main thread
                        self._error = exc
                    self.busy_s += time.perf_counter() - t0
            finally:
                self._queue.task_done()

    def _raise_pending(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            raise exc

    def submit(self, fn, *args, **kwargs) -> None:
        """Queue ``fn(*args, **kwargs)`` (run at once when not threaded).

        Raises
        ------
        The exception of an earlier call that failed on the writer thread (once), or this
        call's own exception when not threaded; RuntimeError after :meth:`close`.
        """
        if getattr(self, "_closed", False):
            raise RuntimeError("BackgroundWriter.submit after close")
        self._raise_pending()
        if not self.threaded:
            t0 = time.perf_counter()
            try:
                fn(*args, **kwargs)
            finally:
                self.busy_s += time.perf_counter() - t0
            return
        t0 = time.perf_counter()
        self._queue.put((fn, args, kwargs))
        self.wait_s += time.perf_counter() - t0

    def drain(self) -> None:
        """Wait until every submitted call has run; raise the first error of one that failed."""
        if self.threaded:
            t0 = time.perf_counter()
            self._queue.join()
            self.wait_s += time.perf_counter() - t0
        self._raise_pending()

    def close(self) -> None:
        """Drain, stop the thread (idempotent) and raise a pending error."""
        if getattr(self, "_closed", False):
            return
        try:
            self.drain()
        finally:
            self._closed = True
            if self._thread is not None:
                self._queue.put(_STOP)
                self._thread.join()

    def __enter__(self) -> "BackgroundWriter":
        return self

    def __exit__(self, *exc_info) -> None:
        if exc_info[0] is None:
            self.close()
            return
        try:                  # already failing: write what was queued, keep the first error
            self.close()
        except Exception:
            pass


class DiagnosticsBuffer:
    """Per-step diagnostics kept in memory and written in one call per snapshot interval.

    Parameters
    ----------
    write_rows : callable(rows) writing a list of ``(step, t, diag)`` records (e.g.
        ``SnapshotWriter.write_diagnostics_rows``, through a :class:`BackgroundWriter`)
    """

    def __init__(self, write_rows):
        self._write_rows = write_rows
        self._rows: list = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, step: int, t: float, diag: dict) -> None:
        """Keep one step's record (a copy of ``diag``: the caller may change its own)."""
        self._rows.append((int(step), float(t), dict(diag)))

    def flush(self) -> None:
        """Hand the kept records to ``write_rows`` (nothing when empty) and forget them."""
        if self._rows:
            rows, self._rows = self._rows, []
            self._write_rows(rows)
