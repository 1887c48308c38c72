#!/usr/bin/env python3
"""The one GPU-machine script: a thin wrapper over ``dycore bench --parts ...`` and
``dycore validate --checks ...`` (every check and timing lives in the package).

Run on the GPU machine (scripts/gpu_check.sh prepares the offline environment first):

    python3 scripts/gpu_check.py [--config configs/mountainwave3d.yaml] [--parts kernels,steps,compare]

Parts, in the order given, and what each runs:

kernels          dycore bench --parts operators      every assembly operator, GPU atomic and
                                                      deterministic vs @njit, differences,
                                                      kernel resources, block sweep
steps            dycore bench --parts steps           the Picard step per backend variant
compare          dycore validate --checks fields      CPU vs GPU (host solvers): kernels, then
                                                      every field over --compare-steps steps
libm             dycore validate --checks libm        strict FP per operation, GPU vs CPU
modes            dycore bench --parts modes           cost of deterministic assembly / strict FP
device           dycore bench --parts device          the device-solver step, counted; vs host
solver_ab        dycore bench --parts solver_ab       fused / separate finishes, grouped rows
pressure_profile dycore bench --parts pressure_profile  microseconds per CG piece
restart          dycore validate --checks restart     bitwise GPU restart (--restart-steps)

--mesh and --pressure-rtol are applied to a copy of the configuration written to
$OUT/gpu_check_config.yaml, which every command reads. Everything printed is also written to
$OUT (or ./gpu_out) as gpu_check.txt; the commands' own results are $OUT/bench_PART.json and
$OUT/validate_PART/. Exit status: the first failing command's, else 0.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: part -> the dycore subcommand and its part / check name
PARTS = {"kernels": ("bench", "operators"), "steps": ("bench", "steps"),
         "compare": ("validate", "fields"), "libm": ("validate", "libm"),
         "modes": ("bench", "modes"), "device": ("bench", "device"),
         "solver_ab": ("bench", "solver_ab"), "pressure_profile": ("bench", "pressure_profile"),
         "restart": ("validate", "restart")}


def command(part: str, args, config: Path, out: Path) -> list[str]:
    """The ``python -m dycore ...`` command line of ``part``."""
    sub, name = PARTS[part]
    base = [sys.executable, "-m", "dycore", sub, str(config)]
    if sub == "bench":
        paths = "both" if part == "steps" else "gpu"
        return base + ["--parts", name, "--paths", paths, "--repeat", str(args.repeat),
                       "--steps", str(args.steps), "--json", str(out / f"bench_{part}.json")]
    cmd = base + ["--checks", name, "--output-dir", str(out / f"validate_{part}")]
    if name == "fields":
        cmd += ["--steps", str(args.compare_steps)]
    if name == "restart":
        cmd += ["--restart-steps", str(args.restart_steps),
                "--restart-modes", args.restart_modes]
    return cmd


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/mountainwave3d.yaml")
    ap.add_argument("--parts", default="kernels,steps,compare")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--compare-steps", type=int, default=20)
    ap.add_argument("--restart-steps", type=int, default=20,
                    help="steps of the restart part (restart at half of them)")
    ap.add_argument("--restart-modes", default="device,host",
                    help="solver modes of the restart part")
    ap.add_argument("--mesh", default=None, help="override nx,ny,nz e.g. 24,24,20")
    ap.add_argument("--pressure-rtol", type=float, default=None,
                    help="override solvers.pressure.rtol (reported with the results)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"--parts: unknown {', '.join(unknown)} (choose from {', '.join(PARTS)})")
    sys.path.insert(0, str(REPO))
    from dycore.config import load_config
    over = {"output": {"progress": False}}
    if args.mesh:
        nx, ny, nz = (int(v) for v in args.mesh.split(","))
        over["mesh"] = {"nx": nx, "ny": ny, "nz": nz}
    if args.pressure_rtol is not None:
        over["solvers"] = {"pressure": {"rtol": args.pressure_rtol}}
    out = Path(os.environ.get("OUT", "gpu_out")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = out / "gpu_check_config.yaml"
    config.write_text(load_config(args.config, over).to_yaml())
    log = out / "gpu_check.txt"
    log.write_text(f"configuration: {args.config} with {over} -> {config}\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    status = 0
    for part in parts:                                   # in the order given
        cmd = command(part, args, config, out)
        line = f"== {part}: {' '.join(cmd[1:])}"
        print(line, flush=True)
        with log.open("a") as f:
            f.write(line + "\n")
        if args.dry_run:
            continue
        with log.open("a") as f:                         # a time-out keeps what was printed
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            for text in proc.stdout:
                sys.stdout.write(text)
                sys.stdout.flush()
                f.write(text)
                f.flush()
            rc = proc.wait()
        if rc and not status:
            status = rc
            print(f"== {part}: exit status {rc}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
