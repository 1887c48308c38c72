"""solve6: Gaussian elimination with partial pivoting vs numpy.linalg.solve."""
import numpy as np
import pytest

from dycore.fem import solve6


def run(a, b):
    a_work = np.array(a, dtype=np.float64)
    b_work = np.array(b, dtype=np.float64)
    x = np.full(6, -7.0)
    status = solve6(a_work, b_work, x)
    return status, x


def random_orthogonal(rng):
    q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    return q


def test_well_conditioned_random():
    rng = np.random.default_rng(0)
    for _ in range(300):
        a = random_orthogonal(rng) @ np.diag(rng.uniform(0.5, 2.0, 6)) @ random_orthogonal(rng)
        b = rng.standard_normal(6)
        status, x = run(a, b)
        assert status == 0
        np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-13)


def test_badly_scaled_rows_and_columns():
    # A = Dr A0 Dc with A0 well conditioned, row and column scales spanning 1e-6 .. 1e6:
    # the solution x = Dc^-1 x0 must be accurate component by component
    rng = np.random.default_rng(1)
    for _ in range(300):
        a0 = random_orthogonal(rng) @ np.diag(rng.uniform(0.5, 2.0, 6)) @ random_orthogonal(rng)
        dr = 10.0 ** rng.uniform(-6, 6, 6)
        dc = 10.0 ** rng.uniform(-6, 6, 6)
        x0 = rng.standard_normal(6)
        a = dr[:, None] * a0 * dc[None, :]
        b = dr * (a0 @ x0)
        status, x = run(a, b)
        assert status == 0
        np.testing.assert_allclose(x * dc, x0, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-8)


def test_needs_pivoting():
    # zero leading entry (and zero diagonal everywhere): fails without row exchanges
    rng = np.random.default_rng(2)
    perm = np.roll(np.eye(6), 1, axis=0)
    for _ in range(50):
        a = perm @ (np.diag(rng.uniform(1, 2, 6)) + 0.1 * rng.standard_normal((6, 6)))
        a[np.arange(6), np.arange(6)] = 0.0
        assert a[0, 0] == 0.0
        b = rng.standard_normal(6)
        status, x = run(a, b)
        assert status == 0
        np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-13)


def test_small_pivot_is_not_taken():
    # a tiny a[0,0] would give a huge multiplier without partial pivoting
    a = np.eye(6)
    a[0, 0] = 1e-17
    a[0, 1] = 1.0
    a[1, 0] = 1.0
    b = np.arange(1.0, 7.0)
    status, x = run(a, b)
    assert status == 0
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-14)


def test_inputs_are_scratch_and_x_is_overwritten():
    rng = np.random.default_rng(3)
    a = np.eye(6) * 4.0 + rng.standard_normal((6, 6))
    b = rng.standard_normal(6)
    status, x = run(a, b)
    assert status == 0
    np.testing.assert_allclose(a @ x, b, rtol=0, atol=1e-13)


@pytest.mark.parametrize("kind", ["zero_row", "zero_column", "rank5", "duplicate_row",
                                  "scaled_rank5", "nan"])
def test_singular_returns_1(kind):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((6, 6))
    if kind == "zero_row":
        a[3] = 0.0
    elif kind == "zero_column":
        a[:, 2] = 0.0
    elif kind == "rank5":
        u, s, vt = np.linalg.svd(a)
        s[-1] = 0.0
        a = (u * s) @ vt
    elif kind == "duplicate_row":
        a[5] = a[1] * 3.0
    elif kind == "scaled_rank5":
        u, s, vt = np.linalg.svd(a)
        s[-1] = 0.0
        a = 10.0 ** rng.uniform(-8, 8, 6)[:, None] * ((u * s) @ vt)
    elif kind == "nan":
        a[2, 4] = np.nan
    status, x = run(a, np.ones(6))
    assert status == 1
    assert np.all(np.isnan(x))
