"""The snapshot gather to rank 0 (:class:`dycore.parallel.halo.RootGather`) in one process over
``MPI.COMM_SELF``: the owned ids are gathered and checked once, every later call scatters its
values into node order; a partition that misses or repeats a node, or values of another row
count, are refused with the node or the counts named. (Several ranks: tests/parallel/test_mpi.py,
whose driver gathers every solve's result through ``gather_to_root``.)"""
import numpy as np
import pytest

MPI = pytest.importorskip("mpi4py.MPI")

from dycore.parallel.halo import RootGather, gather_to_root  # noqa: E402


def test_one_gather_object_serves_every_snapshot_in_node_order():
    rng = np.random.default_rng(3)
    owned = rng.permutation(50)
    gather = RootGather(MPI.COMM_SELF, owned, 50)
    for values in (rng.standard_normal((50, 8)), rng.standard_normal(50),
                   rng.integers(0, 9, (50, 3, 3))):
        out = gather(values)
        assert out.shape == (50,) + values.shape[1:] and out.dtype == values.dtype
        assert np.array_equal(out[owned], values)
        assert np.array_equal(gather_to_root(MPI.COMM_SELF, owned, values, 50), out)


def test_a_partition_that_repeats_or_misses_a_node_is_refused():
    with pytest.raises(ValueError, match="node 4 owned by 2 ranks"):
        RootGather(MPI.COMM_SELF, np.array([0, 1, 2, 3, 4, 4]), 6)
    with pytest.raises(ValueError, match="node 5 owned by 0 ranks"):
        RootGather(MPI.COMM_SELF, np.arange(5), 6)
    with pytest.raises(ValueError, match="outside 0..5"):
        RootGather(MPI.COMM_SELF, np.arange(1, 7), 6)


def test_values_of_another_row_count_are_refused():
    gather = RootGather(MPI.COMM_SELF, np.arange(6), 6)
    with pytest.raises(ValueError, match="5 rows of values for 6 owned nodes on rank 0"):
        gather(np.zeros((5, 8)))
