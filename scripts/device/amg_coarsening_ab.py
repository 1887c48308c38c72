"""A/B of ``solvers.pressure.amg_coarsening`` on one GPU: the serial device run (pressure CG +
the device V-cycle) with the aggregation and the classical (Ruge-Stuben) hierarchy, one after
the other in one process — set-up (and its AMG part), the hierarchy's level sizes and operator
complexity, pressure CG iterations and the step.

    PYTHONPATH=. python3 scripts/device/amg_coarsening_ab.py CONFIG [--mesh NX NY NZ]
        [--steps 5] [--warmup 2] [--json OUT]

Steps: host clock around ``Simulation.step()`` (its diagnostics read the iteration counts, so
each step ends synchronised), median of ``--steps`` after ``--warmup`` (kernel compiles, the
first captured graphs). The set-up cache is off for both runs (each builds its hierarchy).
"""
import argparse
import json
import time

import numpy as np


def one(config, coarsening, mesh, steps, warmup) -> dict:
    import dycore
    from dycore.timestepping.simulation import Simulation
    cfg = dycore.load_config(config)
    p = cfg.solvers.pressure
    p.method, p.preconditioner, p.amg_coarsening = "cg", "amg", coarsening
    cfg.backend.name, cfg.backend.solver_mode = "gpu", "device"
    if mesh:
        cfg.mesh.nx, cfg.mesh.ny, cfg.mesh.nz = mesh
    t0 = time.perf_counter()
    sim = Simulation(cfg, setup_cache=False)
    setup = time.perf_counter() - t0
    amg_ms = sim.timers.as_dict().get("pressure AMG set-up (host, once)", {}).get("total_ms")
    for _ in range(warmup):
        sim.step()
    sim.timers.reset()
    times, its = [], []
    for _ in range(steps):
        t1 = time.perf_counter()
        diag = sim.step()
        times.append(time.perf_counter() - t1)
        its.append(int(diag["solver_iterations_pressure"]))
    sizes = list(getattr(sim.systems, "amg_sizes", []) or [])
    solve = sim.timers.as_dict().get("solve pressure", {})
    return {"coarsening": coarsening, "nodes": int(sim.mesh.nnodes), "setup_s": round(setup, 2),
            "amg_setup_ms": amg_ms, "levels": sizes,
            "step_ms_median": round(1e3 * float(np.median(times)), 3),
            "step_ms_all": [round(1e3 * t, 3) for t in times],
            "pressure_iterations_per_step": its,
            "solve_pressure_ms_per_call": solve.get("mean_ms"),
            "solve_pressure_calls": solve.get("calls")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--mesh", type=int, nargs=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    out = []
    for coarsening in ("aggregation", "classical"):
        row = one(args.config, coarsening, args.mesh, args.steps, args.warmup)
        print(json.dumps(row), flush=True)
        out.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
