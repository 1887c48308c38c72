"""The V-cycle of ONE hierarchy of the whole pressure matrix on GPU ranks, distributed by rows.

The CPU ranks' :class:`~dycore.parallel.amg.DistributedVCycle` on the device: rank 0 builds the
PyAMG hierarchy of the global matrix and cuts it into every rank's rows
(:func:`~dycore.parallel.amg.rank_pieces`); each rank keeps, per level, its rows of A, R and P
(local column ids: owned columns, then the ghost columns its rows read, in the global CSR's
entry order) with one :class:`~dycore.parallel.device_halo.DeviceHaloExchange` per matrix for
those ghosts, its entries of D⁻¹, and its rows of the coarsest pseudo-inverse. The coarsest
right-hand side (a few hundred values) is all-gathered.

Every row is summed by one thread in the global CSR's entry order, and smoothing is the
serial polynomial entry by entry, so z = V(r) is the bits of
:func:`dycore.solvers.amg.vcycle_reference` (``max_group=1``) on any number of ranks — and
CG with it takes the serial V-cycle's iterations, where the rank-local hierarchies
(``local_amg``, block-Jacobi over the ranks) take ever more as ranks are added (193 against 21
on four parts of the paper mesh's matrix; docs/performance.md).

Messages: per level, one exchange of x before each smoothing step but the first, one of x
before the residual, one of the residual before R, one of the coarse correction before P;
one all-gather at the coarsest level. Each is a post and a yield (K loopback ranks run in lock
step), so :meth:`DeviceGlobalVCycle.issue` is a generator, like the solvers that call it.
"""
from __future__ import annotations

import numpy as np

from dycore.parallel.device_halo import DeviceHaloExchange
from dycore.parallel.device_kernels import get_rank_kernels

__all__ = ["DeviceGlobalVCycle"]


class DeviceGlobalVCycle:
    """z ≈ A⁻¹ r on this rank's owned rows, as one V-cycle of the global hierarchy.

    Parameters
    ----------
    la : DeviceLinalg (:mod:`dycore.solvers.krylov`) of the calling solver
    transport : the ranks' transport (:mod:`dycore.parallel.nccl`): halo messages, all-gather
    piece : this rank's dict of :func:`~dycore.parallel.amg.rank_pieces` (``levels``,
        ``coarse_rows``, ``coarse_inv``, ``coarse_owner``, ``n_coarse``, ``sizes``)

    Attributes
    ----------
    n_owned : int — owned fine rows; sizes : list of int — global unknowns per level
    """

    def __init__(self, la, transport, piece: dict):
        from dycore.solvers.krylov import DeviceMatrix
        self.la, self.t, b = la, transport, la.b
        self.sizes = list(piece["sizes"])
        self.pack = get_rank_kernels(getattr(b, "strict", False))["pack_rows"]

        def matrix(block):
            plan, ptr, idx, val, _ = block       # entry order kept: the serial row sums
            m = DeviceMatrix(la, np.asarray(ptr, np.int32), np.asarray(idx, np.int32),
                             np.asarray(val, np.float64), 1, 1)
            return m, DeviceHaloExchange(b, transport, plan, 1), int(plan.n_local)

        z = b.zeros
        self.levels = []
        for ba, br, bp, dinv, coef in piece["levels"]:
            (A, ha, na), (R, hr, nr), (P, hp, np_) = matrix(ba), matrix(br), matrix(bp)
            n = A.nrow
            self.levels.append(dict(
                A=A, R=R, P=P, ha=ha, hr=hr, hp=hp, n=n, nc=R.nrow, coef=list(coef),
                dinv=b.to_device(np.asarray(dinv, np.float64)), d=z(n), b=z(n),
                xs=[z(na), z(na)], r=z(nr), pc=z(np_)))
        self.n_owned = self.levels[0]["n"] if self.levels else int(len(piece["coarse_rows"]))
        # the coarsest level: every rank's owned values all-gathered (m per rank, padded),
        # put in global order (one gather kernel), then this rank's rows of A_c⁺
        owner = np.asarray(piece["coarse_owner"], np.int64)
        ranks = transport.size
        owned = [np.flatnonzero(owner == q) for q in range(ranks)]
        m = max(1, max(o.size for o in owned))
        pos = np.empty(owner.size, np.int64)
        for q, o in enumerate(owned):
            pos[o] = q * m + np.arange(o.size)
        inv = piece["coarse_inv"].tocsr()
        inv.sort_indices()
        self.coarse = DeviceMatrix(la, inv.indptr.astype(np.int32), inv.indices.astype(np.int32),
                                   inv.data.astype(np.float64), 1, 1)
        self.nc_owned = int(owned[transport.rank].size)
        # (the last restriction writes this rank's coarsest right-hand side straight into the
        # all-gather's send buffer)
        self.send, self.recv = z(m), z(m * ranks)
        self.pos, self.full = b.to_device(pos), z(owner.size)
        self.coarse_x = z(self.nc_owned)

    # -- pieces ------------------------------------------------------------------------------
    def _copy(self, src, dst, n: int) -> None:
        """dst[:n] = src[:n] (the solver kernels' copy: captured like every other launch)."""
        la = self.la
        la.launch(la.k.copy, n, la.b.nb(src), la.b.nb(dst[:n]))

    def _exchange(self, halo, x):
        halo.begin(x)
        yield
        halo.end(x)

    def _smooth(self, lev, b, x, ctl):
        """The level's polynomial smoothing from x (None: from 0) into its x buffers; returns
        the buffer holding the result (owned entries; ghosts stale)."""
        la, nb = self.la, self.la.b.nb
        a = lev["A"]
        for c1, c2 in lev["coef"]:
            dst = lev["xs"][0] if x is None or x is lev["xs"][1] else lev["xs"][1]
            if x is not None:
                yield from self._exchange(lev["ha"], x)
            la.launch(la.k.smooth, lev["n"], a.indptr, a.indices, a.data, 1,
                      nb(dst if x is None else x), nb(b), nb(lev["dinv"]), nb(lev["d"]),
                      nb(dst), c1, c2, 1 if x is None else 0, 0, la.no_partial, -1, 0, ctl,
                      la.ticket)
            x = dst
        return x

    def _coarsest(self, b, ctl):
        la, bk = self.la, self.la.b
        if b is not self.send:                   # (no level above: b is the fine residual)
            self._copy(b, self.send, self.nc_owned)
        self.t.allgather(self.send, self.recv)
        yield
        la.launch(self.pack, self.full.shape[0], bk.nb(self.recv), bk.nb(self.pos), 1,
                  bk.nb(self.full))          # the gathered blocks in global order
        la.spmv(self.coarse, bk.nb(self.full), bk.nb(self.coarse_x), ctl=ctl)
        return self.coarse_x

    def _cycle(self, level: int, b, ctl):
        if level == len(self.levels):
            return (yield from self._coarsest(b, ctl))
        la, nb, lev = self.la, self.la.b.nb, self.levels[level]
        x = yield from self._smooth(lev, b, None, ctl)
        yield from self._exchange(lev["ha"], x)
        la.spmv(lev["A"], nb(x), nb(lev["r"]), mode=1, b=nb(b), ctl=ctl)     # r = b − A x
        yield from self._exchange(lev["hr"], lev["r"])
        bc = self.levels[level + 1]["b"] if level + 1 < len(self.levels) else self.send
        la.spmv(lev["R"], nb(lev["r"]), nb(bc), ctl=ctl)
        xc = yield from self._cycle(level + 1, bc, ctl)
        self._copy(xc, lev["pc"], lev["nc"])
        yield from self._exchange(lev["hp"], lev["pc"])
        la.spmv(lev["P"], nb(lev["pc"]), nb(x), mode=2, ctl=ctl)             # x += P x_c
        return (yield from self._smooth(lev, b, x, ctl))

    def issue(self, r, ctl):
        """z = V(r) (a generator: yields after each post of a message; returns z).

        r : (n_owned,) float64 backend array (this rank's owned residual; read only)
        ctl : the calling solver's control array (numba view): the kernels do nothing once
            it says the solve has finished

        Returns z, a (n_owned,) float64 view of the cycle's own buffer (overwritten by the
        next call).
        """
        z = yield from self._cycle(0, r, ctl)
        return z[:self.n_owned]
