"""GENERATED: do not edit (`python -m dycore.assembly.codegen` writes this file).

From the loop table dycore.checks.loops.STRICT_CHECKS.

CPU drivers: @njit(parallel=True) prange loops over chunks of CHUNK elements, each
gathering, calling the element function and writing element arrays (the deterministic
gather by nonzero is dycore.assembly.gather). The contract is dycore/assembly/loop_spec.py;
docs/architecture.md ("Element loops") explains the generated code.
"""
import numpy as np
from numba import njit, prange

from dycore.checks.points import eig3_point, libm_point

CHUNK = 256  #: elements per prange iteration


@njit(parallel=True, cache=True)
def libm_point_elements(x, out):
    """acos, cos, sqrt and v*1.25 + 0.5*v of x[e]

    CPU driver, element arrays out; loop 'libm_point'.
    """
    nele = x.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        out_e = np.empty((4,))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            libm_point(x[e], out_e)
            for i0 in range(4):
                out[e, i0] = out_e[i0]


@njit(parallel=True, cache=True)
def eig3_point_elements(a, method, evals, evecs):
    """eigenvalues and eigenvectors of a[e] (copied in)

    CPU driver, element arrays out; loop 'eig3_point'.
    """
    nele = a.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        m_e = np.empty((3, 3))
        ev_e = np.empty((3,))
        vec_e = np.empty((3, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(3):
                for i1 in range(3):
                    m_e[i0, i1] = a[e, i0, i1]
            eig3_point(m_e, method, ev_e, vec_e)
            for i0 in range(3):
                evals[e, i0] = ev_e[i0]
            for i0 in range(3):
                for i1 in range(3):
                    evecs[e, i0, i1] = vec_e[i0, i1]


#: loop name -> CPU driver
DRIVERS = {
    "libm_point": libm_point_elements,
    "eig3_point": eig3_point_elements,
}
