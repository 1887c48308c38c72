"""Every device solver, vector and GPU-rank kernel compiles for a real GPU (sm_90, the H100/H200).

The simulator does no type checking, so code can pass there and still fail to compile. NVVM
(from the ``cuda-toolkit[nvvm,nvrtc]`` wheels of the test extra) compiles to PTX without a
GPU; this test does so in a subprocess with the simulator off, for the production and the
strict (fma=0) options, and checks that no kernel spills to local memory and that strict PTX
has no fused multiply-add (the exact dot product of GPU ranks: int64 atomics on its shared and
global buckets).
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(r"""
    import json
    import dycore.backend._numpy_compat  # noqa: F401
    from numba import cuda, float64, int64
    from numba.core import types
    import numba.cuda.dispatcher as dispatcher
    from dycore.backend.strict_fp import _renamed, install_nvvm_fma_guard
    from dycore.backend.solver_kernels import build_solver_kernels

    class _Device:                       # device functions ask the current device for its cc
        compute_capability = (9, 0)
    dispatcher.get_current_device = lambda: _Device()

    bodies = {}
    def keep(fn):
        bodies[fn.__name__] = fn
        return fn
    build_solver_kernels(keep, cuda.jit(device=True), 256)
    from dycore.parallel import device_kernels       # the GPU ranks' kernels too
    device_kernels._build(keep)
    f1, i1, f2 = types.float64[::1], types.int32[::1], types.float64[:, ::1]
    sigs = {
        "bsr_spmv": (i1, i1, f1, int64, int64, f1, f1, f1, int64, f1, int64, f2, int64, int64,
                     f1, i1),
        "smooth": (i1, i1, f1, int64, int64, int64, f1, f1, f1, f1, f1, float64, float64, int64,
                   int64, f2, int64, int64, f1, i1),
        "bsr3_lean_spmv": (i1, i1, f1, int64, f1, int64, f1, f1, f1, int64, f1, int64, f2,
                           int64, int64, f1, i1),
        "bsr3_lean_values": (f1, i1, f1, int64),
        "csr_spmv": (i1, i1, f1, int64, int64, f1, f1, f1, int64, f1),
        "csr_spmv@float32": (i1, i1, types.float32[::1], int64, int64, f1, f1, f1, int64, f1),
        "csr_spmv_dot": (i1, i1, f1, int64, f1, f1, f1, int64, f2, int64, int64, f1, i1),
        "smooth@float32": (i1, i1, types.float32[::1], int64, int64, int64, f1, f1, f1, f1, f1,
                           float64, float64, int64, int64, f2, int64, int64, f1, i1),
        "finish": (f2, int64, int64, int64, f1),
        "init_residual": (f1, f1, f1, f1, int64, f2, int64, f1, i1),
        "update_xr": (f1, f1, f1, f1, int64, f1, int64, f2, int64, f1, i1),
        "cg_update_p": (f1, f1, int64, f1),
        "bi_update_p": (f1, f1, f1, f1, int64, f1, f1),
        "bi_update_s": (f1, f1, f1, f1, f1, int64, f1, f2, int64, f1, i1),
        "bi_dots_ts": (f1, f1, f2, int64, f1, i1),
        "block_inverse": (f1, i1, int64, int64, f1),
        "accumulate": (f1, f1, int64),
        "copy": (f1, f1),
        "axpby": (f1, float64, f1, float64, f1, types.boolean),
        "x_plus_yz": (f1, f1, f1, f1),
        "multiply": (f1, f1, f1),
        "advection_source": (f1, f1, f1, float64, f1),
        "dirichlet_rows": (f1, i1, i1, types.int64[::1], types.int64[::1], int64, f1),
        "scatter_fill": (f1, types.int64[::1], float64),
        "nnf_rotate_blocks": (f1, f1, types.int64[::1], types.int64[::1], types.int64[::1],
                              types.int64[::1], types.int64[::1]),
        "nnf_rotate_rhs": (f1, f1, types.int64[::1], f1, types.int64[::1], float64, f1,
                           types.int64[::1]),
        "nnf_unrotate": (f1, types.int64[::1], f1),
        "nnf_remove_normal": (f1, types.int64[::1], f1, types.int64[::1]),
        "max_abs_diff": (f1, f1, f2),
        "step_scalars": (f1, f1, f1, f1, f2),
        "finish_columns": (f2, int64, i1, f1, int64),
        "pack_rows": (f1, types.int64[::1], int64, f1),
        "unpack_rows": (f1, types.int64[::1], int64, f1),
        "exact_dot_parts": (f1, f1, int64, types.int64[::1]),
        "exact_round": (types.int64[::1], int64, f1),
    }
    out = {"missing": sorted(set(bodies) - {n.split("@")[0] for n in sigs}), "kernels": {}}
    install_nvvm_fma_guard()             # the production strict path: renamed copies, fma=0
    for strict in (False, True):
        for name, sig in sigs.items():
            body = bodies[name.split("@")[0]]          # "@float32": float32 matrix values
            fn = _renamed(body) if strict else body
            ptx, _ = cuda.compile_ptx(fn, sig, cc=(9, 0))
            out["kernels"][f"{name}{'/strict' if strict else ''}"] = {
                "local": ".local" in ptx, "fma": "fma.rn.f64" in ptx,
                "atom_shared": "atom.shared.add.u64" in ptx,
                "atom_global": "atom.global.add.u64" in ptx}
    print(json.dumps(out))
""")


def test_solver_and_rank_kernels_compile_to_sm90_ptx():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["missing"] == [], f"kernels without a PTX check: {out['missing']}"
    assert len(out["kernels"]) == 2 * 35
    for name, k in out["kernels"].items():
        if name.startswith("exact_round"):     # one thread, its 72 big-integer digits local
            continue
        assert not k["local"], f"{name} uses local memory"
        if name.endswith("/strict"):
            assert not k["fma"], f"{name}: strict PTX contains fma"
    assert out["kernels"]["bsr_spmv"]["fma"]       # the production build does contract
    assert out["kernels"]["csr_spmv@float32"]["fma"]
    for mode in ("", "/strict"):   # the exact dot: int64 buckets in shared memory, then global
        k = out["kernels"][f"exact_dot_parts{mode}"]    # (no 33.6 kB local-memory array)
        assert k["atom_shared"] and k["atom_global"], k
