"""Interior rows first (dycore.parallel.overlap): the renumbering keeps every row's sum, the halo
plan sends the same values, and the two row ranges cover the rows once."""
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sps

from dycore.parallel.overlap import (interior_first, leading_interior, local_relabel,
                                     permute_rows, reads_ghost, relabel_plan, renumber,
                                     send_last, split_rows)
from dycore.parallel.partition import HaloPlan


def _rank_rows(seed=3, n_owned=40, n_ghost=9, per_row=6):
    """Random owned rows in local columns: every third row also reads a ghost column."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_owned):
        cols = rng.choice(n_owned, per_row, replace=False)
        if i % 3 == 1:
            cols[-1] = n_owned + rng.integers(n_ghost)
        rows.append(rng.permutation(cols))           # entry order not sorted on purpose
    ptr = np.concatenate([[0], np.cumsum([len(c) for c in rows])])
    idx = np.concatenate(rows)
    return ptr, idx, rng.standard_normal(idx.size), n_owned, n_owned + n_ghost


def test_interior_rows_come_first_in_ascending_order():
    ptr, idx, _, n, _ = _rank_rows()
    order, m = interior_first(ptr, idx, n)
    ghost = reads_ghost(ptr, idx, n)
    assert m == n - int(np.count_nonzero(ghost)) and 0 < m < n
    assert np.array_equal(np.sort(order), np.arange(n))
    assert not ghost[order[:m]].any() and ghost[order[m:]].all()
    assert np.all(np.diff(order[:m]) > 0) and np.all(np.diff(order[m:]) > 0)
    assert leading_interior(ptr, idx, n) == 1                 # row 1 reads a ghost
    p2, i2, _ = permute_rows(ptr, idx, np.zeros(idx.size), order, local_relabel(order, n + 9))
    assert leading_interior(p2, i2, n) == m


def test_no_ghost_gives_the_identity():
    ptr = np.array([0, 2, 3, 5])
    idx = np.array([0, 1, 1, 2, 0])
    order, m = interior_first(ptr, idx, 3)
    assert np.array_equal(order, [0, 1, 2]) and m == 3
    with pytest.raises(ValueError, match="indptr has 3 entries for 3 owned rows"):
        interior_first(ptr[:3], idx, 3)


def test_renumbered_rows_keep_every_rows_bits_and_the_halo_sends_the_same_values():
    ptr, idx, val, n, nl = _rank_rows()
    order, _ = interior_first(ptr, idx, n)
    new = local_relabel(order, nl)
    assert np.array_equal(new[n:], np.arange(n, nl))          # ghosts keep their slots
    assert np.array_equal(new[order], np.arange(n))
    p2, i2, v2 = permute_rows(ptr, idx, val, order, new)
    x = np.random.default_rng(5).standard_normal(nl)
    x2 = np.empty(nl)
    x2[new] = x
    # SciPy sums each row in entry order; the permuted rows keep it, so the bits agree
    y = sps.csr_matrix((val, idx, ptr), shape=(n, nl)) @ x
    y2 = sps.csr_matrix((v2, i2, p2), shape=(n, nl)) @ x2
    assert np.array_equal(y2, y[order])
    plan = HaloPlan(1, nl, (1,), {1: np.array([5, 0, 17, 39])}, {1: np.arange(n, nl)})
    moved = relabel_plan(plan, new)
    assert np.array_equal(x2[moved.send[1]], x[plan.send[1]])
    assert np.array_equal(moved.recv[1], plan.recv[1]) and moved.n_local == nl
    # renumber: the three in one call; nothing to renumber returns the arrays themselves
    p3, *arrays = renumber(plan, ptr, idx, val, order, order)
    assert all(np.array_equal(u, v) for u, v in zip(arrays, (p2, i2, v2)))
    assert np.array_equal(p3.send[1], moved.send[1])
    same = renumber(plan, ptr, idx, val)
    assert same[0] is plan and all(u is v for u, v in zip(same[1:], (ptr, idx, val)))


def test_send_last_makes_the_one_message_a_run_of_the_same_values():
    """The rows one neighbour receives numbered last in the message's order: the renumbered
    plan sends ids n − m … n − 1 (one run: no pack kernel) and the same values; with two
    neighbours, a row sent twice or nothing sent there is no such numbering (None)."""
    ptr, idx, val, n, nl = _rank_rows()
    sent = np.array([17, 3, 39, 0, 22])                       # the receiver's order
    plan = HaloPlan(1, nl, (1,), {1: sent}, {1: np.arange(n, nl)})
    order = send_last(plan, n)
    assert np.array_equal(np.sort(order), np.arange(n))
    assert np.array_equal(order[-sent.size:], sent)
    assert np.all(np.diff(order[:-sent.size]) > 0)            # the others ascending
    moved, p2, i2, v2 = renumber(plan, ptr, idx, val, order, order)
    assert np.array_equal(moved.send[1], np.arange(n - sent.size, n))
    x = np.random.default_rng(7).standard_normal(nl)
    x2 = np.empty(nl)
    x2[local_relabel(order, nl)] = x
    assert np.array_equal(x2[moved.send[1]], x[sent])
    y = sps.csr_matrix((val, idx, ptr), shape=(n, nl)) @ x
    assert np.array_equal(sps.csr_matrix((v2, i2, p2), shape=(n, nl)) @ x2, y[order])
    two = HaloPlan(1, nl, (1, 2), {1: sent, 2: np.array([4])}, {1: np.arange(n, nl - 1),
                                                                   2: np.array([nl - 1])})
    twice = HaloPlan(1, nl, (1,), {1: np.array([3, 3])}, {1: np.arange(n, n + 2)})
    none = HaloPlan(1, nl, (), {}, {})
    assert send_last(two, n) is None and send_last(twice, n) is None
    assert send_last(none, n) is None


def test_split_rows_cover_every_row_once():
    ptr = np.arange(0, 21, 4)                                 # 5 rows of 4 entries
    m = SimpleNamespace(indptr=ptr, indices=np.arange(20), data=np.ones(20), nrow=5, bs=1, n=5)
    inner, outer = split_rows(m, 2)
    assert (inner.nrow, outer.nrow, inner.n, outer.n) == (2, 3, 2, 3)
    assert np.array_equal(inner.indptr, [0, 4, 8]) and np.array_equal(outer.indptr, ptr[2:])
    assert inner.indices is m.indices and outer.data is m.data and m.nrow == 5
