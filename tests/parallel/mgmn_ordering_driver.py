"""Run by ``mpiexec -n K python tests/parallel/mgmn_ordering_driver.py CACHE_DIR`` from
test_distributed_direct.py: the set-up cache of the MGMN orderings (``shared_mgmn_ordering``,
``keep_mgmn_ordering``) over K real MPI ranks with a stand-in factor whose ordering differs
per rank (as cuDSS's does). Prints one line per check on rank 0 and exits 1 on a failure."""
import sys
from types import SimpleNamespace

import numpy as np
from mpi4py import MPI

from dycore.io.setup_cache import SetupCache
from dycore.parallel.distributed_direct import (keep_mgmn_ordering, mgmn_entry,
                                                shared_mgmn_ordering)
from dycore.parallel.mpi import abort_on_error, world


def factor(rank: int, n: int):
    """A stand-in factorisation: rank r's ordering is 0..n−1 rotated by r + 1; rank 0 alone
    reports a partition tree (another rank's may be absent, as with older cuDSS)."""
    return SimpleNamespace(permutation=lambda: np.roll(np.arange(n, dtype=np.int32), rank + 1),
                           partition_tree=lambda: (np.arange(7, dtype=np.uint8)
                                                   if rank == 0 else None))


def main(folder):
    comm = world()
    with abort_on_error(comm):
        r, n = comm.rank, 12
        cache = SetupCache(folder, key_arrays=[np.arange(n)]) if r == 0 else None
        owned = np.arange(r, n, comm.size)
        checks = []
        given = shared_mgmn_ordering(comm, cache, True, owned)          # empty cache: a miss
        checks.append(("miss", given is None))
        keep_mgmn_ordering(comm, cache, factor(r, n), owned, given)
        got = shared_mgmn_ordering(comm, cache, True, owned)             # each rank its own
        want = factor(r, n)
        ok = (got is not None and got["perm"].dtype == np.int32
              and np.array_equal(got["perm"], want.permutation())
              and ((got["tree"] is None) == (want.partition_tree() is None))
              and (got["tree"] is None or np.array_equal(got["tree"], want.partition_tree())))
        checks.append(("hit, every rank its own ordering and tree", bool(comm.allreduce(
            int(ok), op=MPI.MIN))))
        other = owned if r != comm.size - 1 else owned[:-1]              # another partition
        checks.append(("another partition: none on any rank",
                       shared_mgmn_ordering(comm, cache, True, other) is None))
        checks.append(("not on GPUs: none", shared_mgmn_ordering(comm, cache, False, owned)
                       is None))
        # given orderings are not stored again; a rank without a cache stores nothing
        keep_mgmn_ordering(comm, cache, factor(r + 5, n), owned, got)
        again = shared_mgmn_ordering(comm, cache, True, owned)
        checks.append(("kept once", again is not None
                       and np.array_equal(again["perm"], want.permutation())))
        if r == 0:
            checks.append(("entry name", (cache.folder / f"{mgmn_entry(comm.size)}.npz")
                           .is_file()))
            checks.append(("hits and misses", cache.misses[:1] == [mgmn_entry(comm.size)]
                           and len(cache.hits) == 3))
        every = comm.allreduce(int(all(ok for _, ok in checks)), op=MPI.MIN)
        if r == 0:
            for name, ok in checks:
                print(f"{'ok' if ok else 'FAILED'}: {name}")
        sys.exit(0 if every else 1)


if __name__ == "__main__":
    main(sys.argv[1])
