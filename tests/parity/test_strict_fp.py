"""Strict floating-point mode (dycore.backend.strict_fp) under the CUDA simulator.

The simulator has no FMA, so strict kernels must equal the CPU bitwise; the NVVM option rewrite
and the kernel renaming are checked directly (they only act on a real GPU).
"""
import numpy as np
import pytest
from tiny_mesh import tiny_mesh

from dycore.assembly.sparsity import build_sparsity
from dycore.backend import strict_fp
from dycore.backend.cpu import CPUBackend
from dycore.backend.timers import StageTimers


def test_strict_backend_bitwise_element_matrices():
    from dycore.backend.gpu import gpu_backend
    from dycore.backend.gpu_kernels import get_kernels

    mesh = tiny_mesh(4, 2, 2, 300.0)
    s = build_sparsity(mesh.tets, mesh.nnodes)
    gb = gpu_backend(assembly="deterministic", strict=True, block=32)
    assert gb.kernels is get_kernels(True) and gb.kernels is not get_kernels(False)
    assert gb.kernels.strict and "strict FP" in gb.describe()
    cpu = CPUBackend().assembler(mesh, s, StageTimers())
    gpu = gb.assembler(mesh, s, StageTimers())
    rng = np.random.default_rng(3)
    n = mesh.nnodes
    u, uo = rng.standard_normal((n, 3)), rng.standard_normal((n, 3))
    c, sig = rng.standard_normal(n), rng.uniform(0, 0.01, n)
    args = ("t", u, c, c[::-1].copy(), sig, c * 0.5, (5.0, 5.0, 1.0), 5.0)
    v0, r0 = (a.copy() for a in cpu.tracer(*args))
    v1, r1 = gpu.tracer(*args)
    assert np.array_equal(cpu.element_array("tracer", "mat"),
                          gpu.element_array("tracer", "mat"))
    assert np.array_equal(v0, v1) and np.array_equal(r0, r1)
    margs = (u, uo, c, c * 2.0, sig, (10.0, 0.0, 0.0), (5.0, 5.0, 1.0), 1e-4, 5.0)
    m0, q0 = (a.copy() for a in cpu.momentum(*margs))
    m1, q1 = gpu.momentum(*margs)
    assert np.array_equal(cpu.element_array("momentum", "mat"),
                          gpu.element_array("momentum", "mat"))
    assert np.array_equal(m0, m1) and np.array_equal(q0, q1)
    assert np.array_equal(cpu.divergence()[0], gpu.divergence()[0])
    assert np.array_equal(cpu.stabilisation()[0], gpu.stabilisation()[0])
    assert np.array_equal(cpu.lumped_mass(), gpu.lumped_mass())


def test_nvvm_options_rewritten_only_for_marked_units():
    opts = {"opt": 3, "fastmath": False, "arch": "compute_90"}
    plain = "define void @_ZN6dycore7backend11gpu_kernels7_tracerE() {}"
    assert strict_fp.strict_nvvm_options([plain], opts) is opts
    marked = f"define void @_ZN6dycore7backend11gpu_kernels22{strict_fp.MARK}__tracerE() {{}}"
    out = strict_fp.strict_nvvm_options([plain, marked], opts)
    assert out["fma"] is False and "fastmath" not in out and out["opt"] == 3
    assert "fma" not in opts                          # the caller's dict is not modified
    assert strict_fp.strict_nvvm_options(marked, opts)["fma"] is False


def test_guard_wraps_compile_ir(monkeypatch):
    from numba.cuda.cudadrv import nvvm

    seen = []
    monkeypatch.setattr(nvvm, "compile_ir", lambda ir, **o: seen.append(o) or b"ptx")
    monkeypatch.setattr(strict_fp, "_installed", False)
    assert strict_fp.install_nvvm_fma_guard() is True
    assert strict_fp.install_nvvm_fma_guard() is False        # idempotent
    nvvm.compile_ir(["plain"], opt=3)
    nvvm.compile_ir([f"x {strict_fp.MARK}_k"], opt=3, fastmath=True)
    assert seen == [{"opt": 3}, {"opt": 3, "fma": False}]


def test_renamed_copy_is_a_distinct_function():
    from dycore.backend.gpu_kernels import _fill

    r = strict_fp._renamed(_fill)
    assert r is not _fill and r.__code__ is _fill.__code__
    assert r.__qualname__.startswith(strict_fp.MARK) and r.__qualname__.isidentifier()


def test_strict_csr_matvec_is_bitwise_scipy():
    """The GPU backend's sparse products (C u, KMK p, Cᵀ δp) use our SpMV in SciPy's row order:
    in strict mode bitwise equal to SciPy on the CPU (cuSPARSE sums in another order, with
    FMA); ``matvec`` writes into a given array."""
    import scipy.sparse as sp

    from dycore.backend.gpu import gpu_backend
    from dycore.backend.gpu_ops import DeviceCSR

    rng = np.random.default_rng(3)
    a = sp.random(300, 900, density=0.03, random_state=4, format="csr")
    a.data = rng.standard_normal(a.nnz) * 10.0 ** rng.integers(-8, 8, a.nnz)
    a.sort_indices()
    x = rng.standard_normal(900)
    b = gpu_backend(strict=True)
    m = b.csr(a.data, a.indices.astype(np.int32), a.indptr.astype(np.int32), a.shape)
    assert isinstance(m, DeviceCSR)
    got = b.to_host(m @ b.to_device(x))
    assert np.array_equal(got, a @ x)
    out = b.to_device(np.full(300, np.nan))
    m.matvec(b.to_device(x), out)
    assert np.array_equal(b.to_host(out), a @ x)
    assert np.array_equal(b.to_host(m.diagonal()), a.diagonal())
    with pytest.raises(ValueError, match="DeviceCSR"):
        m @ b.to_device(np.zeros(10))
