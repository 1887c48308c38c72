"""The exact reduction: equal to math.fsum (correctly rounded) and independent of how the
vector is split into ranks; non-finite values propagate."""
import math

import numpy as np
import pytest

from dycore.parallel.reduce import Reducer, exact_parts, exact_sum, parts_to_float


def test_exact_sum_equals_fsum_over_wide_exponent_ranges():
    rng = np.random.default_rng(7)
    for k in range(60):
        n = int(rng.integers(1, 4000))
        scale = np.exp(rng.uniform(-250, 250, n)) if k % 2 else 1.0
        p = rng.standard_normal(n) * scale
        assert exact_sum(p) == math.fsum(p)
    sub = np.array([5e-324, 5e-324, 1e-320, -2e-323])          # subnormals
    assert exact_sum(sub) == math.fsum(sub)
    assert exact_sum(np.array([1e16, 1.0, -1e16])) == 1.0      # np.sum gives 0.0
    assert exact_sum(np.array([1e308, 1e308, -1e308])) == 1e308   # fsum overflows here


@pytest.mark.parametrize("k", (2, 3, 4, 7))
def test_parts_of_any_split_add_up_to_the_same_bits(k):
    rng = np.random.default_rng(k)
    p = rng.standard_normal(5000) * np.exp(rng.uniform(-30, 30, 5000))
    ref = math.fsum(p)
    cuts = np.sort(rng.integers(0, p.size, k - 1))
    parts = sum(exact_parts(c) for c in np.split(rng.permutation(p), cuts))
    assert parts_to_float(parts) == ref


def test_non_finite_values_propagate():
    assert exact_sum(np.array([1.0, np.inf])) == np.inf
    assert exact_sum(np.array([-np.inf, 2.0])) == -np.inf
    assert math.isnan(exact_sum(np.array([np.inf, -np.inf])))
    assert math.isnan(exact_sum(np.array([1.0, np.nan])))
    assert exact_sum(np.zeros(3)) == 0.0


def test_serial_reducer_modes_and_bad_mode():
    x = np.array([1e16, 1.0, -1e16])
    y = np.ones(3)
    assert Reducer(None, "exact").dot(x, y) == 1.0
    assert Reducer(None, "ordered").dot(x, y) == float(np.dot(x, y))
    assert Reducer(None).norm(np.array([3.0, 4.0])) == 5.0
    with pytest.raises(ValueError, match="reduction mode must be one of"):
        Reducer(None, "fast")


@pytest.mark.parametrize("mode", ("exact", "ordered", "allreduce"))
def test_fused_dots_equal_the_single_dots(mode):
    rng = np.random.default_rng(3)
    x, y, z = (rng.standard_normal(1000) * 1e3 for _ in range(3))
    red = Reducer(None, mode)
    assert red.dots((x, y), (y, z), (x, x)) == [red.dot(x, y), red.dot(y, z), red.dot(x, x)]
    assert red.calls == 4
