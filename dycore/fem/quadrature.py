"""Symmetric quadrature rules on the tetrahedron, in barycentric coordinates (docs/equations.md §3).

Weights are for the reference tetrahedron (0,0,0),(1,0,0),(0,1,0),(0,0,1) and sum to its volume
1/6; ``transform_to_physical`` turns them into ``detwei = |det J| * weights``.
"""
import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

__all__ = ["Quadrature", "get_quadrature", "QUADRATURE_DEGREES"]

#: degrees accepted by :func:`get_quadrature` (exact for polynomials up to this total degree)
QUADRATURE_DEGREES = (2, 3, 4)


class Quadrature(NamedTuple):
    """A quadrature rule on the reference tetrahedron.

    Attributes
    ----------
    weights : ndarray, shape (ngi,), float64, read-only
        Weights [reference volume, dimensionless]; they sum to 1/6 and may be negative.
    bary : ndarray, shape (ngi, 4), float64, read-only
        Barycentric coordinates (L1, L2, L3, L4) of the points; each row sums to 1.  L_i is the
        P1 shape function of local node i, so ``bary`` is also the shape-value table.
    degree : int
        Highest total polynomial degree integrated exactly.
    """

    weights: np.ndarray
    bary: np.ndarray
    degree: int


def _perms_1_3(a, b):
    """The 4 distinct permutations of (b, a, a, a): the odd value b in slot 0..3."""
    return [[b if i == k else a for i in range(4)] for k in range(4)]


def _perms_2_2(c, d):
    """The 6 distinct permutations of (c, c, d, d)."""
    rows = []
    for i in range(4):
        for j in range(i + 1, 4):
            rows.append([c if k in (i, j) else d for k in range(4)])
    return rows


def _rule_degree2():
    """4-point rule, degree 2 (Keast 1986, rule 2): perms of (b,a,a,a), weight 1/24 each."""
    a = (5.0 - math.sqrt(5.0)) / 20.0
    b = 1.0 - 3.0 * a
    return [1.0 / 24.0] * 4, _perms_1_3(a, b)


def _rule_degree3():
    """5-point rule, degree 3 (Keast 1986, rule 3): centroid weight -2/15, perms of
    (1/2,1/6,1/6,1/6) weight 3/40."""
    weights = [-2.0 / 15.0] + [3.0 / 40.0] * 4
    bary = [[0.25] * 4] + _perms_1_3(1.0 / 6.0, 0.5)
    return weights, bary


def _rule_degree4():
    """11-point rule, degree 4 (Keast 1986, rule 4; docs/equations.md §3)."""
    c = 0.399403576166799204996
    d = 0.5 - c
    weights = [-74.0 / 5625.0] + [343.0 / 45000.0] * 4 + [56.0 / 2250.0] * 6
    bary = [[0.25] * 4] + _perms_1_3(1.0 / 14.0, 11.0 / 14.0) + _perms_2_2(c, d)
    return weights, bary


_RULES = {2: _rule_degree2, 3: _rule_degree3, 4: _rule_degree4}


@lru_cache(maxsize=None)
def get_quadrature(degree):
    """Return the tetrahedral quadrature rule exact for polynomials of total degree ``degree``.

    Parameters
    ----------
    degree : int
        2 (4 points), 3 (5 points, negative centroid weight) or 4 (Keast 11-point rule, negative
        centroid weight -74/5625) -- see docs/equations.md §3 and Keast, Comput. Methods Appl. Mech.
        Eng. 55 (1986) 339-348.

    Returns
    -------
    Quadrature
        ``weights`` (ngi,) and ``bary`` (ngi, 4), float64 C-contiguous and read-only (the same
        object is returned on every call).

    Raises
    ------
    ValueError
        If ``degree`` is not one of :data:`QUADRATURE_DEGREES`.
    """
    try:
        build = _RULES[degree]
    except (KeyError, TypeError):
        raise ValueError(
            f"quadrature degree {degree!r} is not available; choose one of {QUADRATURE_DEGREES}"
        ) from None
    weights, bary = build()
    w = np.ascontiguousarray(weights, dtype=np.float64)
    b = np.ascontiguousarray(bary, dtype=np.float64)
    w.flags.writeable = False
    b.flags.writeable = False
    return Quadrature(weights=w, bary=b, degree=int(degree))
