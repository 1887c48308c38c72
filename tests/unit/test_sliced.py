"""Sliced ELL (``dycore.solvers.sliced``): every thread's entries, in CSR order, in its own
column of a 32-thread slice; products summed as the row kernels sum them give CSR's bits."""
import numpy as np
import pytest
import scipy.sparse as sp

from dycore.solvers.amg import grouped_matvec
from dycore.solvers.sliced import SLICE, sliced_ell


def _uneven(nrow=75, ncol=60, seed=3):
    """Rows of 0 to 20 entries (a few empty), sorted columns."""
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for i in range(nrow):
        c = rng.choice(ncol, size=0 if i % 17 == 5 else int(rng.integers(1, 21)), replace=False)
        rows += [i] * c.size
        cols += sorted(c)
    a = sp.csr_matrix((rng.standard_normal(len(rows)), (rows, cols)), shape=(nrow, ncol))
    a.sort_indices()
    return a


@pytest.mark.parametrize("g", [1, 2, 4, 8, 32])
def test_each_thread_reads_its_csr_entries_in_order_then_zeros(g):
    a = _uneven()
    ptr, cols, vals = sliced_ell(a.indptr, a.indices, a.data, g)
    nslice = -(-a.shape[0] * g // SLICE)
    assert ptr.dtype == np.int32 and cols.dtype == np.int32 and vals.dtype == a.data.dtype
    assert ptr.size == nslice + 1 and ptr[0] == 0 and np.all(np.diff(ptr) % SLICE == 0)
    for v in range(nslice * SLICE):
        s, t = divmod(v, SLICE)
        got = [(cols[k], vals[k]) for k in range(ptr[s] + t, ptr[s + 1], SLICE)]
        i, lane = divmod(v, g)
        want = ([(a.indices[k], a.data[k]) for k in range(a.indptr[i] + lane,
                                                         a.indptr[i + 1], g)]
                if i < a.shape[0] else [])
        assert got[:len(want)] == want
        pad = got[len(want):]
        assert all(x == 0.0 for _, x in pad)
        first = a.indices[a.indptr[i]] if i < a.shape[0] and a.indptr[i + 1] > a.indptr[i] \
            else 0
        assert all(c == first for c, _ in pad)         # padding at the row's first column
    # the longest thread of a slice sets its width: nothing wider than needed
    lengths = np.diff(a.indptr)
    assert ptr[-1] <= nslice * SLICE * -(-lengths.max() // g)


@pytest.mark.parametrize("g", [1, 2, 4, 8])
def test_slice_sums_in_the_row_kernels_order_are_csr_bits(g):
    """Each thread's sum over its slice column, then the lanes' tree: grouped_matvec's bits."""
    a = _uneven(seed=5)
    x = np.random.default_rng(6).standard_normal(a.shape[1])
    ptr, cols, vals = sliced_ell(a.indptr, a.indices, a.data, g)
    nthread = (ptr.size - 1) * SLICE
    lanes = np.zeros(nthread)
    for v in range(nthread):
        s, t = divmod(v, SLICE)
        acc = 0.0
        for k in range(ptr[s] + t, ptr[s + 1], SLICE):
            acc += vals[k] * x[cols[k]]
        lanes[v] = acc
    lanes = lanes[:a.shape[0] * g].reshape(a.shape[0], g)
    off = g // 2
    while off > 0:
        lanes[:, :off] += lanes[:, off:2 * off]
        off //= 2
    assert np.array_equal(lanes[:, 0], grouped_matvec(a, x, g))


def test_float32_values_and_bad_groups():
    a = _uneven()
    _, _, vals = sliced_ell(a.indptr, a.indices, a.data.astype(np.float32), 4)
    assert vals.dtype == np.float32
    for g in (0, 3, 64):
        with pytest.raises(ValueError, match=f"g {g}"):
            sliced_ell(a.indptr, a.indices, a.data, g)
    ptr, cols, vals = sliced_ell(np.zeros(1, np.int32), np.zeros(0, np.int32), np.zeros(0), 2)
    assert ptr.tolist() == [0] and cols.size == 0 and vals.size == 0
