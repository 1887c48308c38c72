"""The error hierarchy: raised at the boundary (config, mesh build, solver), never in kernels.

The CLI catches :class:`DycoreError`, prints its one-line message and exits non-zero.
"""

__all__ = [
    "DycoreError", "ConfigError", "MeshError", "SolverDivergedError",
    "BackendUnavailableError", "OutputError", "InstabilityError",
]


class DycoreError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(DycoreError):
    """A configuration file or value is missing, malformed or out of range (names key and file)."""


class MeshError(DycoreError):
    """The mesh is invalid: inverted or zero-volume element, bad connectivity (names the element)."""


class SolverDivergedError(DycoreError):
    """A linear solve failed to converge or produced non-finite values (names the system)."""


class BackendUnavailableError(DycoreError):
    """The requested backend (e.g. ``gpu``) cannot run on this machine (says why)."""


class OutputError(DycoreError):
    """An output file cannot be written or read (names the file)."""


class InstabilityError(DycoreError):
    """The run left physical bounds: a velocity beyond ``stability.max_speed_factor`` times the
    inflow speed, or a non-finite diagnostic (names the step, the time and the output file)."""
