"""Peak host memory per rank of the decomposed set-up and steps, and the pressure CG
iterations (docs/performance.md, "Multi-rank set-up").

    NUMBA_NUM_THREADS=1 mpiexec -n K python scripts/rank_memory.py CONFIG [NX NY NZ] [STEPS]
        [--local-amg] [--scattered]

Prints, on rank 0, one line per rank: resident peak (``ru_maxrss``) after the imports, after
the set-up (:class:`~dycore.parallel.simulation.DistributedSimulation`) and after STEPS steps
(default 2), the set-up wall time, and the pressure iterations of every step. ``--scattered``
builds the set-up the old way (rank 0 builds the serial set-up and sends the pieces) instead of
each rank from its own part of the mesh (the default).
"""
import resource
import sys
import time


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0     # kB on Linux


def main(argv):
    local = "--local-amg" in argv
    setup = "scattered" if "--scattered" in argv else "local"
    args = [a for a in argv if not a.startswith("--")]
    config = args[0]
    mesh = dict(zip(("nx", "ny", "nz"), map(int, args[1:4]))) if len(args) >= 4 else {}
    steps = int(args[4]) if len(args) >= 5 else 2
    import dycore
    from dycore.parallel.mpi import world
    from dycore.parallel.simulation import DistributedSimulation
    comm = world()
    cfg = dycore.load_config(config, **({"mesh": mesh} if mesh else {}))
    imports = _peak_mb()
    t0 = time.perf_counter()
    kw = {"local_amg": True} if local else {}
    kw["setup"] = setup
    sim = DistributedSimulation(cfg, comm, **kw)
    setup_s = time.perf_counter() - t0
    after_setup = _peak_mb()
    its = []
    for _ in range(steps):
        its.append(int(sim.step()["solver_iterations_pressure"]))
    rows = comm.gather((comm.rank, imports, after_setup, _peak_mb(), setup_s, sim.rp.n_owned,
                        sim.rp.n_local(2)), root=0)
    if comm.rank == 0:
        print(f"{config} mesh {mesh or 'as configured'}: {sim.nnodes} nodes, {comm.size} ranks,"
              f" pressure {cfg.solvers.pressure.preconditioner}"
              f"{' (rank-local)' if local else ''}, {setup} set-up, CG iterations per step {its}")
        print("rank  peak MB after imports  after set-up  after steps  set-up s  owned  local")
        for r, a, b, c, s, o, n in rows:
            print(f"{r:4d}  {a:21.0f}  {b:12.0f}  {c:11.0f}  {s:8.1f}  {o:5d}  {n:5d}")


if __name__ == "__main__":
    main(sys.argv[1:])
