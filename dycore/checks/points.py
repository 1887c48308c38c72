"""Element functions of the strict floating-point check (``scripts/gpu_check.py --parts libm``):
the operations strict mode is checked on, one point per thread."""
import math

from dycore.fem._jit import element_function
from dycore.fem.eig3 import eig3_closed_form, eig3_jacobi

__all__ = ["libm_point", "eig3_point"]


@element_function
def libm_point(v, out):
    """The checked operations for one input v in [-1, 1]; out (4,): acos v, cos 3v, sqrt(v+1),
    v·1.25 + 0.5·v (one FMA unless NVVM is told fma=0)."""
    out[0] = math.acos(v)
    out[1] = math.cos(3.0 * v)
    out[2] = math.sqrt(v + 1.0)
    out[3] = v * 1.25 + 0.5 * v


@element_function
def eig3_point(m, method, ev, vec):
    """One 3x3 symmetric matrix m (overwritten) -> eigenvalues ev (3,), vectors vec (3,3);
    method 0 = Jacobi, 1 = closed form."""
    if method == 0:
        eig3_jacobi(m, ev, vec)
    else:
        eig3_closed_form(m, ev, vec)
