"""Data safety of the commands that write files: one writer per output file, and no output that
is one of the command's inputs.

**The output lock.** A run holds an exclusive lock on its output file for its whole life (and
so on the checkpoint beside it, whose name derives from the output's): :func:`output_lock`. The
lock is an OS advisory lock (``fcntl.flock``) on a lock file beside the output, named after the
output's resolved path + :data:`LOCK_SUFFIX` (``out.nc`` -> ``out.nc.lock``), so two spellings
of one path (``./out.nc``, a symbolic link) take the same lock. The lock file holds its owner's
PID, host name, start time and command line, so a second run's message names the other
process. The operating system drops a ``flock`` lock when its process ends, however it ends
(SIGKILL included): a lock file left behind by a killed run is stale, found so by taking the
lock, and reused (a notice names the dead process). The owner removes the lock file when it
lets go (on every exit, exceptions included); a process that locked a file another one was
removing at that moment sees that the name no longer leads to the file it locked and tries
again.

**Outputs that are inputs.** :func:`check_outputs_not_inputs` refuses a command whose file to
write is one of the files it reads: the same file (``os.path.samefile``: device and inode, so
hard and symbolic links count), not only the same name.

docs/output.md ("One writer per output file") describes both for users.
"""
from __future__ import annotations

import contextlib
import datetime
import errno
import json
import logging
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Mapping

from dycore.errors import OutputError
from dycore.io.paths import same_file

__all__ = ["LOCK_SUFFIX", "lock_path", "OutputLock", "output_lock", "lock_owner",
           "check_outputs_not_inputs", "check_not_being_written", "same_file",
           "run_inputs_and_outputs", "check_output_path", "guard_run"]

log = logging.getLogger("dycore")

#: what a lock file's name adds to its output file's name
LOCK_SUFFIX = ".lock"

#: locks this process holds: lock-file path -> [OutputLock, depth] (nested holders share one)
_HELD: dict[str, list] = {}


def lock_path(output: str | Path) -> Path:
    """The lock file of output file ``output``: its resolved path + :data:`LOCK_SUFFIX`.

    >>> lock_path("/tmp/run.nc").name
    'run.nc.lock'
    """
    return Path(os.path.realpath(output) + LOCK_SUFFIX)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:          # a process of another user
        return True
    return True


def lock_owner(path: str | Path) -> dict:
    """What the lock file of output ``path`` says about its owner: ``pid`` (int), ``host``,
    ``started`` (ISO 8601, UTC), ``command``; {} when there is no lock file or it is unreadable
    (an owner killed while writing it)."""
    try:
        data = json.loads(lock_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _describe(owner: Mapping) -> str:
    if not owner:
        return "another process (its lock file names no owner yet)"
    command = str(owner.get("command", "")).strip()
    return (f"process {owner.get('pid', '?')} on {owner.get('host', '?')}, since "
            f"{owner.get('started', '?')}" + (f": {command}" if command else ""))


class OutputLock:
    """An exclusive lock on one output file (see the module notes); use :func:`output_lock`.

    Parameters
    ----------
    path : the output file (need not exist; its folder is created if missing)
    what : the file's role in messages (default "output file")

    Raises
    ------
    OutputError
        (from :meth:`acquire`) Another process holds the lock (the message names it: PID, host,
        start time, command line), or the lock file cannot be created (names it and why).
    """

    def __init__(self, path: str | Path, what: str = "output file"):
        self.path = Path(path)
        self.lock_file = lock_path(path)
        self.what = what
        self._fd: int | None = None
        self.taken_over: dict | None = None   # the dead owner's record, when a stale lock was taken

    def acquire(self) -> "OutputLock":
        try:
            import fcntl
        except ImportError:            # no POSIX locks (Windows): run unlocked, and say so
            log.warning("warning: %s: this platform has no fcntl file locks; the output is not "
                        "locked against a second run", self.path)
            return self
        folder = self.lock_file.parent
        for _ in range(100):           # retried only while another owner removes its file
            try:
                folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise OutputError(f"{self.path}: cannot create the lock file {self.lock_file} "
                                  f"({exc.strerror or exc})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise OutputError(f"{self.path}: cannot lock {self.lock_file} "
                                      f"({exc.strerror or exc})") from None
                owner = lock_owner(self.path)
                for _ in range(50):    # the owner writes its name just after it locks
                    if owner.get("pid") is not None:
                        break
                    time.sleep(0.02)
                    owner = lock_owner(self.path)
                raise OutputError(
                    f"{self.path}: {self.what} is being written by another dycore run "
                    f"({_describe(owner)}); wait for it to end, or choose another --output / "
                    f"output.path") from None
            try:                       # the file locked is still the one the name leads to?
                same = os.path.samestat(os.fstat(fd), os.stat(self.lock_file))
            except FileNotFoundError:
                same = False
            if not same:               # its owner removed it meanwhile: lock the new one
                os.close(fd)
                continue
            stale = self._read(fd)
            if stale.get("pid") is not None:
                host = stale.get("host")
                alive = host == socket.gethostname() and _pid_alive(int(stale["pid"]))
                log.warning("notice: %s: stale lock of %s (%s) taken over", self.path,
                            _describe(stale), "process still running, lock released"
                            if alive else "no longer running" if host == socket.gethostname()
                            else "on another host, lock released")
                self.taken_over = stale
            self._write(fd)
            self._fd = fd
            return self
        raise OutputError(f"{self.path}: cannot lock {self.lock_file} (it is replaced over and "
                          "over)")

    @staticmethod
    def _read(fd: int) -> dict:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            text = os.read(fd, 1 << 16).decode("utf-8", "replace")
            data = json.loads(text) if text.strip() else {}
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @staticmethod
    def _write(fd: int) -> None:
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        owner = {"pid": os.getpid(), "host": socket.gethostname(), "started": now,
                 "command": " ".join(["dycore" if a.endswith(("dycore", "__main__.py")) else a
                                      for a in sys.argv[:1]] + sys.argv[1:])}
        data = json.dumps(owner).encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        os.fsync(fd)

    def release(self) -> None:
        """Remove the lock file and let go of the lock (idempotent)."""
        if self._fd is None:
            return
        try:
            if os.path.samestat(os.fstat(self._fd), os.stat(self.lock_file)):
                os.unlink(self.lock_file)          # while locked: nobody else owns this name
        except OSError:
            pass
        os.close(self._fd)                          # closing drops the flock
        self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def lock_taken_over(path: str | Path) -> dict | None:
    """The record (pid, host, start, command) of the earlier owner whose stale lock this process
    took over when it locked output ``path`` (:func:`output_lock`, held now), or None when the lock
    was free or is not held here. A stale lock means that owner ended without closing the file
    (killed, or its machine went down): HDF5 may have left metadata that reads but does not
    extend, so a restart that appends rewrites the file first
    (:func:`dycore.io.restart.rewrite_output`)."""
    held = _HELD.get(str(lock_path(path)))
    return held[0].taken_over if held else None


@contextlib.contextmanager
def output_lock(path: str | Path, what: str = "output file") -> Iterator[OutputLock]:
    """Hold the exclusive lock of output file ``path`` for the ``with`` block; released on every
    exit, exceptions included. Nested calls for the same file in one process share the lock.

    Raises
    ------
    OutputError
        Another process holds it (named) or the lock file cannot be made (see
        :class:`OutputLock`).
    """
    key = str(lock_path(path))
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield _HELD[key][0]
        finally:
            _HELD[key][1] -= 1
        return
    lock = OutputLock(path, what).acquire()
    _HELD[key] = [lock, 1]
    try:
        yield lock
    finally:
        del _HELD[key]
        lock.release()


def check_not_being_written(path: str | Path, what: str) -> None:
    """Refuse to read ``path`` as ``what`` while another dycore run holds its lock (HDF5 gives
    no consistent view of a file being written): OutputError naming that run. The lock is
    taken and let go at once (a stale one is taken over, as by :func:`output_lock`)."""
    if not Path(path).exists():
        return
    try:
        with output_lock(path):
            pass
    except OutputError as exc:
        text = str(exc).replace("output file is being written", f"{what} is being written")
        raise OutputError(text.replace("wait for it to end, or choose another --output / "
                                       "output.path", "restart from it when that run has "
                                       "ended")) from None


def check_outputs_not_inputs(outputs: Mapping[str, str | Path | None],
                             inputs: Mapping[str, str | Path | None]) -> None:
    """Refuse a command that would write over one of the files it reads.

    Parameters
    ----------
    outputs : {role (the flag or key, e.g. ``"--json"``): path} of every file the command writes
    inputs : {role (e.g. ``"the configuration"``): path} of every file it reads
    (None values are skipped)

    Raises
    ------
    OutputError
        An output is the same file as an input (:func:`same_file`); names both roles.
    """
    for out_role, out in outputs.items():
        if out is None:
            continue
        for in_role, source in inputs.items():
            if source is not None and same_file(out, source):
                same = "" if str(out) == str(source) else f" (= {source})"
                raise OutputError(f"{out}: {out_role} is {in_role}{same}; writing it would "
                                  f"destroy the input: choose another file name")


def run_inputs_and_outputs(config, restart: str | Path | None = None
                           ) -> tuple[dict[str, Path], dict[str, Path]]:
    """({role: path} of the files a run writes, {role: path} of those it reads).

    Writes: ``output.path``, its checkpoint, and with ``output.formats: [netcdf, xdmf]`` the
    XDMF pair. Reads: the configuration file, ``mesh.file``, and the restart file (unless it is
    the output itself or its checkpoint: that is a restart continuing its own file).
    """
    from dycore.io.restart import checkpoint_path
    from dycore.io.xdmf import xdmf_paths

    out = Path(config.output_path)
    outputs = {"output.path (--output)": out, "its checkpoint": checkpoint_path(out)}
    if "xdmf" in config.output.formats:
        xdmf, h5 = xdmf_paths(out)
        outputs.update({"its XDMF export": xdmf, "its XDMF data": h5})
    inputs = {"the configuration file": config.source_path,
              "mesh.file (the mesh)": getattr(config.mesh, "file", None)}
    if restart is not None and not (same_file(restart, out)
                                    or same_file(restart, checkpoint_path(out))):
        inputs["the restart file (--restart)"] = Path(restart)
    return outputs, inputs


def check_output_path(path: Path, *, overwrite: bool,
                      name: str = "output.path (--output)", example: str = "run.nc") -> None:
    """Raise unless a run can create ``path`` without silently replacing a file.

    Parameters
    ----------
    path : the output file (``config.output_path``)
    overwrite : replace an existing file (``dycore run --overwrite``)
    name : the key or flag that gave ``path``, for the messages; example : a file name to
        suggest when ``path`` is a directory

    Raises
    ------
    OutputError
        ``path`` is a directory; it exists and ``overwrite`` is false; its nearest existing
        parent is not a directory; or no file can be created there (probed with a temporary
        file, which also catches ``/proc`` and read-only file systems when running as root).
    """
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path}: {name} is a directory; expected a file "
                          f"name such as {path / example}")
    if path.exists() and not overwrite:
        raise OutputError(f"{path}: output file exists; pass --overwrite to replace it, or "
                          f"choose another --output / output.path")
    folder = path.parent
    while not folder.exists():       # the writer creates missing folders: check the first one
        folder = folder.parent       # that exists ('.' and '/' always do)
    if not folder.is_dir():
        raise OutputError(f"{path}: {name} cannot be created: {folder} is a "
                          f"file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise OutputError(f"{path}: {name} cannot be created: no file can be "
                          f"written in {folder} ({exc.strerror or exc})") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"{path}: output file exists and is not writable")


def guard_run(run):
    """Decorator of :func:`dycore.timestepping.simulation.run_from_config` (``run(config, ...,
    restart=None, ...)``): refuse outputs that are inputs (:func:`check_outputs_not_inputs`)
    and an output path where no file can be made (:func:`check_output_path`,
    before the lock file is made there), then hold the output's lock (:func:`output_lock`) for
    the whole call (the existence check, ``--overwrite``, runs under the lock).

    Raises
    ------
    OutputError
        An output is an input, or another process writes the output (named).
    """
    import functools

    @functools.wraps(run)
    def guarded(config, *args, **kwargs):
        restart = kwargs.get("restart")
        check_outputs_not_inputs(*run_inputs_and_outputs(config, restart))
        check_output_path(config.output_path, overwrite=True)   # can a file be made there?
        with output_lock(config.output_path):
            if restart is not None and not same_file(restart, config.output_path):
                check_not_being_written(restart, "restart file (--restart)")
            return run(config, *args, **kwargs)

    return guarded
