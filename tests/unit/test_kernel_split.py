"""``scripts/device/kernel_split.py``: a CUPTI kernel recording cut into pieces at idle gaps
and split into NCCL and our kernels, on a timeline written by hand (times in ns)."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "device" / "kernel_split.py"


@pytest.fixture(scope="module")
def ks():
    spec = importlib.util.spec_from_file_location("kernel_split", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SMOOTH = "_ZN6cudapy6dycore7backend14solver_kernels20build_solver_kernels12_3clocals_3e6smoothB3v1"
NCCL = "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE"


def test_pieces_busy_times_and_names(ks, tmp_path):
    # piece 1: smooth 0-10 µs; piece 2 (after 5 ms idle): smooth 0-10, NCCL 5-12 (overlaps it),
    # smooth 20-30: span 30 µs, busy 22 µs, NCCL 7 µs, ours 20 µs
    t0 = 5_010_000
    start = [0, t0, t0 + 5_000, t0 + 20_000]
    end = [10_000, t0 + 10_000, t0 + 12_000, t0 + 30_000]
    f = tmp_path / "rec-0.npz"
    np.savez(f, start=np.array(start), end=np.array(end),
             kernel=np.array([0, 0, 1, 0], np.int32), names=np.array([SMOOTH, NCCL], dtype=object))
    n, pieces = ks.split(str(f), gap_ms=2.0, segments=2)
    assert n == 2 and len(pieces) == 2
    last = pieces[-1]
    assert last["span_ms"] == pytest.approx(0.030)
    assert last["busy_ms"] == pytest.approx(0.022)
    assert last["nccl_ms"] == pytest.approx(0.007)
    assert last["ours_ms"] == pytest.approx(0.020)
    assert (last["nccl_kernels"], last["our_kernels"]) == (1, 2)
    assert set(last["by_kernel"]) == {"smooth", NCCL[:70]}
    assert last["by_kernel"]["smooth"] == (2, pytest.approx(0.020))
    assert pieces[0]["busy_ms"] == pytest.approx(0.010)
    # one piece when the idle gap is below the threshold
    assert ks.split(str(f), gap_ms=10.0, segments=5)[0] == 1


def test_short_names(ks):
    assert ks.short_name(SMOOTH) == "smooth"
    assert ks.short_name("_ZN6cudapy6dycore7backend13gpu_loops_gen15momentum_kernelB3v4") \
        == "momentum_kernel"
    assert ks.short_name("cupy_take") == "cupy_take"


def test_by_launch_tells_levels_apart(ks, tmp_path):
    # two smooth launches of 4,096 threads (10 and 12 µs) and one of 128 (3 µs) in one piece
    f = tmp_path / "rec-0.npz"
    np.savez(f, start=np.array([0, 20_000, 40_000]), end=np.array([10_000, 32_000, 43_000]),
             kernel=np.array([0, 0, 0], np.int32), threads=np.array([4096, 4096, 128]),
             names=np.array([SMOOTH], dtype=object))
    _, (piece,) = ks.split(str(f), segments=1, by_launch=True)
    assert piece["by_kernel"] == {"smooth[4096]": (2, pytest.approx(0.022)),
                                  "smooth[128]": (1, pytest.approx(0.003))}
    _, (piece,) = ks.split(str(f), segments=1)
    assert piece["by_kernel"] == {"smooth": (3, pytest.approx(0.025))}
