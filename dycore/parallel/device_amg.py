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
from dycore.parallel.overlap import interior_first, leading_interior, local_relabel, renumber, \
    send_last, split_rows

__all__ = ["DeviceGlobalVCycle"]


class DeviceGlobalVCycle:
    """z ≈ A⁻¹ r on this rank's owned rows, as one V-cycle of the global hierarchy.

    Parameters
    ----------
    la : DeviceLinalg (:mod:`dycore.solvers.krylov`) of the calling solver
    transport : the ranks' transport (:mod:`dycore.parallel.nccl`): halo messages, all-gather
    piece : this rank's dict of :func:`~dycore.parallel.amg.rank_pieces` (``levels``,
        ``whole``, ``owned``, ``sizes``)
    order0 : (n_owned,) int array or None — the caller's numbering of the fine level's owned
        rows (order0[new] = old; :func:`~dycore.parallel.overlap.interior_first`): r and z
        are in it; None: the piece's own
    overlap : the levels below the fine one distributed by rows are numbered interior first
        and every product of A there (smoothing steps, residual) sums its interior rows while
        the halo exchange travels (:mod:`dycore.parallel.overlap`); the same bits
    group : threads summing one row of the A and R of every level above ``top`` (a power of
        two ≤ 32; P's rows are short: one thread). 1: one thread a row in the global CSR's
        entry order, the serial V-cycle's bits; another fixed number gives other bits, the
        same on any number of ranks, and coalesced loads (a row of the fine level has about
        63 entries). With ``group`` > 1 the levels held whole — the same matrices on every
        rank — take :func:`~dycore.solvers.krylov.row_group` of their own rows instead, for
        A, R and P (their long rows were summed by too few threads: the restrictions to
        1,800 and to 69 unknowns took 17 µs each a cycle with eight threads a row on an
        H200; a level of at most 4,096 rows sizes the group by its longest row), and so does
        the dense coarsest pseudo-inverse (32 for 69 unknowns and for 499; one thread summed
        a 499-entry row in 232 µs a cycle)
    dtype : storage of every level's A, R and P values (:func:`~dycore.solvers.amg.
        level_dtype`): float64, or float32 — the serial device V-cycle's default, two thirds
        of the bytes a nonzero; vectors, D⁻¹, the coarsest pseudo-inverse and all arithmetic
        stay float64, so z = V(r) is then :func:`~dycore.solvers.amg.vcycle_reference` of
        ``HostHierarchy.rounded(float32)``, again the same bits on any number of ranks

    Attributes
    ----------
    n_owned : int — owned fine rows; sizes : list of int — global unknowns per level
    top : int — the first level held whole by every rank (its right-hand side all-gathered)
    dtype : numpy dtype — storage of the level matrices' values
    """

    def __init__(self, la, transport, piece: dict, order0=None, overlap: bool = False,
                 group: int = 1, dtype=np.float64):
        from dycore.solvers.krylov import DeviceMatrix
        self.la, self.t, b = la, transport, la.b
        self.dtype = np.dtype(dtype)
        self.sizes = list(piece["sizes"])
        self.pack = get_rank_kernels(getattr(b, "strict", False))["pack_rows"]
        whole = piece["whole"]
        self.top = int(whole["level"])
        # the owned rows of every level above ``top`` numbered interior first with overlap,
        # so the products of A overlap their halo exchange, else with the rows A's plan sends
        # last (send_last: on two ranks the messages leave from the vector, no pack kernel)
        # (dycore.parallel.overlap); the fine level's as the caller's ``order0`` (None: as
        # given); the whole levels keep global order
        orders = []
        for lev, (ba, *_rest) in enumerate(piece["levels"][:self.top]):
            if lev == 0:
                orders.append(None if order0 is None else np.asarray(order0, np.int64))
            else:
                n_lev = np.asarray(ba[1]).size - 1
                orders.append(interior_first(ba[1], ba[2], n_lev)[0] if overlap
                              else send_last(ba[0], n_lev))

        def matrix(block, halo: bool, rows=None, cols=None, overlap=False, g=1):
            # entry order kept (the serial row sums); renumbered where rows / cols are given
            plan, ptr, idx, val = renumber(*block[:4], rows, cols)
            m = DeviceMatrix(la, np.asarray(ptr, np.int32), np.asarray(idx, np.int32),
                             np.asarray(val, np.float64), 1, g, self.dtype)
            return (m, DeviceHaloExchange(b, transport, plan, 1, overlap=overlap)
                    if halo else None, int(plan.n_local), (ptr, idx))

        z = b.zeros
        self.levels = []
        blocks = [(blk, lev < self.top) for lev, blk in enumerate(piece["levels"])]
        blocks += [(blk, False) for blk in whole["levels"]]
        for lev, ((ba, br, bp, dinv, coef), split) in enumerate(blocks):
            # (a level above ``top`` exchanges halos; its P reads the level below whole where
            # that level is held whole)
            mine = orders[lev] if split else None
            below = orders[lev + 1] if lev + 1 < self.top else None
            # (a level held whole is the same matrix on every rank: with g None, DeviceMatrix
            # takes row_group of its own rows, the same bits on any rank count; a distributed
            # level's P, of 3–4 entries a row, one thread)
            g = group if split or group == 1 else None
            (A, ha, na, host), (R, hr, nr, _) = (matrix(ba, split, mine, mine, overlap, g),
                                                 matrix(br, split, below, mine, g=g))
            P, hp, np_, _ = matrix(bp, split and lev + 1 < self.top, mine, below,
                                   g=1 if split else g)
            n = A.nrow
            # rows summed before the exchange has landed: none without overlap, all on a
            # level held whole (no exchange)
            m = (leading_interior(*host, n) if overlap else 0) if split else n
            inner, outer = split_rows(A, m)
            dinv = np.asarray(dinv, np.float64)
            self.levels.append(dict(
                A=A, R=R, P=P, ha=ha, hr=hr, hp=hp, n=n, nc=R.nrow, coef=list(coef), m=m,
                inner=inner, outer=outer,
                dinv=b.to_device(dinv if mine is None else dinv[mine]), d=z(n), b=z(n),
                xs=[z(na), z(na)], r=z(nr), pc=z(np_) if hp is not None else None))
        #: owned fine rows before the first boundary row (the products' interior launch)
        self.n_interior = self.levels[0]["m"] if self.levels else 0
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
        # (the same matrix on every rank: its own group, as the levels held whole)
        self.coarse = DeviceMatrix(la, inv.indptr.astype(np.int32), inv.indices.astype(np.int32),
                                   inv.data.astype(np.float64), 1, 1 if group == 1 else None)
        self.n_top_owned = int(owned[transport.rank].size)
        # (the restriction above ``top`` writes this rank's right-hand side of ``top`` straight
        # into the all-gather's send buffer)
        self.send, self.recv = z(m), z(m * ranks)
        self.pos = b.to_device(pos)
        self.coarse_b = z(inv.shape[0])
        self.full = (self.levels[self.top]["b"] if self.top < len(self.levels)
                     else self.coarse_b)
        self.coarse_x = z(inv.shape[0])
        self.unorder0 = None
        if self.top == 0:      # the whole fine vector held: this rank's entries picked from it
            owned0 = np.asarray(piece["owned"][0], np.int64)
            if order0 is not None:            # (in the caller's numbering, and back)
                owned0 = owned0[np.asarray(order0, np.int64)]
                self.unorder0 = b.to_device(local_relabel(order0, self.n_owned))
            self.owned0 = b.to_device(owned0)
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

    def _split(self, lev, x, interior, boundary):
        """A product of the level's A that reads x's ghosts: the exchange of x posted, the
        interior rows (``interior()``) while it travels, then the boundary rows
        (``boundary()``); a level held whole runs ``interior()`` on all its rows."""
        halo = lev["ha"]
        if halo is not None:
            halo.begin(x)
        if lev["m"]:
            interior()
        if halo is not None:
            yield
            halo.end(x)
        if lev["m"] < lev["n"]:
            boundary()

    def _smooth(self, lev, b, x, ctl):
        """The level's polynomial smoothing from x (None: from 0) into its x buffers; returns
        the buffer holding the result (owned entries; ghosts stale)."""
        la, nb = self.la, self.la.b.nb
        a, m, n = lev["A"], lev["m"], lev["n"]
        for c1, c2 in lev["coef"]:
            dst = lev["xs"][0] if x is None or x is lev["xs"][1] else lev["xs"][1]
            args = (nb(dst if x is None else x), nb(b), nb(lev["dinv"]), nb(lev["d"]),
                    nb(dst), c1, c2, 1 if x is None else 0, 0, la.no_partial, -1, 0, ctl,
                    la.ticket)
            if x is None:                 # from 0: no row sum, no ghost read: one thread a row
                la.launch(la.k.smooth, n, a.indptr, a.indices, a.data, 1, 0, 0, *args)
            else:
                inner, g = lev["inner"], a.g
                yield from self._split(
                    lev, x,
                    lambda: la.launch(la.k.smooth, m * g, inner.indptr, a.indices, a.data, g, 0,
                                      0, *args),
                    lambda: la.launch(la.k.smooth, (n - m) * g, a.indptr, a.indices, a.data, g,
                                      0, m, *args))
            x = dst
        return x

    def _gather(self, b):
        """The whole right-hand side of level ``top`` (in :attr:`full`) from every rank's
        owned entries (b: this rank's, or :attr:`send` where the restriction wrote them)."""
        la, bk = self.la, self.la.b
        if b is not self.send and self.unorder0 is not None:    # (the caller's numbering)
            la.launch(self.pack, self.n_top_owned, bk.nb(b), bk.nb(self.unorder0), 1,
                      bk.nb(self.send))
        elif b is not self.send:                 # (no level above: b is the fine residual)
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
        m, n, r = lev["m"], lev["n"], lev["r"]
        yield from self._split(                                               # r = b − A x
            lev, x,
            lambda: la.spmv(lev["inner"], nb(x), nb(r[:m]), mode=1, b=nb(b[:m]), ctl=ctl),
            lambda: la.spmv(lev["outer"], nb(x), nb(r[m:n]), mode=1, b=nb(b[m:n]), ctl=ctl))
        yield from self._exchange(lev["hr"], r)
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
