"""Run by ``mpiexec -n K python tests/parallel/gpu_step_driver.py OUT.npz STEPS BACKEND [MODE]``
from test_gpu_ranks_step.py (under ``NUMBA_ENABLE_CUDASIM=1``): the small mountain-wave case on
a tiny mesh, STEPS distributed steps on GPU ranks (BACKEND ``gpu``: GpuRankSimulation with the
staged MPI transport) or CPU ranks (``cpu``: DistributedSimulation), with deterministic
assembly, strict floating point, Jacobi-preconditioned CG for pressure; the fields gathered to
rank 0 after every step and written to OUT.npz with the diagnostics and iteration counts, and
(GPU) how many Picard iterations were held as captured graphs after each step.

MODE (GPU): ``graphs`` (default: from the second step each Picard iteration is captured, its
solves inline), ``nographs`` (``backend.graphs: false``: every step issued from Python, every
solve checked), ``short`` (after step 1 every iterative solve's budget is cut to 3 iterations:
the captured solves of step 2 fall short, the step is repeated with every solve checked),
``amg`` (the pressure preconditioner ``amg``: rank-local V-cycles, their hierarchies kept in
the set-up cache that ``DYCORE_CACHE_DIR`` names), ``global_amg`` (``amg`` as the V-cycle of
one hierarchy of the whole matrix: ``GpuRankSimulation(global_amg=True)``), ``default_amg``
(``amg`` with ``global_amg=None``: GpuRankSimulation's own choice), ``apart`` (θ′ and
q_v solved each on its own instead of together: ``stepper.tracers_together = False``),
``switch`` (together, then apart from step 3: the A/B switch in a run whose iterations were
captured)."""
import sys

import numpy as np

from step_driver import step_and_gather   # (this folder is sys.path[0] of a script)

MESH = {"nx": 3, "ny": 3, "nz": 2}


def config(backend, graphs=True, pressure_pc="jacobi"):
    import dycore
    solvers = {"pressure": {"method": "cg", "preconditioner": pressure_pc, "rtol": 1e-10,
                            "max_iterations": 2000},
               "momentum": {"method": "bicgstab", "preconditioner": "block_jacobi",
                            "rtol": 1e-10},
               "tracer": {"method": "bicgstab", "preconditioner": "jacobi", "rtol": 1e-10}}
    return dycore.load_config(
        "configs/mountainwave3d_small.yaml", mesh=dict(MESH), solvers=solvers,
        backend={"name": backend, "solver_mode": "device" if backend == "gpu" else "host",
                 "assembly": "deterministic", "strict": True, "graphs": graphs})


def cut_budgets(sim) -> None:
    """Every iterative solve's budget learnt afresh from a count of 1 (3 iterations)."""
    from dycore.parallel.device_replay import drain
    sys_ = sim.systems
    for s in [*sys_.solvers.values(), *([sys_.pcg] if sys_.pcg is not None else [])]:
        drain(s._learn(1))


def main(dst, steps, backend, mode="graphs"):
    from dycore.parallel.mpi import abort_on_error, world

    comm = world()
    with abort_on_error(comm):
        cfg = config(backend, graphs=mode != "nographs",
                     pressure_pc="amg" if mode in ("amg", "global_amg", "default_amg")
                     else "jacobi")
        after = None
        if backend == "gpu":
            from dycore.parallel.gpu_simulation import GpuRankSimulation
            sim = GpuRankSimulation(cfg, comm,       # the simulator's launch shapes
                                    global_amg=(None if mode == "default_amg"
                                                else mode == "global_amg"))
            sim.stepper.tracers_together = mode != "apart"

            def after(k, out):
                if comm.rank == 0:
                    out.setdefault("captured", []).append(sim.stepper.graphs.captured)
                    pcg = sim.systems.pcg
                    out["pressure_precond"] = "" if pcg is None else pcg.precond
                    out["setup_phases"] = list(sim.setup_seconds)    # rank 0's set-up split
                    out["stages"] = list(sim.timers.as_dict())
                if k == 1 and mode == "short":
                    cut_budgets(sim)
                if k == 2 and mode == "switch":
                    sim.stepper.tracers_together = False
        else:
            from dycore.parallel.simulation import DistributedSimulation
            sim = DistributedSimulation(cfg, comm)
        out = step_and_gather(sim, comm, steps, after)
        if comm.rank == 0:
            np.savez(dst, **{k: np.asarray(v) for k, v in out.items()})


if __name__ == "__main__":
    main(*sys.argv[1:2], int(sys.argv[2]), *sys.argv[3:])
