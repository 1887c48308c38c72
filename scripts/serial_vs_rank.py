"""One GPU rank against the serial device run (no MPI), the same configuration and steps.

    [NUMBA_ENABLE_CUDASIM=1] python3 scripts/serial_vs_rank.py [STEPS] [--reduction auto|exact]

The configuration is the GPU-rank tests' (tests/parallel/gpu_step_driver.py: the small case
on a 4 × 4 × 3-node mesh, deterministic assembly, strict floating point, Jacobi CG, BiCGStab).
The rank run is ``mpiexec -n 1`` of that driver (GpuRankSimulation: correctly rounded dot
products), the serial run is :class:`~dycore.timestepping.simulation.Simulation` in this
process with ``backend.reduction`` set to ``--reduction``: ``auto`` (default) keeps the serial
device solvers (block-tree dot products), ``exact`` takes the GPU ranks' solvers over one rank
(:mod:`dycore.parallel.one_gpu`). Printed per step: max |diff| of p, θ′ and u against the
field's max, whether they are bit for bit equal, and both runs' iteration counts.
Measured under the simulator (2026-11-28): with ``auto`` not bitwise — p 4.6e-11 of 532 after
step 1, 133 against 134 pressure-CG iterations (docs/performance.md); with ``exact`` bitwise.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "parallel"))
sys.path.insert(0, str(ROOT))


def main(steps: int, reduction: str = "auto") -> None:
    from gpu_step_driver import config

    from dycore.parallel.launch import find_mpiexec
    from dycore.timestepping.simulation import Simulation
    with tempfile.TemporaryDirectory() as tmp:
        dst = str(Path(tmp) / "rank1.npz")
        subprocess.run([find_mpiexec() or "mpiexec", "-n", "1", sys.executable,
                        str(ROOT / "tests" / "parallel" / "gpu_step_driver.py"), dst,
                        str(steps), "gpu"], cwd=ROOT, check=True)
        rank = dict(np.load(dst))
    cfg = config("gpu")
    cfg.backend.reduction = reduction
    sim = Simulation(cfg)
    b = sim.backend
    for k in range(1, steps + 1):
        diag = sim.step()
        s = sim.state
        serial = {"p": np.array(b.to_host(s.p)), "theta_prime": np.array(b.to_host(s.theta_prime)),
                  "u": np.array(b.to_host(s.u))}
        mine = {"p": rank[f"p_{k}"], "theta_prime": rank[f"theta_prime_{k}"],
                "u": np.stack([rank[f"u_{k}"], rank[f"v_{k}"], rank[f"w_{k}"]], axis=1)}
        for f in ("p", "theta_prime", "u"):
            d = float(np.max(np.abs(mine[f] - serial[f])))
            print(f"step {k} {f}: max|diff| {d:.3e} of max {float(np.max(np.abs(serial[f]))):.3e}"
                  f", bitwise {np.array_equal(mine[f], serial[f])}")
        its = {n: diag[f"solver_iterations_{n}"] for n in ("pressure", "momentum", "tracer")}
        ranks = {n: int(rank[f"its_{n}"][k - 1]) for n in its}
        print(f"step {k} iterations: serial {its}, 1 GPU rank {ranks}")


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps", type=int, nargs="?", default=2)
    ap.add_argument("--reduction", choices=("auto", "exact"), default="auto")
    a = ap.parse_args()
    main(a.steps, a.reduction)
