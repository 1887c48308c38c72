"""Run by ``mpiexec -n K python tests/parallel/step_driver.py OUT.npz STEPS PRESSURE_PC
[NX,NY,NZ]`` from test_mpi_step.py: the small mountain-wave case on a tiny mesh (or NX×NY×NZ), STEPS distributed steps, the
fields gathered to rank 0 after every step and written to OUT.npz with the diagnostics."""
import sys

import numpy as np

MESH = {"nx": 4, "ny": 4, "nz": 3}


def solvers(pressure_pc):
    """The solvers section: BiCGStab for momentum and tracers, CG with ``pressure_pc``
    (``amg_classical``: amg with ``amg_coarsening: classical``)."""
    coarsening = "classical" if pressure_pc == "amg_classical" else "aggregation"
    pressure_pc = "amg" if pressure_pc == "amg_classical" else pressure_pc
    return {"pressure": {"method": "cg", "preconditioner": pressure_pc, "rtol": 1e-10,
                         "max_iterations": 2000, "amg_coarsening": coarsening},
            "momentum": {"method": "bicgstab", "preconditioner": "block_jacobi", "rtol": 1e-10},
            "tracer": {"method": "bicgstab", "preconditioner": "jacobi", "rtol": 1e-10}}


def step_and_gather(sim, comm, steps, after_step=None) -> dict:
    """Take ``steps`` steps of a distributed ``sim``; on rank 0 the gathered fields after each
    step (``<name>_<k>``), the step diagnostics and the iteration counts ({} elsewhere);
    ``after_step(k, out)`` (every rank) after step k's diagnostics."""
    out = {}
    for k in range(1, steps + 1):
        diag = sim.step()
        if after_step is not None:
            after_step(k, out)
        fields = sim.gather_fields()
        if comm.rank == 0:
            for name, v in fields.items():
                out[f"{name}_{k}"] = v
            for name in ("max_abs_w", "kinetic_energy", "max_abs_div_u"):
                out.setdefault(name, []).append(diag[name])
            for name in ("pressure", "momentum", "tracer"):
                out.setdefault(f"its_{name}", []).append(diag[f"solver_iterations_{name}"])
    return out


def main(dst, steps, pressure_pc, mesh=None):
    import dycore
    from dycore.parallel.mpi import abort_on_error, world
    from dycore.parallel.simulation import DistributedSimulation

    comm = world()
    with abort_on_error(comm):
        cfg = dycore.load_config("configs/mountainwave3d_small.yaml", mesh=mesh or dict(MESH),
                                 solvers=solvers(pressure_pc))
        sim = DistributedSimulation(cfg, comm)
        out = step_and_gather(sim, comm, steps)
        halo = comm.gather(sim.halo_values_per_exchange, root=0)
        if comm.rank == 0:
            out["halo_values"] = np.array(halo)
            np.savez(dst, **{k: np.asarray(v) for k, v in out.items()})


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3],
         dict(zip(("nx", "ny", "nz"), map(int, sys.argv[4].split(",")))) if sys.argv[4:]
         else None)
