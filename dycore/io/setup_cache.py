"""On-disk cache of the set-up that depends only on the mesh and the configuration.

What a run builds before its first step — the sparsity pattern and assembly tables, the mesh-only
operators (lumped masses, C, K_p, CMC + KMK) and the pressure AMG hierarchy — is a pure function of
the mesh, a few configuration sections and the code that builds it; a generated mesh is a pure
function of the case and the ``mesh`` section (:func:`mesh_cache`, its own key). The paper-size mesh
spent 13 s there on an H200 (7.6 s of it in PyAMG's set-up), more than the 720 steps after it took
on the GPU. A second run of the same mesh and configuration loads the arrays instead.

Where it lives
--------------
``$DYCORE_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/dycore`` (default ``~/.cache/dycore``); one
folder per key holding one ``.npz`` file per piece (``sparsity``, ``operators``, ``amg``, the
cuDSS ordering, the Courant number's spacing; on MPI ranks each rank's piece of the set-up and
AMG hierarchy: :mod:`dycore.parallel.local_setup`).
``DYCORE_CACHE_DIR=off`` (or ``0``, ``none``) turns the cache off, as does
``dycore run --no-setup-cache``. Deleting the folder is always safe.

When it is invalid
------------------
The key is a SHA-256 over: the cache format, the dycore version, the source text of every module
that computes a cached array (``dycore/fem``, ``dycore/assembly``, ``dycore/backend``,
``dycore/solvers`` and the cases, ``cases/``), the mesh (coordinates, connectivity, boundary faces and tags, bit for bit)
and the configuration that reaches the set-up (the ``case``, ``physics``, ``mesh`` and
``solvers.pressure`` sections, the backend's kind, assembly mode and strict flag). Any change
gives a new key, so a stale entry is never read; it is removed when the cache grows past
``$DYCORE_CACHE_MAX_GB`` (default 20) — least recently used first, but never an entry used in
the last :data:`KEEP_RECENT_S` seconds: a run's own entries (its mesh, its set-up, the pieces
of its other MPI ranks) are never removed under it, even when they alone exceed the limit
(four ranks at 30.7 M tets keep 27 GB: docs/parallel.md).

A piece whose file cannot be read (damaged zip member: ``np.load`` checks each member's CRC-32)
is rebuilt and rewritten, with a warning. Files are written to a temporary name and renamed, so
two runs that build the same key at the same time each leave a complete file.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import zipfile
from pathlib import Path

import numpy as np

from dycore import __version__

__all__ = ["SetupCache", "cache_directory", "mesh_cache", "source_digest"]

log = logging.getLogger("dycore")

FORMAT = 1
_OFF = {"off", "0", "none", "false", "no"}
#: package folders whose code computes cached arrays (their source is part of the key; cases:
#: the boundary tags and exact normals of the strong no-normal-flow condition, and with mesh
#: the generated meshes)
SOURCE_FOLDERS = ("fem", "assembly", "backend", "solvers", "cases", "mesh")


def cache_directory() -> Path | None:
    """The cache folder from the environment (see the module docstring), or None when off."""
    env = os.environ.get("DYCORE_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in _OFF or not env.strip() else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dycore"


_DIGESTS: dict = {}


def source_files(folders=SOURCE_FOLDERS) -> list[tuple[str, Path]]:
    """``(name, path)`` of every module in ``folders`` (subpackages of ``dycore``; default
    :data:`SOURCE_FOLDERS`), sorted by name (``"cases/schar/__init__.py"``): each folder found
    where its package is imported from, so the cases count from the top-level ``cases/`` folder
    as much as from an installed package."""
    import importlib

    files = []
    for folder in folders:
        where = Path(importlib.import_module(f"dycore.{folder}").__path__[0]).resolve()
        files += [(f"{folder}/{path.relative_to(where).as_posix()}", path)
                  for path in where.rglob("*.py")]
    return sorted(files)


def source_digest(folders=SOURCE_FOLDERS) -> str:
    """SHA-256 (hex) of the source of every module in ``folders`` (:func:`source_files`;
    default :data:`SOURCE_FOLDERS`, the digest every key holds). Computed once per process."""
    folders = tuple(folders)
    if folders not in _DIGESTS:
        h = hashlib.sha256()
        for name, path in source_files(folders):
            h.update(name.encode())
            h.update(path.read_bytes())
        _DIGESTS[folders] = h.hexdigest()
    return _DIGESTS[folders]


#: entries used more recently than this [s] are never pruned (a run in progress)
KEEP_RECENT_S = 1800.0


def _max_bytes() -> float:
    try:
        return float(os.environ.get("DYCORE_CACHE_MAX_GB", "20")) * 1e9
    except ValueError:
        return 20e9


class SetupCache:
    """Named groups of arrays stored under one key.

    Parameters
    ----------
    directory : Path or None
        The cache folder (None: caching off, :meth:`get` always builds).
    key_arrays : sequence of ndarray
        Arrays the cached results depend on (the mesh), hashed bit for bit.
    key_settings : dict
        JSON-serialisable settings they depend on (configuration sections, backend).

    Attributes
    ----------
    key : str — hex SHA-256; hits, misses : names loaded / built
    """

    def __init__(self, directory, key_arrays=(), key_settings=None):
        h = hashlib.sha256()
        h.update(f"dycore setup cache {FORMAT} {__version__} {source_digest()}".encode())
        for a in key_arrays:
            a = np.ascontiguousarray(a)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.view(np.uint8).ravel() if a.size else b"")
        h.update(json.dumps(key_settings or {}, sort_keys=True, default=str).encode())
        self.key = h.hexdigest()
        self.directory = None if directory is None else Path(directory)
        self.hits: list[str] = []
        self.misses: list[str] = []

    @classmethod
    def at(cls, directory, key: str) -> "SetupCache":
        """The cache of ``key`` in ``directory`` — another process's SetupCache, e.g. rank 0's
        on the other MPI ranks of its host, which get its (directory, key)."""
        c = cls.__new__(cls)
        c.key, c.directory = str(key), None if directory is None else Path(directory)
        c.hits, c.misses = [], []
        return c

    @property
    def folder(self) -> Path | None:
        return None if self.directory is None else self.directory / self.key[:32]

    def _path(self, name: str) -> Path:
        return self.folder / f"{name}.npz"

    def load(self, name: str) -> dict | None:
        """The arrays stored under ``name`` ({str: ndarray}), or None (off, absent, unreadable)."""
        if self.folder is None:
            return None
        path = self._path(name)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                out = {k: z[k] for k in z.files}
            os.utime(self.folder)             # recently used: pruned last
            return out
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            log.warning("warning: set-up cache %s is unreadable (%s); rebuilding it", path, exc)
            return None

    #: the writer thread of :meth:`store` ``background=True`` (one per cache, made on demand)
    _writer = None

    def store(self, name: str, arrays: dict, background: bool = False) -> None:
        """Write ``arrays`` under ``name`` (atomically); a failure only logs a warning.

        ``background=True``: this cache's writer thread writes it (one entry at a time, in
        the order given) while the caller goes on; ``arrays`` must not change until
        :meth:`flush` returns. A process that exits first still waits for the thread (it is
        not a daemon), and a reader never sees a partial file (written under a temporary name
        and renamed)."""
        if self.folder is None:
            return
        if background:
            if self._writer is None:
                from concurrent.futures import ThreadPoolExecutor
                self._writer = ThreadPoolExecutor(max_workers=1,
                                                  thread_name_prefix="dycore-setup-cache")
                self._pending = []
            self._pending.append(self._writer.submit(self._write, name, arrays))
            return
        self._write(name, arrays)

    def flush(self) -> None:
        """Wait until every :meth:`store` given ``background=True`` is written (or has warned),
        and end the writer thread."""
        if self._writer is None:
            return
        for f in self._pending:
            f.result()
        self._writer.shutdown()
        self._writer, self._pending = None, []

    def _write(self, name: str, arrays: dict) -> None:
        path = self._path(name)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("warning: cannot write the set-up cache %s (%s); the run goes on "
                        "without it", path, exc)
            tmp.unlink(missing_ok=True)
            return
        self._prune()

    def get(self, name: str, build, timers=None, label: str | None = None) -> dict:
        """Load ``name``, or ``build()`` it (a dict of arrays) and store it.

        ``timers`` (StageTimers) gets a row ``set-up cache: load <label>`` for a hit; a miss
        is timed by the stages inside ``build``.
        """
        t0 = time.perf_counter()
        arrays = self.load(name)
        if arrays is not None:
            self.hits.append(name)
            if timers is not None:
                timers.add(f"set-up cache: load {label or name}",
                           1e3 * (time.perf_counter() - t0))
            return arrays
        self.misses.append(name)
        arrays = build()
        t1 = time.perf_counter()
        self.store(name, arrays)
        if timers is not None and self.folder is not None:
            timers.add(f"set-up cache: store {label or name}", 1e3 * (time.perf_counter() - t1))
        return arrays

    def _prune(self) -> None:
        """Remove the least recently used entries while the cache exceeds its size limit,
        none used in the last :data:`KEEP_RECENT_S` seconds."""
        limit = _max_bytes()
        recent = time.time() - KEEP_RECENT_S
        try:
            entries = []
            for d in self.directory.iterdir():
                if d.is_dir():
                    size = sum(f.stat().st_size for f in d.iterdir() if f.is_file())
                    entries.append((d.stat().st_mtime, size, d))
            total = sum(e[1] for e in entries)
            for mtime, size, d in sorted(entries):
                if total <= limit or d == self.folder or mtime > recent:
                    continue
                shutil.rmtree(d, ignore_errors=True)
                total -= size
        except OSError:
            pass


def mesh_cache(directory, config, params) -> SetupCache:
    """The SetupCache of a GENERATED mesh (``mesh.file`` unset): keyed by the case's name, its
    parameters and the ``mesh`` section of ``config`` (with the code, as every key), not by the
    mesh itself, which it holds — the pieces keyed by the mesh (:class:`SetupCache` of the
    Simulation) are then looked up with the loaded arrays.

    Parameters
    ----------
    directory : Path or None (off); config : dycore.config.Config; params : the case's
        parameters (a pydantic model, or any value with a stable ``repr``)
    """
    data = config.model_dump(mode="json")
    dump = getattr(params, "model_dump", None)
    settings = {"piece": "generated mesh", "case": data["case"]["name"],
                "case_parameters": dump(mode="json") if dump else repr(params),
                "mesh": data["mesh"]}
    return SetupCache(directory, (), settings)
