"""The pressure solve of GPU ranks as ONE factorisation distributed over the ranks' GPUs.

The replicated direct solve (:mod:`dycore.parallel.device_direct`) factorises the whole
pinned pressure matrix on every GPU: its solve does not shrink with the rank count (22 ms a
solve on 1, 2 and 4 H200s at 4.42 M tets, 44 ms of a 103-ms two-GPU step) and every GPU holds
the whole factor (24 GB there). cuDSS's multi-GPU multi-node mode (MGMN) factorises one matrix
over K processes, one GPU each: each process gives its own rows, right-hand side and solution
entries (``cudssMatrixSetDistributionRow1d``), the factor's supernodes are spread over the
GPUs and the sweeps exchange their data over NCCL (cuDSS's NCCL communication layer,
:func:`~dycore.solvers.direct.comm_layer`, whose host messages go through Open MPI).

The ranks' owned nodes are numbered rank by rank (:func:`distributed_numbering`: rank r's owned
node i is row ``offsets[r] + i``), so each rank's rows are one contiguous block; the matrix is
the global one in that order (P A Pᵀ), built from the owned rows each rank already has
(:func:`distributed_rows`: no global matrix anywhere, no broadcast). Each solve reads the owned
right-hand side, writes the owned solution in place into the local vector and fills the ghosts
(depth 2) with one halo exchange.

Measured (``scripts/device/cudss_mgmn.py``, two H200s, one right-hand side): the 4.42 M-tet
pressure matrix (762,129 rows) solves in 15.70 ms over two GPUs against 21.66 ms on one (1.38×);
the paper mesh's (98,441 rows) in 3.22–3.33 against 3.04 ms. But the MGMN solve blocks the
host until it has finished: issued from Python, the step's next stages then reach an idle GPU
(two GPUs, 4.42 M tets: 107.1 ms against 102.2 ms replicated). With each Picard iteration
captured as one graph per rank they cost one graph launch after the stall, and the distributed
factorisation gives the shorter step (four H200s: 48.9 against 69.8 ms), so ``factorisation:
auto`` distributes from :data:`MGMN_MIN_ROWS` rows; the distributed factors are spread over
the GPUs (2.83 G nonzeros over both at 4.42 M tets, against 2.98 G on each GPU replicated;
per-GPU memory not measured).
"""
from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from dycore.parallel.device_direct import distributed_numbering, owned_rhs
from dycore.solvers.direct import (CudssDirect, comm_layer, reproducible, residual_verdict,
                                   solve_in_step)

__all__ = ["distributed_numbering", "distributed_rows", "mgmn_support", "MgmnDirect",
           "DistributedDirectPressure", "MGMN_MIN_ROWS"]

log = logging.getLogger("dycore")

#: ``factorisation: auto`` distributes the factorisation from this many rows. Measured on
#: four H200s with each Picard iteration captured as one graph per rank (the MGMN solve's
#: host stall then costs one graph launch after it): at 762,129 rows (4.42 M tets) the step
#: 48.9 ms distributed against 69.8 ms replicated on 4 GPUs; on the paper mesh (98,441 rows)
#: one MGMN solve is no faster than one GPU's (3.22–3.33 against 3.04 ms, two H200s) and its
#: analysis has no cached ordering. Between the two sizes nothing was measured; 500,000 is
#: the choice. (Before the graphs the replicated step was the shorter one at 762,129 rows:
#: 102.2 against 107.1 ms on two H200s.)
MGMN_MIN_ROWS = 500_000


def distributed_rows(rows, l2g, dist, n: int) -> sp.csr_matrix:
    """This rank's owned rows of P A Pᵀ (the rank-by-rank numbering's matrix).

    Parameters
    ----------
    rows : (indptr (n_owned+1,), indices (nnz,) LOCAL column ids, values (nnz,)) — the owned
        rows of the pinned pressure matrix (``piece["pressure_rows"]``)
    l2g : (n_local,) int — local → global node ids; dist : (n,) int64 — global → distributed
        row (:func:`distributed_numbering`); n : the global size

    Returns
    -------
    scipy.sparse.csr_matrix (n_owned, n) float64, columns in the distributed numbering, sorted
    within each row (row i is owned node i's row: the rows keep the local order).
    """
    ptr, cols, vals = rows
    cols = dist[np.asarray(l2g, np.int64)[np.asarray(cols, np.int64)]]
    out = sp.csr_matrix((np.asarray(vals, np.float64), cols, np.asarray(ptr, np.int64)),
                        shape=(len(ptr) - 1, n))
    out.sort_indices()
    return out


def mgmn_support(transport) -> tuple[bool, str]:
    """Whether this rank can join a cuDSS MGMN factorisation, and why not.

    Needs: NCCL ranks (:class:`~dycore.parallel.nccl.NcclTransport`: a GPU each), cuDSS through
    nvmath-python with the MGMN calls, its NCCL communication layer
    (:func:`~dycore.solvers.direct.comm_layer`) and Open MPI as mpi4py's MPI (the layer calls
    ``libmpi.so.40`` with mpi4py's communicator: under MPICH it cannot).

    Returns (True, the layer's path) or (False, the reason in words).
    """
    from dycore.parallel.nccl import NcclTransport
    if not isinstance(transport, NcclTransport):
        return False, "the ranks do not talk over NCCL"
    try:
        from nvmath.bindings import cudss
    except Exception as exc:  # noqa: BLE001 - ImportError or a missing shared library
        return False, f"cuDSS is not importable ({type(exc).__name__})"
    if not hasattr(cudss, "matrix_set_distribution_row1d"):
        return False, "this nvmath-python has no cuDSS MGMN calls"
    layer = comm_layer()
    if layer is None:
        return False, "cuDSS's NCCL communication layer (libcudss_commlayer_nccl) is not installed"
    from mpi4py import MPI
    lib = MPI.Get_library_version().splitlines()[0]
    if not lib.startswith("Open MPI"):
        return False, (f"the communication layer needs Open MPI as mpi4py's MPI, not "
                       f"{lib.split(',')[0].strip()}")
    return True, layer


class MgmnDirect(CudssDirect):
    """cuDSS factorisation of one SPD matrix over the K processes of ``comm`` (MGMN mode).

    Parameters
    ----------
    backend : GPUBackend (CuPy arrays, its stream)
    comm : mpi4py communicator (Open MPI) of the K ranks; nccl_comm : the address of an NCCL
        communicator of the same ranks (``NcclCommunicator.comm``), for cuDSS alone
    rows : scipy CSR (m, n) float64 — this rank's rows ``first_row .. first_row + m − 1``
    first_row : int; b, x : (m,) float64 CuPy arrays — this rank's entries of the right-hand
        side and of the solution (fixed buffers)
    rtol : tolerance of the set-up check; layer : path of cuDSS's communication layer

    Attributes
    ----------
    as :class:`~dycore.solvers.direct.CudssDirect` (fill: the factors' nonzeros over all
    ranks); capturable : False (the ranks do not capture their solves). ``solve()`` (the
    inherited one) is collective — every rank calls it, in the same order as its other NCCL
    work — and returns to the host only when the GPU has finished (measured: 3.22 ms on the
    host for a 3.22-ms solve), unlike the single-GPU solve. Strict or deterministic runs ask
    cuDSS's deterministic mode, as the replicated factorisation does (not run on GPUs).

    Raises
    ------
    ConfigError when cuDSS cannot be loaded; SolverDivergedError when the factorisation fails
    or the set-up check's residual — every rank's rows, summed over the ranks — exceeds rtol.
    """

    name = "cuDSS MGMN"
    capturable = False

    def __init__(self, backend, comm, nccl_comm, rows, first_row, b, x, rtol=1e-10,
                 layer=None):
        self._comms = (np.array([int(nccl_comm)], np.uint64),
                       np.array([_mpi_handle(comm)], np.uint64))
        self._open(backend, b, x, deterministic=reproducible(backend),
                   comm_layer=layer or comm_layer())
        cd = self.cd
        cd.data_set(self.handle, self.data, cd.DataParam.COMM_DEVICE,
                     self._comms[0].ctypes.data, 8)
        cd.data_set(self.handle, self.data, cd.DataParam.COMM_HOST,
                     self._comms[1].ctypes.data, 8)
        n = rows.shape[1]
        self._factorise(rows, n, first_row)
        self.comm, self.first_row = comm, int(first_row)
        self.residual = self._check(rows, rtol)

    def _check(self, rows, rtol):
        """:func:`~dycore.solvers.direct.check_factorisation` over the ranks (collective):
        every rank solves with its entries of one pseudo-random right-hand side, the solution
        is all-gathered on the host, and the squares of the residual's and the right-hand
        side's entries are summed over the ranks' rows."""
        comm, m, n = self.comm, rows.shape[0], rows.shape[1]
        b = np.random.default_rng(12345).standard_normal(n)[self.first_row:self.first_row + m]
        self.b_arr[...] = self.backend.to_device(b)
        self.solve()
        x = np.concatenate(comm.allgather(self.backend.to_host(self.x_arr)))
        r = b - rows @ x
        sums = comm.allreduce(np.array([r @ r, b @ b]))
        return residual_verdict(float(np.sqrt(sums[0] / sums[1])), rtol,
                                f"pressure direct solve over {comm.size} GPU ranks",
                                "use solvers.pressure.factorisation: replicated, or method: cg")


def _mpi_handle(comm) -> int:
    """The C handle of an mpi4py communicator (Open MPI: a pointer), as an int."""
    from mpi4py import MPI
    return int(MPI._handleof(comm))


class DistributedDirectPressure:
    """The pinned pressure system solved by one factorisation over all GPU ranks.

    Parameters
    ----------
    backend : GPUBackend (or its simulator); transport : the ranks' transport (halo exchange)
    rows : this rank's owned rows of P A Pᵀ (:func:`distributed_rows`), (n_owned, n)
    first_row : int — this rank's first row (``offsets[rank]`` of :func:`distributed_numbering`)
    plan : HaloPlan of depth 2 (``rp.plan(2)``): the ghosts the solution's exchange fills
    factor : callable (backend, rows, first_row, b, x) → an object with ``solve()`` (x ← this
        rank's rows of A⁻¹ b, collective), ``fill``, ``setup_s`` and ``residual``; default: a
        :class:`MgmnDirect` over ``comm`` with its own NCCL communicator
    comm : mpi4py communicator of the ranks (for the default factor)
    rtol : tolerance of the factorisation's set-up check

    Attributes
    ----------
    x : (n_local,) float64 backend array — the last solution, ghosts filled (the solver's own,
    overwritten by the next solve); iterations : 0; direct : the factor; n, n_owned, n_local

    Raises
    ------
    ValueError for no rows or more rows than the plan's local nodes; the factor's errors.
    """

    iterations = 0

    def __init__(self, backend, transport, rows, first_row: int, plan, factor=None, comm=None,
                 rtol: float = 1e-10):
        from dycore.parallel.device_halo import DeviceHaloExchange
        self.b, self.t = backend, transport
        self.n_owned, self.n_local, self.n = int(rows.shape[0]), int(plan.n_local), rows.shape[1]
        if not 0 < self.n_owned <= self.n_local:
            raise ValueError(f"distributed direct solve: {self.n_owned} rows for a local "
                             f"vector of {self.n_local} nodes")
        z = backend.zeros
        self.x = z(self.n_local)
        self.b_own = z(self.n_owned)
        self.halo = DeviceHaloExchange(backend, transport, plan, 1)
        x_own = self.x[:self.n_owned]              # the factor writes the owned part in place
        if factor is None:
            from dycore.parallel.nccl import NcclTransport
            self._nccl = NcclTransport.from_mpi(comm, backend.stream)     # cuDSS's own
            self.direct = MgmnDirect(backend, comm, self._nccl.comm.comm, rows, first_row,
                                     self.b_own, x_own, rtol)
        else:
            self.direct = factor(backend, rows, first_row, self.b_own, x_own)
        if transport.rank == 0:
            log.info("pressure: %s factorisation of %d rows over %d GPU ranks in %.2f s "
                     "(%d nonzeros in the factors, set-up residual %.1e; one halo exchange "
                     "per solve)", self.direct.name, self.n, transport.size,
                     self.direct.setup_s, self.direct.fill, self.direct.residual)

    def steps(self, rhs):
        """The solve as a generator that yields after the right-hand side is in place and
        after the halo exchange's post (so K loopback ranks in one process run it in lock
        step); exhausted when :attr:`x` holds the solution, ghosts filled.

        rhs : (n_local,) or (n_owned,) float64 backend array — its owned entries are read.

        Raises
        ------
        ValueError for a right-hand side with fewer than n_owned entries or not 1-D.
        """
        self.b_own[...] = owned_rhs(self.b, rhs, self.n_owned, "distributed direct solve")
        yield
        solve_in_step(self.b, self.direct)
        self.halo.begin(self.x)
        yield
        self.halo.end(self.x)

    def close(self) -> None:
        """Free the factorisation (cuDSS's handle, on a GPU), then cuDSS's NCCL communicator;
        later calls do nothing. :meth:`GpuRankSimulation.close
        <dycore.parallel.gpu_simulation.GpuRankSimulation.close>` calls it, so that the
        garbage collector's order cannot destroy the communicator under the handle."""
        close = getattr(self.direct, "close", None)
        if close is not None:
            close()
        nccl = getattr(self, "_nccl", None)
        if nccl is not None:
            nccl.close()
            self._nccl = None

    def solve(self, rhs):
        """Solve A x = rhs (every rank calls it). Returns (x (n_local,), 0 iterations)."""
        for _ in self.steps(rhs):
            pass
        return self.x, self.iterations
