"""Row-distributed matrices of their own ownership (the AMG levels) for K simulated ranks in
one process: the plans are symmetric, fill every ghost column, and the owned rows times the
local vector are the serial product's rows bit for bit; coarse owners follow P; the launcher
variables are read."""
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from dycore.parallel.amg import coarse_owners
from dycore.parallel.rowmatrix import distribute_rows
from dycore.parallel.run import launched_ranks


def _random_csr(m, n, density, seed):
    a = sp.random(m, n, density=density, random_state=seed, format="csr")
    a.data = np.random.default_rng(seed).standard_normal(a.nnz)
    return a


@pytest.mark.parametrize("k", (1, 2, 3, 4))
def test_plans_are_symmetric_and_local_rows_equal_serial_rows(k):
    rng = np.random.default_rng(k)
    a = _random_csr(60, 45, 0.15, k)                      # rectangular, like R or P
    row_owner, col_owner = rng.integers(0, k, 60), rng.integers(0, k, 45)
    x = rng.standard_normal(45)
    y = a @ x
    mats = [distribute_rows(SimpleNamespace(rank=r), a, row_owner, col_owner)
            for r in range(k)]
    # the receivers' ghost slots filled from the senders' owned values
    local = []
    for r, m in enumerate(mats):
        v = np.full(m.plan.n_local, np.nan)
        v[:m.n_cols] = x[col_owner == r]
        local.append(v)
    for r, m in enumerate(mats):
        for q, idx in m.plan.send.items():
            local[q][mats[q].plan.recv[r]] = local[r][idx]
    for r, m in enumerate(mats):
        ghosts = m.plan.ghosts
        assert np.array_equal(local[r][m.n_cols:], x[ghosts])     # every ghost, right value
        assert np.all(col_owner[ghosts] != r)
        key = np.lexsort((ghosts, col_owner[ghosts]))            # ordered by (owner, id)
        assert np.array_equal(key, np.arange(ghosts.size))
        got = np.concatenate([m._a_int @ local[r], m._a_bnd @ local[r]])
        rows = np.flatnonzero(row_owner == r)
        want = y[rows[np.concatenate([m.interior, m.boundary])]]
        assert np.array_equal(got, want)


def test_coarse_owner_is_the_owner_of_the_first_fine_row_of_the_column():
    p = sp.csr_matrix(np.array([[0.0, 1.0], [2.0, 0.0], [3.0, 4.0]]))
    assert coarse_owners(p, np.array([5, 6, 7])).tolist() == [6, 5]
    with pytest.raises(ValueError, match="empty column"):
        coarse_owners(sp.csr_matrix((3, 2)), np.zeros(3, int))


def test_launched_ranks_reads_the_launcher_variables(monkeypatch):
    from dycore.parallel.launch import LAUNCHER_VARIABLES
    for var, _, _ in LAUNCHER_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    assert launched_ranks() == 0
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "3")
    assert launched_ranks() == 3
    monkeypatch.setenv("PMI_SIZE", "1")
    assert launched_ranks() == 1
