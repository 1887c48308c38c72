"""Small mountain-wave systems for the decomposition tests, assembled once per session.

``systems`` holds the mesh, the first-order pattern and the three matrices of a Picard
iteration (tracer CSR with its Dirichlet rows, momentum BCSR 3×3 with its Dirichlet rows,
pressure CMC + KMK, pinned), all as NumPy arrays, with right-hand sides for the solves. ``systems_npz`` writes them to one file the
``mpiexec`` driver reads (each rank loads the same arrays instead of rebuilding them).
"""
import numpy as np
import pytest
import scipy.sparse as sp

#: 7 × 7 × 5 = 245 nodes, 864 tetrahedra: every rank of 4 still has interior rows
MESH = {"nx": 6, "ny": 6, "nz": 4}


def build_systems(mesh=MESH):
    import dycore
    cfg = dycore.load_config("configs/mountainwave3d_small.yaml", mesh=dict(mesh))
    sim = dycore.Simulation(cfg)
    c, st, ops, tc = sim.coeffs, sim.state, sim.ops, cfg.time
    rng = np.random.default_rng(15)
    n = sim.mesh.nnodes
    # a non-uniform advecting velocity and tracer so every matrix entry is non-trivial
    u = np.asarray(st.u) + rng.uniform(-2.0, 2.0, (n, 3))
    th = rng.uniform(-1.0, 1.0, n)
    tv, trhs = sim.assembler.tracer("theta_prime", u, th, np.zeros(n), c.sigma, c.zeros,
                                    c.kappa, tc.dt * tc.theta)
    tv, trhs = tv.copy(), trhs.copy()          # the rhs only feeds the Dirichlet rows
    sim.backend.ops.dirichlet(tv, trhs, 1, ops)
    mv, mrhs = sim.assembler.momentum(u, u, rng.uniform(-0.01, 0.01, n), rng.standard_normal(n),
                                      c.sigma, c.u_ref, c.nu, c.f_cor, tc.dt * tc.theta)
    mv, mrhs = mv.copy(), mrhs.copy()
    sim.backend.ops.dirichlet(mv, mrhs, 3, ops)
    pa = ops.pressure_host
    # manufactured solutions: the Dirichlet rows (identity) next to rows scaled by the element
    # volumes give condition numbers ~1e12, so a direct solve is no reference to 1e-10; the
    # exact x is (the preconditioned Krylov solves recover it to ~1e-11)
    t_x, m_x = rng.standard_normal(n), rng.standard_normal((n, 3))
    t_b = sp.csr_matrix((tv, sim.sparsity.indices, sim.sparsity.indptr), shape=(n, n)) @ t_x
    m_b = (sp.bsr_matrix((mv, sim.sparsity.indices, sim.sparsity.indptr), shape=(3 * n, 3 * n))
           @ m_x.ravel()).reshape(n, 3)
    return dict(
        nnodes=n, tets=np.asarray(sim.mesh.tets), coords=np.asarray(sim.mesh.coords),
        indptr=np.asarray(sim.sparsity.indptr), indices=np.asarray(sim.sparsity.indices),
        u=u, theta=th,
        tracer=tv, tracer_x=t_x, tracer_b=t_b, momentum=mv, momentum_x=m_x, momentum_b=m_b,
        p_indptr=pa.indptr.copy(), p_indices=pa.indices.copy(), p_values=pa.data.copy(),
        x1=rng.standard_normal(n), x3=rng.standard_normal((n, 3)),
        b_pressure=rng.standard_normal(n), pin=np.int64(ops.pin),
        sim=sim)


@pytest.fixture(scope="session")
def systems():
    return build_systems()


@pytest.fixture(scope="session")
def systems_npz(systems, tmp_path_factory):
    path = tmp_path_factory.mktemp("mpi") / "systems.npz"
    np.savez(path, **{k: v for k, v in systems.items() if k != "sim"})
    return path


@pytest.fixture(scope="session")
def small_systems():
    """The systems of a 5 × 5 × 3 = 75-node mesh: both halves of a 2-way METIS cut have
    interior rows of the pressure matrix scattered among the boundary ones (96 Jacobi CG
    iterations at rtol 1e-8, against 277 on the 245-node mesh)."""
    return build_systems({"nx": 4, "ny": 4, "nz": 2})


@pytest.fixture(scope="session")
def tiny_systems():
    """The systems of a 4 × 3 × 3 = 36-node mesh: small enough for whole solves of K
    loopback GPU ranks under the CUDA simulator."""
    return build_systems({"nx": 3, "ny": 2, "nz": 2})
