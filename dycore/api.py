"""The Python API: ``dycore.load_config``, ``dycore.Simulation``, ``dycore.open_output``.

``dycore/__init__.py`` exports these names lazily, so ``import dycore`` stays light (no numba,
no CUDA, no netCDF) until one of them is used::

    import dycore
    cfg = dycore.load_config("configs/mountainwave3d_small.yaml", mesh={"nx": 4},
                             **{"time.dt": 5.0})
    sim = dycore.Simulation(cfg)
    sim.run(steps=3, callbacks=[lambda sim, diag: print(sim.state.t, diag["max_abs_w"])])
    ds = dycore.open_output("output/mountainwave3d_small.nc")     # an xarray.Dataset

:meth:`Simulation.run <dycore.timestepping.simulation.Simulation.run>` is the one time loop
(:mod:`dycore.timestepping.loop`); it writes files through callbacks with schedules, e.g.
``sim.run(until=7200, callbacks=[dycore.Snapshots(dycore.NetCDFWriter(path),
dycore.TimeInterval(300))])`` (:mod:`dycore.timestepping.callbacks`), as ``dycore run``
(:func:`dycore.timestepping.simulation.run_from_config`) does.
(Building a ``Simulation`` may store its mesh's operators in the set-up cache,
:mod:`dycore.io.setup_cache`, unless ``DYCORE_CACHE_DIR=off``.)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from dycore.errors import ConfigError, OutputError

__all__ = ["load_config", "open_output"]


def _overrides_tree(overrides: dict[str, Any]) -> dict:
    """Nested overrides from keyword overrides: every key is a dotted key path
    (``"time.dt"``); its value is a leaf, or a dict of keys below that path (``mesh={"nx": 4}``).
    The same key given twice (e.g. ``mesh={"nx": 4}`` and ``"mesh.nx"``) is a ConfigError."""
    tree: dict = {}

    def put(path: list[str], value: Any, given: str) -> None:
        node = tree
        for i, part in enumerate(path[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {given}: {'.'.join(path[:i + 1])} is already set "
                                  "to a value, not a section")
        last = path[-1]
        if isinstance(value, dict):
            for key, sub in value.items():
                put(path + str(key).split("."), sub, given)
            if not value:
                node.setdefault(last, {})
            return
        if last in node:
            raise ConfigError(f"override {given}: {'.'.join(path)} is given twice")
        node[last] = value

    for key, value in overrides.items():
        parts = key.split(".")
        if any(not p for p in parts):
            raise ConfigError(f"override {key!r}: expected a dotted key path like 'time.dt'")
        put(parts, value, key)
    return tree


def load_config(path: str | Path, **overrides: Any):
    """Read and validate a YAML configuration, with keyword overrides.

    Parameters
    ----------
    path : str or Path
        The YAML file (``dycore config --reference`` lists every key).
    **overrides
        Each keyword is a dotted key path and its value replaces the file's: a section name
        takes a dict (``mesh={"nx": 4, "ny": 4}``), a full path takes a value
        (``**{"time.dt": 5.0}``); both forms may be mixed, a key may not be given twice.

    Returns
    -------
    dycore.config.Config

    Raises
    ------
    ConfigError
        As :func:`dycore.config.load_config` (one line per invalid or unknown key), or an
        override given twice.
    """
    from dycore.config import load_config as _load

    return _load(path, _overrides_tree(overrides) or None)


def open_output(path: str | Path, **kwargs: Any):
    """Open a dycore output file as an :class:`xarray.Dataset`.

    Parameters
    ----------
    path : str or Path
        A netCDF file written by ``dycore run``.
    **kwargs
        Passed to :func:`xarray.open_dataset`; e.g. ``decode_times=False`` gives ``time`` in
        model seconds (by default xarray decodes it to dates from the nominal reference
        2000-01-01, so t = 0 s is 2000-01-01T00:00).

    Returns
    -------
    xarray.Dataset of the file's root group (fields, mesh and diagnostics; the caller closes it,
    or uses it in a ``with`` block).

    Raises
    ------
    OutputError
        xarray (or netCDF4) is not installed (both are dependencies of dycore: a broken
        install), the file cannot be opened, or it is not a dycore output file.
    """
    try:
        import xarray as xr
    except ImportError as exc:
        raise OutputError(f"dycore.open_output needs the xarray package ({exc}), a dependency "
                          "of dycore: reinstall with `pip install -e .`") from None
    from dycore.io.netcdf import _import_netcdf4

    _import_netcdf4()  # a clear OutputError naming netCDF4 when it is missing
    path = Path(path)
    if not path.is_file():
        raise OutputError(f"{path}: output file not found")
    kwargs.setdefault("engine", "netcdf4")
    try:
        ds = xr.open_dataset(path, **kwargs)
    except (OSError, ValueError, RuntimeError) as exc:
        raise OutputError(f"{path}: cannot open output file ({exc})") from None
    missing = [n for n in ("x", "y", "z", "cell_nodes", "time") if n not in ds.variables]
    if missing:
        ds.close()
        raise OutputError(f"{path}: not a dycore output file (no {', '.join(missing)})")
    return ds
