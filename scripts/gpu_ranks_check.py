"""Whole time steps on K GPU ranks of one host against one GPU rank.

    python3 scripts/gpu_ranks_check.py CONFIG --ranks 2 [--steps 10] [--warmup 2] \
        [--reduction auto|exact|allreduce] [--transport auto|nccl|peer|mpi] [--deterministic] \
        [--pressure jacobi|amg] [--method auto|cg|direct] [--mesh NX NY NZ]
        [--mesh-one NX NY NZ] [--weak NX NY NZ] [--factorisation distributed|replicated]
        [--ab-graphs] [--ab-reductions | --ab-recapture] [--ab-tracers] [--serial exact,auto] \
        [--json out.json] [--fields DIR]

The parent starts ``mpiexec -n K python3 scripts/gpu_ranks_check.py --worker ...`` (the mpiexec
beside this Python, else the one on PATH; ``NCCL_NVLS_ENABLE=0``), then the same with ``-n 1``.
Each rank process builds :class:`~dycore.parallel.gpu_simulation.GpuRankSimulation` (rank r on
GPU ``local rank % device count``; NCCL where CuPy has it, else the staged MPI transport;
``backend.solver_mode: device``; with ``--deterministic`` also ``assembly: deterministic`` and
``strict: true``; ``--pressure`` overrides ``solvers.pressure.preconditioner``: ``amg`` is
rank-local V-cycles on GPU ranks, ``jacobi`` — with at most 5000 iterations — gives the same
bits on any rank count), takes ``--warmup`` steps, then ``--steps`` timed steps: host clock around
each ``step()`` after a barrier (a step ends with a device→host read of its scalars, so the
device work is inside), the max over ranks per step. Rank 0 writes the step times, halo bytes
(sent by all ranks, per step), the staged transport's host time in exchanges (per rank and step;
NCCL: not measured), iteration counts, rank 0's stage timers, and the gathered fields.

``--mesh`` sets the cells of the K-rank run (default: the configuration's), ``--mesh-one`` those
of the 1-rank run (default: ``--mesh``): a weak-scaling pair when they differ (e.g. 96 96 80 on
2 ranks against 96 96 40 on one: the same tetrahedra per GPU). ``--weak NX NY NZ`` adds a
third run, one rank on that mesh, for the weak-scaling efficiency beside the strong scaling of
the same K-rank run; ``--steps 0`` measures the set-up alone (its time, every rank's peak host
memory). ``--factorisation distributed|replicated`` chooses how a direct pressure
solve runs on K ranks (``solvers.pressure.factorisation``). ``--ab-graphs``: after the timed
steps (whose Picard iterations are captured, one graph per rank, once the solves have learnt
their budgets), one more warm-up and as many steps with the iterations issued from Python
(``stepper.graphs.enabled = False``, the solves replaying their own graphs), in the same
processes: the step time and stage timers of both. ``--ab-reductions``: then two more steps
and as many timed ones, captured again, with the rank BiCGStab's s·s reduced on its own (four
reductions per iteration against the default three; the same iterates); ``--ab-recapture``
is its control: the same dropped budgets and graphs, learnt and captured again, with s·s still
reduced with t·s and t·t. ``--ab-tracers``:
then two more steps and as many timed ones with θ′ and q_v each solved on its own (the
default solves them together, one solve of two right-hand sides; the same bits): the step
time, tracer iterations and stage timers of both. ``--serial R[,R]``:
then, for each ``backend.reduction`` R, the serial run on one GPU without MPI
(:class:`~dycore.timestepping.simulation.Simulation` in a plain ``python3`` process, the
1-rank mesh, the same warm-up and timed steps; ``exact`` solves with the GPU ranks' solvers
over one rank, :mod:`dycore.parallel.one_gpu`): its median step and the max |diff| of every
field from the K-rank and 1-rank runs (0 in every field with ``--deterministic``, exact and
``jacobi``: one GPU without MPI gives the GPU ranks' bits; exit status 1 otherwise).

Printed (and written to ``--json``): for K ranks and for 1 rank, the mesh (cells, tetrahedra),
the median step time [ms], the halo kB per step sent by all ranks (the backend's
``counters.halo_bytes``: an exchange captured in a graph counts at each replay; ``--ab-graphs``
reports those of its uncaptured steps too, the same count), the exchanges a rank posts per
step and how many of them packed their values first (``halo_packs``: the rest sent from the
vector itself), every rank's peak host memory
(``ru_maxrss``, MB) after the set-up and after the steps, and for K ranks on the 1-rank mesh
the max |diff| of every field from the 1-rank run after the same number of steps (0 in every field with
``--deterministic``, the exact reduction and pressure ``jacobi``: the same bits on any rank
count) and the speed-up (strong scaling); on another mesh the weak-scaling efficiency
(1-rank step / K-rank step, per tetrahedra per rank). Exit status 1 when a rank run fails or,
with ``--deterministic`` + exact + jacobi on one mesh, a field differs in any bit.
``--fields DIR`` keeps every run's gathered fields (``DIR/ranks<label>.npz``), so that two
versions of the code can be compared bit for bit on the same run.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIELDS = ("u", "v", "w", "p", "theta_prime", "q_v", "q_c", "q_r")


def _peak_host_mb() -> float:
    """This process's peak resident memory [MB] (``ru_maxrss``: kB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _config(args):
    import dycore
    backend = {"name": "gpu", "solver_mode": "device"}
    if args.deterministic:
        backend.update(assembly="deterministic", strict=True)
    over = {}
    pressure = {}
    if args.pressure:                 # Jacobi CG needs ~1400 iterations on the paper mesh
        pressure["preconditioner"] = args.pressure
        if args.pressure == "jacobi":
            pressure["max_iterations"] = 5000
    if args.method:                   # cg, or direct (one factorisation or one per rank)
        pressure["method"] = args.method
    if args.factorisation:            # direct on K ranks: distributed or replicated
        pressure["factorisation"] = args.factorisation
    if pressure:
        over["solvers"] = {"pressure": pressure}
    if args.mesh:
        over["mesh"] = dict(zip(("nx", "ny", "nz"), args.mesh))
    return dycore.load_config(args.config, backend=backend, **over)


def worker(args) -> None:
    """One rank of ``mpiexec``: warm-up, timed steps, gather; rank 0 writes ``args.out``."""
    from dycore.parallel.gpu_simulation import GpuRankSimulation
    from dycore.parallel.mpi import abort_on_error, world
    from mpi4py import MPI
    comm = world()
    if args.timeout > 60:     # a hang: every rank's Python stacks, read back by _launch
        import faulthandler
        stacks = open(f"{args.out}.rank{comm.rank}.stacks", "w")
        faulthandler.dump_traceback_later(args.timeout - 30, file=stacks)
    with abort_on_error(comm):
        t0 = time.perf_counter()
        from dycore.parallel.run import default_reduction
        cfg = _config(args)
        reduction = default_reduction(cfg) if args.reduction == "auto" else args.reduction
        if args.halo_buffers:       # every exchange through the pack / unpack buffers (A/B)
            from dycore.parallel.device_halo import DeviceHaloExchange
            DeviceHaloExchange.allow_in_place = False
        sim = GpuRankSimulation(cfg, comm, reduction=reduction, transport=args.transport,
                                global_amg=args.global_amg,     # (None: the default)
                                replicate_below=args.replicate_below,
                                overlap=args.overlap)
        setup_s = time.perf_counter() - t0
        peak_setup = comm.gather(_peak_host_mb(), root=0)
        setup_ranks = comm.gather(dict(getattr(sim, "setup_seconds", {})), root=0)

        def progress(what):                   # (read back when a run hits --timeout)
            if comm.rank == 0:
                print(f"[{time.perf_counter() - t0:8.1f} s] {what}", flush=True)
        progress(f"set-up done ({setup_s:.1f} s)")
        for j in range(args.warmup):
            sim.step()
            progress(f"warm-up step {j + 1}")

        def timed():
            """``args.steps`` steps, each timed from a barrier (the max over ranks): (seconds,
            each step's solver iterations)."""
            times, its = [], []
            for _ in range(args.steps):
                comm.Barrier()
                t1 = time.perf_counter()
                diag = sim.step()
                times.append(comm.allreduce(time.perf_counter() - t1, op=MPI.MAX))
                its.append({k: diag[f"solver_iterations_{k}"]
                            for k in ("pressure", "momentum", "tracer")})
            return times, its

        sim.timers.reset()        # the stage timers cover the timed steps only
        t, cnt = sim.transport, sim.backend.counters   # (captured exchanges: at each replay)
        b0, s0 = cnt.halo_bytes, getattr(t, "seconds", None)
        e0, k0 = cnt.halo_exchanges, cnt.halo_packs
        times, its = timed()
        if hasattr(t, "check"):     # (the peer transport: no wait gave up)
            t.check()
        n = max(args.steps, 1)
        halo_bytes = comm.allreduce(cnt.halo_bytes - b0, op=MPI.SUM) / n
        # exchanges per step and per rank, and how many of them packed before sending
        halo_counts = [comm.allreduce(c, op=MPI.SUM) / comm.size / n
                       for c in (cnt.halo_exchanges - e0, cnt.halo_packs - k0)]
        halo_s = (None if s0 is None
                  else comm.allreduce(t.seconds - s0, op=MPI.SUM) / comm.size / n)
        progress(f"{args.steps} timed steps")
        # the fields after the warm-up and timed steps, before any A/B's further steps (what
        # the other runs are compared by)
        fields = sim.gather_fields()
        captured = sim.stepper.graphs.captured
        timers = sim.timers.as_dict()
        plain, plain_timers, plain_halo = [], {}, None
        if args.ab_graphs and args.steps:     # the same steps issued from Python (B of A/B)
            sim.stepper.graphs.enabled = False
            sim.step()
            sim.timers.reset()
            b1 = cnt.halo_bytes
            plain = timed()[0]
            plain_timers = sim.timers.as_dict()
            plain_halo = comm.allreduce(cnt.halo_bytes - b1, op=MPI.SUM) / args.steps
            sim.stepper.graphs.enabled = True
        four = []
        if (args.ab_reductions or args.ab_recapture) and args.steps:
            for s in sim.systems.solvers.values():   # s·s on its own, or (the control)
                s.set_merged(not args.ab_reductions)  # merged as before: budgets re-learnt
            sim.stepper.graphs.clear()
            for _ in range(2):                  # checked (budgets learnt), then captured
                sim.step()
            four = timed()[0]
        apart, apart_its, apart_timers = [], [], {}
        if args.ab_tracers and args.steps:    # θ′ and q_v each solved on its own (B of A/B)
            sim.stepper.tracers_together = False   # (the next step runs uncaptured)
            for _ in range(2):                  # checked (budgets learnt), then captured
                sim.step()
            sim.timers.reset()
            apart, apart_its = timed()
            apart_its = [i["tracer"] for i in apart_its]
            apart_timers = sim.timers.as_dict()
            sim.stepper.tracers_together = True
        peak = comm.gather(_peak_host_mb(), root=0)
        if comm.rank == 0:
            np.savez(args.out + ".npz", **fields)
            Path(args.out + ".json").write_text(json.dumps({
                "ranks": comm.size, "setup_s": setup_s, "step_s": times, "iterations": its,
                "mesh": [sim.config.mesh.nx, sim.config.mesh.ny, sim.config.mesh.nz],
                "tets": int(sim.mesh.tets.shape[0]), "nodes": int(sim.nnodes),
                "peak_host_mb_after_setup": peak_setup, "peak_host_mb": peak,
                "halo_bytes_per_step": halo_bytes, "halo_host_s_per_step": halo_s,
                "halo_exchanges_per_step": halo_counts[0], "halo_packs_per_step": halo_counts[1],
                "transport": type(t).__name__, "device": sim.backend.describe(),
                "nccl_stream_ordered": getattr(t, "stream_ordered", None),
                "reduction": reduction,
                "halo_values_rank0": int(sim.halo_values_per_exchange),
                "pressure_method": sim.systems.pressure_method,
                "amg_sizes": list(getattr(getattr(sim.systems, "pcg", None), "amg_sizes", [])),
                "amg_whole_from": getattr(getattr(getattr(sim.systems, "pcg", None), "vcycle",
                                                  None), "top", None),
                "timers_rank0": timers, "captured_iterations": captured,
                "setup_seconds_rank0": getattr(sim, "setup_seconds", {}),
                "setup_seconds_ranks": setup_ranks,
                "step_s_four_reductions": four,
                "step_s_tracers_apart": apart, "tracer_iterations_apart": apart_its,
                "timers_rank0_tracers_apart": apart_timers,
                "step_s_uncaptured": plain, "halo_bytes_per_step_uncaptured": plain_halo,
                "timers_rank0_uncaptured": plain_timers},
                default=float))
        sim.close()               # graphs, then the NCCL communicator: the ranks can exit


def serial_worker(args) -> None:
    """One GPU without MPI: Simulation with ``backend.reduction`` = ``args.serial_reduction``,
    warm-up, timed steps (host clock around ``step()``), fields to ``args.out``."""
    from dycore.timestepping.simulation import Simulation
    t0 = time.perf_counter()
    cfg = _config(args)
    cfg.backend.reduction = args.serial_reduction
    sim = Simulation(cfg)
    setup_s = time.perf_counter() - t0
    for _ in range(args.warmup):
        sim.step()
    times, its = [], []
    for _ in range(args.steps):
        t1 = time.perf_counter()
        diag = sim.step()
        times.append(time.perf_counter() - t1)
        its.append({k: diag[f"solver_iterations_{k}"] for k in ("pressure", "momentum", "tracer")})
    np.savez(args.out + ".npz", **sim.output_fields())
    Path(args.out + ".json").write_text(json.dumps({
        "reduction": args.serial_reduction, "systems": type(sim.systems).__name__,
        "setup_s": setup_s, "step_s": times, "iterations": its,
        "device": sim.backend.describe()}, default=float))


def _serial(args, reduction: str, out: str, mesh=None) -> tuple[dict | None, str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--serial-worker", args.config,
           "--out", out, "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--serial-reduction", reduction]
    if args.deterministic:
        cmd.append("--deterministic")
    for flag in ("pressure", "method"):
        if getattr(args, flag):
            cmd += [f"--{flag}", getattr(args, flag)]
    if mesh:
        cmd += ["--mesh", *map(str, mesh)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT),
                                                       os.environ.get("PYTHONPATH", "")]))
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, f"serial run ({reduction}) ran past --timeout {args.timeout:g} s"
    if proc.returncode != 0:
        return None, (f"serial run ({reduction}) failed ({proc.returncode}):\n"
                      f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    res = json.loads(Path(out + ".json").read_text())
    res["fields"] = dict(np.load(out + ".npz"))
    return res, ""


def _mpiexec() -> str:
    from dycore.parallel.launch import find_mpiexec
    found = find_mpiexec()
    if not found:
        sys.exit("gpu_ranks_check: mpiexec not found (pip install -e '.[mpi]')")
    return found


def _launch(args, k: int, out: str, mesh=None) -> tuple[dict | None, str]:
    cmd = [_mpiexec(), "-n", str(k), *shlex.split(args.mpiexec_args or ""), sys.executable,
           str(Path(__file__).resolve()), "--worker",
           args.config, "--out", out, "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--reduction", args.reduction, "--transport", args.transport,
           "--timeout", str(args.timeout)]     # (each rank dumps its stacks 30 s before)
    if args.ab_graphs:
        cmd.append("--ab-graphs")
    if args.ab_reductions:
        cmd.append("--ab-reductions")
    if args.ab_recapture:
        cmd.append("--ab-recapture")
    if args.ab_tracers:
        cmd.append("--ab-tracers")
    if args.global_amg is not None:
        cmd.append("--global-amg" if args.global_amg else "--local-amg")
    if args.replicate_below is not None:
        cmd += ["--replicate-below", str(args.replicate_below)]
    if args.overlap:
        cmd.append("--overlap")
    if args.halo_buffers:
        cmd.append("--halo-buffers")
    if args.deterministic:
        cmd.append("--deterministic")
    if args.pressure:
        cmd += ["--pressure", args.pressure]
    if args.method:
        cmd += ["--method", args.method]
    if args.factorisation:
        cmd += ["--factorisation", args.factorisation]
    if mesh:
        cmd += ["--mesh", *map(str, mesh)]
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired as exc:     # what the ranks printed says where they were
        printed, err = (x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                        for x in (exc.stdout, exc.stderr))
        stacks = "".join(f"\n-- rank {r}'s stacks {args.timeout - 30:g} s in:\n"
                         + Path(f"{out}.rank{r}.stacks").read_text()[-4000:]
                         for r in range(k) if Path(f"{out}.rank{r}.stacks").exists())
        return None, (f"mpiexec -n {k} ran past --timeout {args.timeout:g} s; its output "
                      f"so far:\n{printed[-3000:]}\n{err[-3000:]}{stacks}")
    if proc.returncode != 0:
        return None, f"mpiexec -n {k} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    res = json.loads(Path(out + ".json").read_text())
    res["fields"] = dict(np.load(out + ".npz"))
    return res, ""


def _announce(what: str, setup_s: float, step_s: list) -> None:
    """One line as soon as a run has finished (a later run that hangs or is killed does not
    take this one's figures with it; the JSON comes at the end)."""
    step = f"step {1e3 * float(np.median(step_s)):.1f} ms (median of {len(step_s)})" if step_s \
        else "no timed step"
    print(f"done: {what}: set-up {setup_s:.1f} s, {step}", flush=True)


def _slowest(ranks: list) -> dict:
    """{phase: [the longest seconds over the ranks, that rank]} of every rank's set-up split
    (a phase a rank waits in for the others shows the slowest one's time there too)."""
    out = {}
    for r, seconds in enumerate(ranks):
        for k, v in seconds.items():
            if k not in out or v > out[k][0]:
                out[k] = [round(v, 2), r]
    return out


def _summary(res: dict) -> dict:
    return {"ranks": res["ranks"], "transport": res["transport"], "device": res["device"],
            "nccl_stream_ordered": res.get("nccl_stream_ordered"),
            "reduction": res["reduction"],
            "mesh": res["mesh"], "tets": res["tets"], "nodes": res["nodes"],
            "setup_s": round(res["setup_s"], 2),
            "setup_s_rank0": {k: round(v, 2) for k, v in res["setup_seconds_rank0"].items()},
            "setup_s_slowest_rank": _slowest(res.get("setup_seconds_ranks") or []),
            "peak_host_mb_after_setup": [round(m, 1) for m in res["peak_host_mb_after_setup"]],
            "peak_host_mb": [round(m, 1) for m in res["peak_host_mb"]],
            "step_ms_median": (round(1e3 * float(np.median(res["step_s"])), 3)
                               if res["step_s"] else None),
            "step_ms_all": [round(1e3 * s, 3) for s in res["step_s"]],
            "halo_kB_per_step": round(res["halo_bytes_per_step"] / 1e3, 1),
            "halo_exchanges_per_step_per_rank": res.get("halo_exchanges_per_step"),
            "halo_packs_per_step_per_rank": res.get("halo_packs_per_step"),
            "halo_kB_per_step_uncaptured": (None if res["halo_bytes_per_step_uncaptured"] is None
                                            else round(res["halo_bytes_per_step_uncaptured"]
                                                       / 1e3, 1)),
            "halo_host_ms_per_step_per_rank": (None if res["halo_host_s_per_step"] is None
                                               else round(1e3 * res["halo_host_s_per_step"], 3)),
            "halo_values_rank0": res["halo_values_rank0"],
            "pressure_method": res["pressure_method"],
            "amg_sizes": res.get("amg_sizes"), "amg_whole_from": res.get("amg_whole_from"),
            "captured_iterations": res["captured_iterations"],
            "step_ms_median_four_reductions": (
                round(1e3 * float(np.median(res["step_s_four_reductions"])), 3)
                if res["step_s_four_reductions"] else None),
            "step_ms_median_tracers_apart": (
                round(1e3 * float(np.median(res["step_s_tracers_apart"])), 3)
                if res.get("step_s_tracers_apart") else None),
            "tracer_iterations_apart": res.get("tracer_iterations_apart"),
            "step_ms_median_uncaptured": (round(1e3 * float(np.median(res["step_s_uncaptured"])),
                                                3) if res["step_s_uncaptured"] else None),
            "iterations_last_step": res["iterations"][-1] if res["iterations"] else None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--reduction", default="auto", choices=("auto", "exact", "allreduce"),
                   help="dot products of the ranks (auto: what `dycore run` takes — allreduce "
                        "with atomic assembly, exact with --deterministic)")
    p.add_argument("--transport", default="auto", choices=("auto", "nccl", "peer", "mpi"))
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--pressure", choices=("jacobi", "amg"))
    p.add_argument("--method", choices=("auto", "cg", "direct"),
                   help="solvers.pressure.method (default: the config's)")
    p.add_argument("--factorisation", choices=("auto", "distributed", "replicated"),
                   help="solvers.pressure.factorisation of a direct solve on K ranks")
    p.add_argument("--weak", type=int, nargs=3, metavar=("NX", "NY", "NZ"),
                   help="cells of one more 1-rank run, for the weak-scaling efficiency "
                        "beside the strong scaling of --mesh")
    p.add_argument("--skip-one", action="store_true",
                   help="no 1-rank run on --mesh-one (e.g. an A/B of K-rank settings)")
    p.add_argument("--mesh", type=int, nargs=3, metavar=("NX", "NY", "NZ"),
                   help="cells of the K-rank run (default: the config's)")
    p.add_argument("--mesh-one", type=int, nargs=3, metavar=("NX", "NY", "NZ"),
                   help="cells of the 1-rank run (default: --mesh); another mesh: weak scaling")
    p.add_argument("--ab-graphs", action="store_true",
                   help="after the timed steps, as many more in the same process with the "
                        "Picard iterations issued from Python (not captured): an A/B")
    amg = p.add_mutually_exclusive_group()
    amg.add_argument("--global-amg", dest="global_amg", action="store_true", default=None,
                     help="with --pressure amg and CG: the V-cycle of one hierarchy of the "
                          "whole matrix distributed by rows (GpuRankSimulation(global_amg="
                          "True)); default: GpuRankSimulation's choice (global "
                          "up to GLOBAL_AMG_MAX_ROWS rows)")
    amg.add_argument("--local-amg", dest="global_amg", action="store_false",
                     help="with --pressure amg and CG: rank-local hierarchies (block-Jacobi "
                          "over the ranks; GpuRankSimulation(global_amg=False))")
    p.add_argument("--replicate-below", type=int, default=None, metavar="N",
                   help="with the global V-cycle: the levels of at most N unknowns (below the fine "
                        "one) held whole by every rank, their right-hand side all-gathered "
                        "once (GpuRankSimulation(replicate_below=N); default: "
                        "GLOBAL_AMG_REPLICATE_BELOW)")
    p.add_argument("--halo-buffers", action="store_true",
                   help="every halo exchange packs and unpacks through its buffers, also where "
                        "NCCL could read and write the vectors in place (an A/B)")
    p.add_argument("--overlap", action="store_true",
                   help="the pressure CG's products sum their interior rows while the halo "
                        "exchange travels (GpuRankSimulation(overlap=True))")
    recapture = p.add_mutually_exclusive_group()
    recapture.add_argument("--ab-reductions", action="store_true",
                           help="then as many steps (captured again) with the rank "
                                "BiCGStab's s·s reduced on its own: four reductions per "
                                "iteration against three (--ab-recapture is the control)")
    recapture.add_argument("--ab-recapture", action="store_true",
                           help="the control of --ab-reductions: the BiCGStab budgets and "
                                "graphs dropped, learnt and captured again, s·s still merged "
                                "(three reductions); its steps are reported as "
                                "four_reductions' are")
    p.add_argument("--ab-tracers", action="store_true",
                   help="then two more steps and as many timed ones (captured again) with "
                        "θ′ and q_v each solved on its own instead of in one solve of two "
                        "right-hand sides (the same bits)")
    p.add_argument("--serial", help="comma list of backend.reduction values (exact, auto): "
                   "the serial run on one GPU without MPI, each, against the rank runs")
    p.add_argument("--json")
    p.add_argument("--fields", metavar="DIR",
                   help="also write every run's gathered fields to DIR/ranks<label>.npz "
                        "(label: K, 1 or 1w), to compare runs of two versions bit for bit")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--mpiexec-args", metavar="ARGS",
                   help="options for mpiexec before the program, e.g. \"--map-by slot:PE=4 "
                        "--bind-to core\" (Open MPI: four cores a rank; its default binds "
                        "each rank to one core, so the set-up's parallel loops run on one "
                        "thread)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--serial-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--serial-reduction", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    if args.serial_worker:
        serial_worker(args)
        return 0
    runs, failed = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        one_mesh = args.mesh_one or args.mesh
        weak = args.ranks != 1 and one_mesh != args.mesh
        # (label, ranks, mesh): K ranks, 1 rank, and with --weak one more 1-rank run ("1w")
        plan = [(args.ranks, args.ranks, args.mesh)] + ([] if args.skip_one
                                                        else [(1, 1, one_mesh)])
        if args.weak and args.ranks != 1:
            plan.append(("1w", 1, args.weak))
        for label, k, mesh in {p[0]: p for p in plan}.values():
            res, err = _launch(args, k, str(Path(tmp) / f"ranks{label}"), mesh)
            if res is None:
                print(err, file=sys.stderr)
                failed.append(label)
            else:
                runs[label] = res
                _announce(f"{k} rank(s)", res["setup_s"], res["step_s"])
                if args.fields:
                    Path(args.fields).mkdir(parents=True, exist_ok=True)
                    np.savez(Path(args.fields) / f"ranks{label}.npz", **res["fields"])
        serial = {}
        for red in (args.serial.split(",") if args.serial and args.steps else []):
            res, err = _serial(args, red, str(Path(tmp) / f"serial-{red}"), one_mesh)
            if res is None:
                print(err, file=sys.stderr)
                failed.append(f"serial-{red}")
            else:
                serial[red] = res
                _announce(f"one GPU without MPI ({red})", res["setup_s"], res["step_s"])
    out = {"config": args.config, "steps": args.steps, "warmup": args.warmup,
           "reduction": args.reduction, "deterministic": args.deterministic,
           "runs": {k: _summary(r) for k, r in runs.items()}, "failed": failed}
    bad = bool(failed)
    one_weak = "1w" if "1w" in runs else (1 if weak else None)
    if args.steps == 0:                # --steps 0: the set-up alone (time, memory)
        one_weak = None
    if args.ranks in runs and one_weak in runs:
        kr, one = out["runs"][args.ranks], out["runs"][one_weak]
        out["weak_efficiency"] = round(one["step_ms_median"] / kr["step_ms_median"], 3)
        out["tets_per_rank"] = {args.ranks: round(kr["tets"] / args.ranks), 1: one["tets"]}
    if args.ranks in runs and 1 in runs and args.ranks != 1 and not weak and args.steps:
        a, b = runs[args.ranks]["fields"], runs[1]["fields"]
        diff = {f: float(np.max(np.abs(a[f] - b[f]))) for f in FIELDS}
        out["max_abs_diff_vs_1_rank"] = diff
        out["speedup_vs_1_rank"] = round(out["runs"][1]["step_ms_median"]
                                         / out["runs"][args.ranks]["step_ms_median"], 3)
        cfg = _config(args)       # (the --mesh of both runs)
        if (args.deterministic and args.reduction in ("auto", "exact")
                and cfg.solvers.pressure.preconditioner == "jacobi" and any(diff.values())):
            bad = True
            out["error"] = "deterministic exact run differs from 1 rank"
    for red, res in serial.items():
        row = {"systems": res["systems"], "device": res["device"],
               "setup_s": round(res["setup_s"], 2),
               "step_ms_median": round(1e3 * float(np.median(res["step_s"])), 3),
               "iterations_last_step": res["iterations"][-1]}
        for label in {args.ranks, 1} & set(runs):
            if label == args.ranks and weak:
                continue
            d = {f: float(np.max(np.abs(res["fields"][f] - runs[label]["fields"][f])))
                 for f in FIELDS}
            row[f"max_abs_diff_vs_{label}_ranks"] = d
            if (red == "exact" and args.deterministic
                    and _config(args).solvers.pressure.preconditioner == "jacobi"
                    and any(d.values())):
                bad = True
                out["error"] = f"one GPU without MPI (exact) differs from {label} rank(s)"
        out.setdefault("serial", {})[red] = row
    text = json.dumps(out, indent=2, default=str)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    for k in sorted(runs or {}, key=str, reverse=True):
        print(f"\nstage timers of rank 0, {k} rank(s) (the timed steps; "
              "CUDA events on a GPU):")
        for tag, what in (("", ""), ("_uncaptured", "Picard iterations not captured "
                                                    "(--ab-graphs)"),
                          ("_tracers_apart", "θ′ and q_v solved apart (--ab-tracers)")):
            if tag and runs[k].get("timers_rank0" + tag):
                print(f"  -- the same, {what}:")
            for name, t in runs[k].get("timers_rank0" + tag, {}).items():
                print(f"  {name:40s} {t.get('calls', 0):6d} calls  "
                      f"{t.get('mean_ms', 0.0):10.3f} ms/call  {t.get('total_ms', 0.0):12.1f} ms")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
