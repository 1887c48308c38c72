"""A run on one GPU without MPI that solves as GPU ranks do: ``backend.reduction: exact``.

The serial device solvers (:mod:`dycore.solvers.device`) sum their dot products by a block tree
of the launch shape; GPU ranks sum them correctly rounded (:class:`~dycore.parallel.
device_reduce.DeviceExactReducer`), which is what makes 1, 2 and 4 GPU ranks agree bit for bit
in deterministic mode. The two differ in the last bits, and a few bits in a CG's α change its
iteration count (measured under the simulator: p 4.6e-11 of 532 apart after one step, 133
against 134 pressure iterations). With ``backend.reduction: exact`` a serial GPU run with device
solvers therefore solves its three systems with the GPU ranks' systems
(:class:`~dycore.parallel.device_systems.DeviceDistributedSystems`) over a world of one rank:

- the partition of one rank: every node owned, in the serial numbering, no ghost
  (:func:`~dycore.parallel.partition.partition_mesh` with one part), so the owned rows are the
  serial rows and every halo exchange moves nothing;
- :class:`~dycore.parallel.nccl.SelfTransport` (no messages, all-reduces of one rank are the
  identity, capturable), so the solves are replayed from graphs and each Picard iteration is
  captured whole, as the serial path does;
- the rank solvers' launch shapes and the pressure method of a GPU-rank run: CG with Jacobi
  or a V-cycle of the whole matrix (rank-local AMG over one rank, float64 levels), or the
  factorisation of the whole matrix (``method: direct``).

The rest of the step — assembly, operators, vector kernels — is the serial path's, which is the
GPU ranks' on owned rows. With ``assembly: deterministic``, ``strict: true`` and pressure
``jacobi`` such a run gives the fields of ``mpiexec -n K`` GPU ranks bit for bit
(tests/parallel/test_gpu_ranks_step.py).
"""
from __future__ import annotations

import numpy as np

from dycore.errors import ConfigError
from dycore.parallel.device_systems import DeviceDistributedSystems
from dycore.parallel.nccl import SelfTransport
from dycore.parallel.partition import extract_rows, owned_row_order, partition_mesh
from dycore.solvers.direct import pressure_method

__all__ = ["one_rank_systems"]


def one_rank_systems(backend, mesh, sparsity, ops, cfg, coriolis: bool = True,
                     setup_cache=None) -> DeviceDistributedSystems:
    """The three systems of a serial device run solved by the GPU ranks' solvers on one rank.

    Parameters
    ----------
    backend : GPUBackend (or its simulator) with ``solver_mode: device``
    mesh : Mesh (host ``tets`` (nele, 4) int); sparsity : Sparsity (first-order pattern, columns
        ascending); ops : MeshOperators (``pressure_host``: the pinned pressure matrix, scipy
        CSR (n, n); ``nnf``: the no-normal-flow rotation or None)
    cfg : SolversConfig; coriolis : whether the momentum blocks' (0,1)/(1,0) entries may be
        nonzero; setup_cache : the run's SetupCache or None (the pressure ``amg`` hierarchy kept
        there, as a GPU rank keeps its own)

    Returns
    -------
    DeviceDistributedSystems with the serial device systems' interface (``tracer``,
    ``momentum``, ``pressure``, ``begin_step``, ``end_step``, ``graph_ready``, ``inline``);
    every solution a device vector over the n nodes (the systems' own array).

    Raises
    ------
    ConfigError for a solver setting the GPU ranks lack (as ``mpiexec`` GPU runs would).
    """
    from numba import config as numba_config

    from dycore.parallel.gpu_simulation import SIMULATOR_SHAPES
    n = int(mesh.nnodes)
    indptr, indices = np.asarray(sparsity.indptr), np.asarray(sparsity.indices)
    rp = partition_mesh(mesh.tets, n, indptr, indices, np.zeros(n, np.int32))[0]
    p = ops.pressure_host
    pp, pi, pos = extract_rows(p.indptr, p.indices, rp, n, 2)
    direct = {}
    if pressure_method(cfg.pressure, backend, n)[0] == "direct":
        direct = {"pressure_global": p, "owned_global": [rp.owned]}
    nnf = ops.nnf
    ro = SIMULATOR_SHAPES["reducer_options"] if numba_config.ENABLE_CUDASIM else None
    try:
        return DeviceDistributedSystems(
            backend, SelfTransport(), rp, extract_rows(indptr, indices, rp, n, 1)[:2],
            owned_row_order(indptr, indices, rp), (pp, pi, p.data[pos]), cfg, "exact", ro,
            rotated=None if nnf is None else np.asarray(backend.to_host(nnf.blk_pos)),
            coriolis=coriolis, setup_cache=setup_cache, **direct)
    except ConfigError as exc:
        raise ConfigError(f"backend.reduction: 'exact' solves with the GPU ranks' solvers, "
                          f"and {exc}; or use backend.reduction 'auto'") from None
