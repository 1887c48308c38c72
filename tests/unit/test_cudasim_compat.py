"""dycore.backend._cudasim_compat: the simulator's ``cuda.shared.array`` made thread-safe.

The race made deterministic: the simulator's per-launch allocation table is replaced by a dict
whose look-up sleeps (the interpreter switches threads there), so every thread of a block
looks up before any stores. The simulator's own allocation then gives threads private arrays
and a block sum loses their writes; ours gives every thread the one array."""
import time

import numpy as np
import pytest
from numba import config as numba_config
from numba import cuda, float64   # module globals: the simulator swaps them in a kernel

pytestmark = pytest.mark.skipif(not numba_config.ENABLE_CUDASIM,
                                reason="the simulator's shared arrays (a GPU has real ones)")


class SlowLookups(dict):
    """The allocation table with a thread switch between every look-up and its answer."""

    def get(self, key, default=None):
        value = super().get(key, default)
        time.sleep(0.05)
        return value


@pytest.fixture
def slow_table(monkeypatch):
    from numba.cuda.simulator import kernelapi
    init = kernelapi.FakeCUDAShared.__init__

    def slow_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._allocations = SlowLookups()
    monkeypatch.setattr(kernelapi.FakeCUDAShared, "__init__", slow_init)
    return kernelapi.FakeCUDAShared


def _block_sums(base, nblocks=3, nthreads=8):
    """Each block's sum of base + 1, ..., base + 8, one value from each thread (a new ``base``
    per launch: an array left over from an earlier launch cannot give the sum)."""

    @cuda.jit
    def block_sum(out, base):
        sh = cuda.shared.array(8, float64)
        t = cuda.threadIdx.x
        sh[t] = base + t + 1.0
        cuda.syncthreads()
        if t == 0:
            s = 0.0
            for j in range(8):
                s += sh[j]
            out[cuda.blockIdx.x] = s
    out = np.zeros(nblocks)
    block_sum[nblocks, nthreads](out, float(base))
    return out


def test_every_thread_of_a_block_writes_the_one_shared_array(slow_table, monkeypatch):
    import dycore.backend._cudasim_compat  # noqa: F401  (installed on import)
    assert slow_table.array.locked
    assert np.array_equal(_block_sums(0), np.full(3, 36.0))        # 1 + 2 + ... + 8
    # the same launch with the simulator's own allocation loses writes: the test sees the race
    monkeypatch.setattr(slow_table, "array", slow_table.array.original)
    assert not np.array_equal(_block_sums(100), np.full(3, 836.0))


def test_shared_arrays_of_different_lines_stay_apart():
    """The lock keeps the simulator's key (the calling file and line): two arrays of one
    kernel are two arrays, and a second launch starts from fresh ones."""
    import dycore.backend._cudasim_compat  # noqa: F401
    @cuda.jit
    def two(out):
        a = cuda.shared.array(4, float64)
        b = cuda.shared.array(4, float64)
        t = cuda.threadIdx.x
        a[t] = 1.0
        b[t] = 2.0
        cuda.syncthreads()
        out[t] = a[t] + 10.0 * b[(t + 1) % 4]
    out = np.zeros(4)
    two[1, 4](out)
    assert np.array_equal(out, np.full(4, 21.0))
