"""Every generated element-loop kernel compiles for a real GPU (sm_90, the H100/H200).

The simulator does no type checking, so a generated kernel could pass there and still fail
to compile. NVVM compiles to PTX without a GPU (as tests/parity/test_ptx_compile.py does for
the solver kernels); the signatures come from the loops' own declarations, for the normal and
the strict (fma=0) options. Strict PTX must have no fused multiply-add; the momentum kernel
has exactly the float64 atomic adds its declared block sparsity allows.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(r"""
    import json
    import dycore.backend._numpy_compat  # noqa: F401
    from numba import cuda
    from numba.core import types
    import numba.cuda.dispatcher as dispatcher
    from dycore.assembly.loop_spec import Gather, Row, Table, Output, Result
    from dycore.assembly.loops import ASSEMBLY
    from dycore.backend import gpu_kernels, gpu_loops_gen
    from dycore.backend.strict_fp import _renamed, install_nvvm_fma_guard

    class _Device:                       # device functions ask the current device for its cc
        compute_capability = (9, 0)
    dispatcher.get_current_device = lambda: _Device()
    gpu_kernels._install_csr_find_device()

    def arr(dtype, ndim):
        return types.Array(dtype, ndim, "C")

    def signature(loop):
        f8, i4 = types.float64, types.int32
        kinds = {"tets": arr(i4, 2), "lookup": arr(i4, 3), "indptr": arr(i4, 1),
                 "indices": arr(i4, 1), "mode": types.int64}
        for a in loop.args:
            if isinstance(a, Gather):
                kinds[a.source] = arr(f8, len(a.shape))          # (nnodes, *shape[1:])
            elif isinstance(a, Row):
                kinds[a.source] = arr(f8, len(a.shape) + 1)
            elif isinstance(a, Table) and not a.module_global:
                kinds[a.source] = arr(f8, len(a.shape))
            elif isinstance(a, Output):
                nd = 1 if loop.flat else len(a.shape) + 1
                kinds[a.elements] = arr(f8, nd)
                if a.target:
                    kinds[a.target] = arr(f8, 1)
                    kinds[f"want_{a.name}"] = types.boolean
        if loop.result:
            kinds[loop.result.target] = arr(types.int64 if loop.result.target == "status"
                                            else f8, 1)
        return tuple(kinds.get(p, types.float64) for p in loop.gpu_params())

    install_nvvm_fma_guard()
    out = {}
    for loop in ASSEMBLY.loops:
        for strict in (False, True):
            fn = gpu_loops_gen.KERNELS[loop.name]
            fn = _renamed(fn) if strict else fn
            ptx, _ = cuda.compile_ptx(fn, signature(loop), cc=(9, 0))
            out[f"{loop.name}{'/strict' if strict else ''}"] = {
                "fma": "fma.rn.f64" in ptx,
                "atomics": ptx.count("atom.global.add.f64") + ptx.count("red.global.add.f64")}
    # the A/B variant of scripts/momentum_scatter_ab.py: every block entry scattered
    from dycore.bench.scatter_ab import dense_kernel_body
    ptx, _ = cuda.compile_ptx(dense_kernel_body(ASSEMBLY, "momentum"),
                              signature(ASSEMBLY["momentum"]), cc=(9, 0))
    out["momentum/all entries"] = {
        "fma": "fma.rn.f64" in ptx,
        "atomics": ptx.count("atom.global.add.f64") + ptx.count("red.global.add.f64")}
    print(json.dumps(out))
""")


def test_generated_assembly_kernels_compile_to_sm90_ptx():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    from dycore.assembly.loops import ASSEMBLY
    assert sorted(k for k in out if "/" not in k) == sorted(lp.name for lp in ASSEMBLY.loops)
    for name, r in out.items():
        if name.endswith("/strict"):
            assert not r["fma"], f"{name}: fused multiply-add in strict PTX"
    assert any(r["fma"] for n, r in out.items() if "/" not in n)   # normal mode does fuse
    # the momentum scatter, unrolled by NVVM: 16 blocks x 5 declared entries + 12 rhs values
    # (Output.nonzeros), against 16 x 9 + 12 with every entry (the A/B variant)
    assert out["momentum"]["atomics"] == out["momentum/strict"]["atomics"] == 16 * 5 + 12
    assert out["momentum/all entries"]["atomics"] == 16 * 9 + 12
