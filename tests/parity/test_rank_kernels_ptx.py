"""The GPU-rank kernels (halo pack / unpack, exact dot parts) compile to sm_90 PTX with NVVM,
no GPU needed: what the simulator tests cannot show (``math.frexp`` and int64 shared-memory
atomics lowered by numba-cuda, no local-memory spill of the 33.6 kB bucket array)."""
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
    from numba import cuda, int64
    from numba.core import types
    import numba.cuda.dispatcher as dispatcher
    from dycore.parallel import device_kernels

    class _Device:
        compute_capability = (9, 0)
    dispatcher.get_current_device = lambda: _Device()
    bodies = {}
    def keep(fn):
        bodies[fn.__name__] = fn
        return fn
    device_kernels._build(keep)
    f1, l1 = types.float64[::1], types.int64[::1]
    sigs = {"pack_rows": (f1, l1, int64, f1), "unpack_rows": (f1, l1, int64, f1),
            "exact_dot_parts": (f1, f1, int64, l1)}
    out = {}
    for name, sig in sigs.items():
        ptx, _ = cuda.compile_ptx(bodies[name], sig, cc=(9, 0))
        out[name] = {"local": ".local" in ptx, "shared": ".shared" in ptx,
                     "atom_shared": "atom.shared.add.u64" in ptx,
                     "atom_global": "atom.global.add.u64" in ptx}
    print(json.dumps({"missing": sorted(set(bodies) - set(sigs)), "kernels": out}))
""")


def test_rank_kernels_compile_to_sm90_ptx():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["missing"] == []
    k = res["kernels"]
    assert not any(v["local"] for v in k.values()), k
    assert k["exact_dot_parts"]["shared"] and k["exact_dot_parts"]["atom_shared"], k
    assert k["exact_dot_parts"]["atom_global"], k
