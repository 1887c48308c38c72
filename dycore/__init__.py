"""dycore: the continuous-Galerkin core of a Fluidity-Atmosphere-style dynamical core.

Data flow (and folder order): mesh -> fem -> assembly -> solvers -> physics/timestepping -> io -> cli.
"""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("dycore")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.1.0"

__all__ = ["__version__"]
