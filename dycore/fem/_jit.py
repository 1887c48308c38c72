"""The one decorator for element functions: CPU ``@njit`` options that the CUDA target also accepts.

Element functions decorated with :func:`element_function` are compiled for the CPU by numba and,
when a ``@cuda.jit`` kernel calls them, for the GPU by numba-cuda (docs/equations.md §6). ``error_model=
"numpy"`` makes a CPU division by zero return inf/nan as on the GPU instead of raising.
"""
from numba import njit

__all__ = ["element_function"]


def element_function(fn):
    """Compile ``fn`` as a CPU ``@njit`` element function callable from CUDA kernels too."""
    return njit(error_model="numpy", cache=True)(fn)
