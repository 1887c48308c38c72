"""The V-cycle of ONE hierarchy of the whole pressure matrix on GPU ranks, distributed by rows.

The CPU ranks' :class:`~dycore.parallel.amg.DistributedVCycle` on the device: rank 0 builds the
PyAMG hierarchy of the global matrix and cuts it into every rank's rows
(:func:`~dycore.parallel.amg.rank_pieces`). Down to the first level held whole (``top``: the
first level of at most ``replicate_below`` unknowns, else the coarsest) each rank keeps its
rows of A, R and P (local column ids: owned columns, then the ghost columns its rows read, in
the global CSR's entry order) with one :class:`~dycore.parallel.device_halo.DeviceHaloExchange`
per matrix for those ghosts, and its entries of D⁻¹. Level ``top``'s right-hand side is
all-gathered once; from there every rank runs the rest of the cycle on the whole levels and the
whole coarsest pseudo-inverse, and the prolongation above reads the whole correction, so the
coarse levels, where a halo message costs more than the rows it serves, send nothing
(coarse-level agglomeration, the redundant coarse solve of hypre's BoomerAMG and PETSc's GAMG).

Every row is summed by one thread in the global CSR's entry order, and smoothing is the
serial polynomial entry by entry, so z = V(r) is the bits of
:func:`dycore.solvers.amg.vcycle_reference` (``max_group=1``) on any number of ranks and for
any ``top`` — and CG with it takes the serial V-cycle's iterations, where the rank-local
hierarchies (``local_amg``, block-Jacobi over the ranks) take ever more as ranks are added
(193 against 21 on four parts of the paper mesh's matrix; docs/performance.md).

Messages: per level above ``top``, one exchange of x before each smoothing step but the first,
one of x before the residual, one of the residual before R, and one of the coarse correction
before P (none on the level just above ``top``); one all-gather at ``top``. Each is a post and
a yield (K loopback ranks run in lock step), so :meth:`DeviceGlobalVCycle.issue` is a
generator, like the solvers that call it.
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
        ``whole``, ``owned``, ``sizes``)

    Attributes
    ----------
    n_owned : int — owned fine rows; sizes : list of int — global unknowns per level
    top : int — the first level held whole by every rank (its right-hand side all-gathered)
    """

    def __init__(self, la, transport, piece: dict):
        from dycore.solvers.krylov import DeviceMatrix
        self.la, self.t, b = la, transport, la.b
        self.sizes = list(piece["sizes"])
        self.pack = get_rank_kernels(getattr(b, "strict", False))["pack_rows"]
        whole = piece["whole"]
        self.top = int(whole["level"])

        def matrix(block, halo: bool):
            plan, ptr, idx, val, _ = block       # entry order kept: the serial row sums
            m = DeviceMatrix(la, np.asarray(ptr, np.int32), np.asarray(idx, np.int32),
                             np.asarray(val, np.float64), 1, 1)
            return (m, DeviceHaloExchange(b, transport, plan, 1) if halo else None,
                    int(plan.n_local))

        z = b.zeros
        self.levels = []
        blocks = [(blk, lev < self.top) for lev, blk in enumerate(piece["levels"])]
        blocks += [(blk, False) for blk in whole["levels"]]
        for lev, ((ba, br, bp, dinv, coef), split) in enumerate(blocks):
            # (a level above ``top`` exchanges halos; its P reads the level below whole where
            # that level is held whole)
            (A, ha, na), (R, hr, nr) = matrix(ba, split), matrix(br, split)
            P, hp, np_ = matrix(bp, split and lev + 1 < self.top)
            n = A.nrow
            self.levels.append(dict(
                A=A, R=R, P=P, ha=ha, hr=hr, hp=hp, n=n, nc=R.nrow, coef=list(coef),
                dinv=b.to_device(np.asarray(dinv, np.float64)), d=z(n), b=z(n),
                xs=[z(na), z(na)], r=z(nr), pc=z(np_) if hp is not None else None))
        self.n_owned = int(piece["owned"][0].size)
        # level ``top``: every rank's owned right-hand side all-gathered (m per rank, padded)
        # and put in global order (one gather kernel); the coarsest: the whole pseudo-inverse
        owner = np.asarray(whole["owner"], np.int64)
        ranks = transport.size
        owned = [np.flatnonzero(owner == q) for q in range(ranks)]
        m = max(1, max(o.size for o in owned))
        pos = np.empty(owner.size, np.int64)
        for q, o in enumerate(owned):
            pos[o] = q * m + np.arange(o.size)
        inv = whole["coarse_inv"].tocsr()
        inv.sort_indices()
        self.coarse = DeviceMatrix(la, inv.indptr.astype(np.int32), inv.indices.astype(np.int32),
                                   inv.data.astype(np.float64), 1, 1)
        self.n_top_owned = int(owned[transport.rank].size)
        # (the restriction above ``top`` writes this rank's right-hand side of ``top`` straight
        # into the all-gather's send buffer)
        self.send, self.recv = z(m), z(m * ranks)
        self.pos = b.to_device(pos)
        self.coarse_b = z(inv.shape[0])
        self.full = (self.levels[self.top]["b"] if self.top < len(self.levels)
                     else self.coarse_b)
        self.coarse_x = z(inv.shape[0])
        if self.top == 0:      # the whole fine vector held: this rank's entries picked from it
            self.owned0 = b.to_device(np.asarray(piece["owned"][0], np.int64))
            self.z0 = z(self.n_owned)

    # -- pieces ------------------------------------------------------------------------------
    def _copy(self, src, dst, n: int) -> None:
        """dst[:n] = src[:n] (the solver kernels' copy: captured like every other launch)."""
        la = self.la
        la.launch(la.k.copy, n, la.b.nb(src), la.b.nb(dst[:n]))

    def _exchange(self, halo, x):
        if halo is None:                          # a level held whole: nothing to fill
            return
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

    def _gather(self, b):
        """The whole right-hand side of level ``top`` (in :attr:`full`) from every rank's
        owned entries (b: this rank's, or :attr:`send` where the restriction wrote them)."""
        la, bk = self.la, self.la.b
        if b is not self.send:                   # (no level above: b is the fine residual)
            self._copy(b, self.send, self.n_top_owned)
        self.t.allgather(self.send, self.recv)
        yield
        la.launch(self.pack, self.full.shape[0], bk.nb(self.recv), bk.nb(self.pos), 1,
                  bk.nb(self.full))          # the gathered blocks in global order
        return self.full

    def _cycle(self, level: int, b, ctl):
        if level == self.top:
            b = yield from self._gather(b)
        la, nb = self.la, self.la.b.nb
        if level == len(self.levels):
            la.spmv(self.coarse, nb(b), nb(self.coarse_x), ctl=ctl)
            return self.coarse_x
        lev = self.levels[level]
        x = yield from self._smooth(lev, b, None, ctl)
        yield from self._exchange(lev["ha"], x)
        la.spmv(lev["A"], nb(x), nb(lev["r"]), mode=1, b=nb(b), ctl=ctl)     # r = b − A x
        yield from self._exchange(lev["hr"], lev["r"])
        if level + 1 == self.top:
            bc = self.send
        else:
            bc = self.levels[level + 1]["b"] if level + 1 < len(self.levels) else self.coarse_b
        la.spmv(lev["R"], nb(lev["r"]), nb(bc), ctl=ctl)
        xc = yield from self._cycle(level + 1, bc, ctl)
        if lev["hp"] is not None:                # the level below is distributed: its ghosts
            self._copy(xc, lev["pc"], lev["nc"])
            yield from self._exchange(lev["hp"], lev["pc"])
            xc = lev["pc"]
        la.spmv(lev["P"], nb(xc), nb(x), mode=2, ctl=ctl)                    # x += P x_c
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
        if self.top == 0:                        # the whole vector: this rank's entries
            bk = self.la.b
            self.la.launch(self.pack, self.n_owned, bk.nb(z), bk.nb(self.owned0), 1,
                           bk.nb(self.z0))
            return self.z0
        return z[:self.n_owned]
