"""GENERATED: do not edit (`python -m dycore.assembly.codegen` writes this file).

From the loop table dycore.checks.loops.STRICT_CHECKS.

@cuda.jit kernel bodies (plain functions; compiled lazily by
dycore.backend.gpu_kernels.kernel_compiler): one thread per element, gathering into
cuda.local.array storage, calling the element function and scattering by the loop's
rules. The contract is dycore/assembly/loop_spec.py;
docs/architecture.md ("Element loops") explains the generated code.
"""
from numba import cuda, float64

from dycore.checks.points import eig3_point, libm_point


def libm_point_kernel(x, out):
    """acos, cos, sqrt and v*1.25 + 0.5*v of x[e]

    @cuda.jit body, one thread per element; loop 'libm_point'.
    """
    e = cuda.grid(1)
    if e >= x.shape[0]:
        return
    out_e = cuda.local.array((4,), float64)
    libm_point(x[e], out_e)
    for i0 in range(4):
        out[e, i0] = out_e[i0]


def eig3_point_kernel(a, method, evals, evecs):
    """eigenvalues and eigenvectors of a[e] (copied in)

    @cuda.jit body, one thread per element; loop 'eig3_point'.
    """
    e = cuda.grid(1)
    if e >= a.shape[0]:
        return
    m_e = cuda.local.array((3, 3), float64)
    ev_e = cuda.local.array((3,), float64)
    vec_e = cuda.local.array((3, 3), float64)
    for i0 in range(3):
        for i1 in range(3):
            m_e[i0, i1] = a[e, i0, i1]
    eig3_point(m_e, method, ev_e, vec_e)
    for i0 in range(3):
        evals[e, i0] = ev_e[i0]
    for i0 in range(3):
        for i1 in range(3):
            evecs[e, i0, i1] = vec_e[i0, i1]


#: loop name -> kernel body
KERNELS = {
    "libm_point": libm_point_kernel,
    "eig3_point": eig3_point_kernel,
}
