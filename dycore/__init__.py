"""dycore: the continuous-Galerkin core of a Fluidity-Atmosphere-style dynamical core.

Layers in import order (docs/architecture.md; tests/unit/test_layers.py): mesh -> fem ->
assembly -> backend -> solvers -> physics -> cases -> config -> diagnostics -> io ->
timestepping -> checks -> parallel -> bench -> cli; the test cases live in the top-level cases/.

Python API (README.md, "Python API"): ``dycore.load_config``, ``dycore.Simulation`` (with
``Simulation.run``, its callbacks ``Snapshots``, ``Diagnostics``, ``Checkpoints``, ``Progress``,
``StabilityCheck``, ``Callback``, the writer ``NetCDFWriter`` and the schedules
``IterationInterval``, ``TimeInterval``, ``AtEnd``), ``dycore.open_output`` (an xarray Dataset),
imported on first use.
"""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("dycore")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.1.0"

#: public names imported on first use (``import dycore`` stays light: no numba, CUDA or netCDF)
_LAZY = {
    "load_config": "dycore.api",
    "open_output": "dycore.api",
    "Simulation": "dycore.timestepping.simulation",
    "run_from_config": "dycore.timestepping.simulation",
    **dict.fromkeys(("Callback", "Snapshots", "Diagnostics", "Checkpoints", "Progress",
                     "StabilityCheck", "NetCDFWriter"), "dycore.timestepping.callbacks"),
    **dict.fromkeys(("IterationInterval", "TimeInterval", "AtEnd"),
                    "dycore.timestepping.schedules"),
}

__all__ = ["__version__", *_LAZY]


def exact_device_systems(*args, **kwargs):
    """The device systems of a serial run with ``backend.reduction: exact``:
    :func:`dycore.parallel.one_gpu.one_rank_systems` (the GPU ranks' solvers over one rank;
    its arguments and errors). :class:`~dycore.timestepping.simulation.Simulation` sits below
    ``dycore.parallel`` in the layers, so it does not import it: the package root, above every
    layer, hands it over."""
    from dycore.parallel.one_gpu import one_rank_systems
    return one_rank_systems(*args, **kwargs)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dycore' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
