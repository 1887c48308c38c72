"""One source of element math for P1 tetrahedra (docs/equations.md §3, §6).

Quadrature and shape tables are plain Python; everything else is an ``@njit`` element function
(:func:`dycore.fem._jit.element_function`) on scalars and small local arrays, callable from CPU
loops and from ``@cuda.jit`` kernels alike.
"""
from dycore.fem.eig3 import eig3_closed_form, eig3_jacobi
from dycore.fem.gauss6 import solve6
# the element integrals are re-exported as listed once, in integrals.__all__
from dycore.fem.integrals import *  # noqa: F403
from dycore.fem.integrals import __all__ as _INTEGRALS
from dycore.fem.metric import EIG_CLOSED_FORM, EIG_JACOBI, get_edge_lengths
from dycore.fem.quadrature import QUADRATURE_DEGREES, Quadrature, get_quadrature
from dycore.fem.shape import REF_DSHAPE, shape_values
from dycore.fem.transform import transform_to_physical

__all__ = [
    "Quadrature",
    "get_quadrature",
    "QUADRATURE_DEGREES",
    "REF_DSHAPE",
    "shape_values",
    "transform_to_physical",
    *_INTEGRALS,
    "solve6",
    "eig3_jacobi",
    "eig3_closed_form",
    "get_edge_lengths",
    "EIG_JACOBI",
    "EIG_CLOSED_FORM",
]
