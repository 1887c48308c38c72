"""The step's vector operations: GPU kernels (simulator) bitwise equal to the NumPy reference.

:class:`dycore.backend.gpu_ops.GPUVectorOps` must reproduce :class:`dycore.backend.cpu.
CPUVectorOps` operation by operation (the simulator has no FMA, like a strict build), on inputs
spanning several thread blocks.
"""
from types import SimpleNamespace

import numpy as np
import pytest

from dycore.backend.cpu import CPUVectorOps
from dycore.backend.gpu import gpu_backend

N = 83


@pytest.fixture(scope="module")
def gpu():
    return gpu_backend().ops


def _rng(seed):
    return np.random.default_rng(seed)


def _both(fn_name, gpu, *args, out_shape):
    outs = []
    for ops in (CPUVectorOps(), gpu):
        out = np.full(out_shape, np.nan)
        getattr(ops, fn_name)(out, *[a.copy() if isinstance(a, np.ndarray) else a
                                     for a in args])
        outs.append(out)
    return outs


@pytest.mark.parametrize("b, div", [(0.37, False), (0.0, False), (7.5, True)])
def test_axpby_is_bitwise_numpy(gpu, b, div):
    x, y = _rng(1).standard_normal((2, N, 3)) * 1e3
    cpu, dev = _both("axpby", gpu, 0.61, x, b, y, div, out_shape=(N, 3))
    assert np.array_equal(cpu, dev)
    expect = 0.61 * x + y / b if div else (0.61 * x if b == 0.0 else 0.61 * x + b * y)
    assert np.array_equal(cpu, expect)


def test_x_plus_yz_and_advection_source_are_bitwise_numpy(gpu):
    x, y, z = _rng(2).standard_normal((3, N, 3))
    cpu, dev = _both("x_plus_yz", gpu, x, y, z, out_shape=(N, 3))
    assert np.array_equal(cpu, dev) and np.array_equal(cpu, x + y * z)
    cpu, dev = _both("multiply", gpu, x, y, out_shape=(N, 3))
    assert np.array_equal(cpu, dev) and np.array_equal(cpu, x * y)
    dtb = _rng(3).uniform(1e-4, 1e-2, N)
    cpu, dev = _both("advection_source", gpu, x, y, 0.5, dtb, out_shape=N)
    assert np.array_equal(cpu, dev)
    assert np.array_equal(cpu, -(0.5 * x[:, 2] + 0.5 * y[:, 2]) * dtb)


@pytest.mark.parametrize("bs", [1, 3])
def test_dirichlet_rows_match_numpy(gpu, bs):
    """Identity rows and zero rhs at Dirichlet nodes, on a real CSR pattern."""
    from dycore.assembly.sparsity import build_sparsity
    from dycore.mesh import GridSpec, generate_terrain_following
    mesh = generate_terrain_following(GridSpec(nx=2, ny=2, nz=1, lx=2e3, ly=2e3, lz=1e3,
                                               dx_min=900.0, dz_min=900.0),
                                      lambda x, y: 0.0 * x)
    s = build_sparsity(mesh.tets, mesh.nnodes)
    nodes = np.array([0, 3, 7, 11])
    in_dir = np.zeros(s.n, bool)
    in_dir[nodes] = True
    diag = s.diagonal_positions()[nodes]
    ops = SimpleNamespace(dir_nodes=nodes, dir_diag_pos=diag,
                          dir_row_pos=np.flatnonzero(in_dir[s.row_of]),
                          dir_row_start=s.indptr[nodes].astype(np.int32),
                          dir_row_end=s.indptr[nodes + 1].astype(np.int32))
    shape = (s.nnz,) if bs == 1 else (s.nnz, 3, 3)
    v0 = _rng(4).standard_normal(shape)
    r0 = _rng(5).standard_normal(s.n * bs).reshape((s.n,) if bs == 1 else (s.n, 3))
    out = []
    for vops in (CPUVectorOps(), gpu):
        v, r = v0.copy(), r0.copy()
        vops.dirichlet(v, r, bs, ops)
        out.append((v, r))
    assert np.array_equal(out[0][0], out[1][0]) and np.array_equal(out[0][1], out[1][1])
    assert not out[0][1][nodes].any() and np.array_equal(np.delete(out[0][1], nodes, 0),
                                                         np.delete(r0, nodes, 0))


def test_max_abs_diff_and_step_scalars(gpu):
    rng = _rng(6)
    u, u2 = rng.standard_normal((2, N, 3))
    th, ml, div = rng.standard_normal(N), rng.uniform(1.0, 2.0, N), rng.standard_normal(N)
    res = []
    for vops in (CPUVectorOps(), gpu):
        out = np.full(8, np.nan)
        vops.max_abs_diff(u, u2, out, 4)
        vops.step_scalars(u, th, ml, div, out, 0)
        res.append(out)
    cpu, dev = res
    assert cpu[4] == dev[4] == np.abs(u - u2).max()
    assert cpu[0] == dev[0] and cpu[2] == dev[2] and cpu[3] == dev[3] == 0.0
    assert dev[1] == pytest.approx(cpu[1], rel=1e-13)          # a sum: another order
    u[5, 1], th[70] = np.nan, np.inf
    out = np.zeros(8)
    gpu.step_scalars(u, th, ml, div, out, 0)
    gpu.max_abs_diff(u, u2, out, 4)
    assert out[3] == 2.0 and np.isnan(out[4])


@pytest.mark.parametrize("walls", [False, True], ids=["ground-lid", "channel-walls"])
def test_no_normal_flow_rotation_is_bitwise_cpu(gpu, walls):
    """Rotation of the momentum system, back-rotation and normal removal: the GPU kernels call
    the same arithmetic as the CPU drivers, so the bits agree (several thread blocks). With the
    side walls free slip too (the schar channel), the wall-ground and wall-lid edge nodes carry
    two constraints."""
    import dycore.cases.mountainwave3d as case
    from dycore.assembly.no_normal_flow import build_no_normal_flow
    from dycore.assembly.operators import _on_backend
    from dycore.assembly.sparsity import build_sparsity
    from dycore.mesh import FaceTag, GridSpec, generate_terrain_following
    params = case.Parameters(lx=4000.0, ly=4000.0, lz=2000.0, sponge_top_base=1500.0,
                             sponge_lateral_width=500.0)
    mesh = generate_terrain_following(GridSpec(nx=4, ny=4, nz=2, lx=4e3, ly=4e3, lz=2e3,
                                               dx_min=900.0, dz_min=900.0),
                                      lambda x, y: case.terrain(params, x, y))
    s = build_sparsity(mesh.tets, mesh.nnodes)
    lateral = [FaceTag.WEST, FaceTag.EAST] + ([] if walls else [FaceTag.SOUTH, FaceTag.NORTH])
    slip = (FaceTag.GROUND, FaceTag.TOP) + ((FaceTag.SOUTH, FaceTag.NORTH) if walls else ())
    dirichlet = mesh.tagged_nodes(lateral)
    host = build_no_normal_flow(mesh, s, slip, dirichlet,
                                {FaceTag.GROUND: lambda c: case.ground_normals(params, c)})
    assert host.blk_pos.size > 32                                # more than one thread block
    assert host.fixed.max() == (2 if walls else 1)
    dev = _on_backend(host, gpu.b)
    rng = _rng(7)
    v0, r0, u0 = (rng.standard_normal((s.nnz, 3, 3)), rng.standard_normal((s.n, 3)),
                  rng.standard_normal((s.n, 3)))
    v0[s.diagonal_positions()] += 10.0 * np.eye(3)
    out = []
    for vops, nnf in ((CPUVectorOps(), _on_backend(host, _HostBackend)), (gpu, dev)):
        v, r, x, y = v0.copy(), r0.copy(), r0.copy(), u0.copy()
        vops.rotate_system(v, r, u0, 10.0, nnf)
        vops.unrotate(x, nnf)
        vops.remove_normal(y, nnf)
        out.append((v, r, x, y))
    for a, b in zip(*out):
        assert np.array_equal(a, b)
    assert not np.array_equal(out[0][0], v0) and not np.array_equal(out[0][3], u0)
    y = out[0][3]                                 # every imposed normal component removed
    frames = host.frames.reshape(-1, 3, 3)
    for k in (1, 2):
        pick = host.fixed >= k
        comp = np.sum(frames[pick, k - 1] * y[host.nodes[pick]], axis=1)
        assert np.abs(comp).max(initial=0.0) < 1e-14 and (k == 2 or pick.all())


class _HostBackend:
    """The CPU backend's to_device (identity), for :func:`_on_backend`."""

    @staticmethod
    def to_device(a):
        return np.ascontiguousarray(a)
