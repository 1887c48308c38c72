"""Run by ``mpiexec -n K python tests/parallel/mpi_driver.py SYSTEMS.npz OUT.npz`` from the
tests (test_mpi.py): every rank loads the same serial systems, rank 0 partitions with METIS and
broadcasts, each rank builds its matrices from its owned rows, and the distributed SpMVs,
reductions and solves are gathered to rank 0, which writes OUT.npz.

NumPy, SciPy, PyAMG, mpi4py and pymetis, and dycore.solvers.amg for the hierarchy of the
distributed V-cycle (no assembly, no mesh generation).
"""
import sys
import time

import numpy as np


def main(src, dst):
    from scipy.sparse import csr_matrix

    from dycore.parallel.amg import DistributedVCycle
    from dycore.solvers.amg import HostHierarchy
    from dycore.parallel.halo import gather_to_root
    from dycore.parallel.krylov import BlockJacobi3, Jacobi, LocalAMG, bicgstab, cg
    from dycore.parallel.mpi import abort_on_error, world
    from dycore.parallel.partition import extract_rows, metis_partition, partition_mesh
    from dycore.parallel.reduce import Reducer
    from dycore.parallel.spmv import DistributedMatrix

    comm = world()
    with abort_on_error(comm):
        s = dict(np.load(src))
        n = int(s["nnodes"])
        k, rank = comm.size, comm.rank
        part = metis_partition(s["indptr"], s["indices"], k) if rank == 0 else None
        part = comm.bcast(part, root=0)
        rp = partition_mesh(s["tets"], n, s["indptr"], s["indices"], part, ranks=[rank])[0]
        plan1, plan2 = rp.plan(1), rp.plan(2)
        out = {"part": part}

        def dmat(indptr, indices, values, depth):
            lp, li, pos = extract_rows(indptr, indices, rp, n, depth)
            return DistributedMatrix(comm, plan1 if depth == 1 else plan2, lp, li, values[pos])

        mats = {"tracer": dmat(s["indptr"], s["indices"], s["tracer"], 1),
                "momentum": dmat(s["indptr"], s["indices"], s["momentum"], 1),
                "pressure": dmat(s["p_indptr"], s["p_indices"], s["p_values"], 2)}
        own = rp.owned
        for name, a in mats.items():
            x = s["x3"] if name == "momentum" else s["x1"]
            y = a.matvec(x[own])
            g = gather_to_root(comm, own, y, n)
            if rank == 0:
                out[f"spmv_{name}"] = g
        halo_bytes = comm.gather(mats["pressure"].halo.bytes_sent, root=0)

        # reductions: one value per mode
        for mode in ("exact", "ordered", "allreduce"):
            out[f"dot_{mode}"] = Reducer(comm, mode).dot(s["x1"][own], s["b_pressure"][own])

        red = Reducer(comm, "exact")
        diag_pos = np.flatnonzero(s["indices"] == np.repeat(np.arange(n), np.diff(s["indptr"])))
        pdiag = sp_diag(s["p_indptr"], s["p_indices"], s["p_values"], n)
        pglobal = csr_matrix((s["p_values"], s["p_indices"], s["p_indptr"]), shape=(n, n))
        deep = HostHierarchy(pglobal, max_coarse=4).sizes
        out["vcycle_deep_sizes"] = np.asarray(deep)
        whole_below = deep[2]
        solves = {
            "cg_jacobi": lambda: cg(mats["pressure"], s["b_pressure"][own], red,
                                    m=Jacobi(pdiag[own]), rtol=1e-12, maxiter=2000),
            "cg_amg": lambda: cg(mats["pressure"], s["b_pressure"][own], red,
                                 m=LocalAMG(mats["pressure"].owned_block()), rtol=1e-12,
                                 maxiter=500),
            "cg_vcycle": lambda: cg(mats["pressure"], s["b_pressure"][own], red,
                                    m=DistributedVCycle(comm, pglobal, part), rtol=1e-12,
                                    maxiter=500),
            # a deeper hierarchy, cut down to its coarsest level / levels from 2 down held
            # whole by every rank (their right-hand side all-gathered once)
            "cg_vcycle_deep": lambda: cg(mats["pressure"], s["b_pressure"][own], red,
                                         m=DistributedVCycle(comm, pglobal, part,
                                                             max_coarse=4),
                                         rtol=1e-12, maxiter=500),
            "cg_vcycle_whole": lambda: cg(mats["pressure"], s["b_pressure"][own], red,
                                          m=DistributedVCycle(comm, pglobal, part,
                                                              max_coarse=4,
                                                              replicate_below=whole_below),
                                          rtol=1e-12, maxiter=500),
            "bicgstab_tracer": lambda: bicgstab(mats["tracer"], s["tracer_b"][own], red,
                                                m=Jacobi(s["tracer"][diag_pos][own]),
                                                rtol=1e-12, maxiter=500, name="tracer"),
            "bicgstab_momentum": lambda: bicgstab(
                mats["momentum"], s["momentum_b"][own], red,
                m=BlockJacobi3(s["momentum"][diag_pos][own]), rtol=1e-12, maxiter=500),
        }
        for key, run in solves.items():
            comm.Barrier()
            t0 = time.perf_counter()
            x, its = run()
            dt = comm.allreduce(time.perf_counter() - t0, op=_max())
            g = gather_to_root(comm, own, x, n)
            if rank == 0:
                out[key], out[f"{key}_its"], out[f"{key}_s"] = g, its, dt
        if rank == 0:
            out["halo_bytes_pressure"] = np.array(halo_bytes)
            out["n_owned"] = np.bincount(part, minlength=k)
            np.savez(dst, **out)


def sp_diag(indptr, indices, values, n):
    rows = np.repeat(np.arange(n), np.diff(indptr))
    d = np.zeros(n)
    d[rows[indices == rows]] = values[indices == rows]
    return d


def _max():
    from mpi4py import MPI
    return MPI.MAX


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
