"""GPU smoke check of the direct pressure solve (cuDSS) and of a graph split around it.

python3 scripts/device/cudss_smoke.py  — prints the factorisation figures, whether cuDSS's solve
was capturable, and checks a Graph whose capture is split by ``backend.uncaptured`` against the
same work launched directly (bitwise).
"""
import numpy as np
import scipy.sparse as sp

from dycore.backend.gpu import gpu_backend
from dycore.solvers.direct import CudssDirect

n1 = 24
t = sp.diags([-np.ones(n1 - 1), 2.0 * np.ones(n1), -np.ones(n1 - 1)], [-1, 0, 1])
eye = sp.identity(n1)
a = (sp.kron(sp.kron(t, eye), eye) + sp.kron(sp.kron(eye, t), eye)
     + sp.kron(sp.kron(eye, eye), t)).tocsr()
n = a.shape[0]
b = gpu_backend(solver_mode="device")
bv, xv = b.zeros(n), b.zeros(n)
d = CudssDirect(b, a, bv, xv)
print(f"n {n}, nnz {a.nnz}, fill {d.fill}, set-up {d.setup_s:.3f} s, residual {d.residual:.2e}, "
      f"capturable {d.capturable}")
rhs = np.random.default_rng(1).standard_normal(n)
y = b.zeros(n)


def issue():
    b.ops.axpby(bv, 2.0, bv0, 0.0, bv0)                                  # bv = 2 rhs
    b.uncaptured(d.solve)                                                # xv = A⁻¹ bv
    b.ops.axpby(y, 1.0, xv, 1.0, xv)                                     # y = 2 xv


bv0 = b.to_device(rhs)
issue()
want = b.to_host(y).copy()
y.fill(0.0)
xv.fill(0.0)
g = b.capture(issue)
g.replay()
got = b.to_host(y)
print(f"graph segments {len(g.segments)} (split: {[type(s).__name__ for s in g.segments]}), "
      f"replay == direct launches bitwise: {np.array_equal(got, want)}, "
      f"|A y/4 - rhs|/|rhs| = {np.linalg.norm(a @ (got / 4) - rhs) / np.linalg.norm(rhs):.2e}")
