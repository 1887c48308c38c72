"""What one rank keeps of the set-up: its piece (local arrays only, owned rows in local ids).

:func:`rank_piece` cuts it from a set-up over all global nodes (the serial build on rank 0 of
the scattered set-up) or over a rank's part of the mesh (:mod:`dycore.parallel.local_setup`):
the same arrays either way (tests/parallel/test_local_setup.py).
"""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np

from dycore.parallel.partition import extract_rows
from dycore.parallel.rank_ops import owned_rows
from dycore.physics.state import State

__all__ = ["rank_piece"]


def rank_piece(serial, rp, nnodes=None, ids=None, pin=None) -> dict:
    """What rank ``rp.rank`` keeps of a set-up ``serial`` (a serial Simulation on rank 0, or
    the rank's own build over its nodes ``ids``: :mod:`dycore.parallel.local_setup`).

    Parameters
    ----------
    serial : anything with ``mesh`` (coords), ``sparsity``, ``ops`` (MeshOperators on a CPU
        backend), ``coeffs`` and ``state`` — over all global nodes, or over ``ids``
    rp : RankPartition; nnodes : global node count (default: ``serial.mesh.nnodes``)
    ids : (m,) int64 ascending global ids of ``serial``'s nodes (every local node of ``rp``
        among them; node k of ``serial`` is global ``ids[k]``), or None (all global nodes)
    pin : the global pinned node (default: ``serial.ops.pin``, a global id without ``ids``)

    Returns
    -------
    dict: ``rp`` (RankPartition), ``nnodes``, ``coords`` (n_local(2), 3) of the local nodes,
    the owned rows of C, Cᵀ, KMK (:func:`~dycore.parallel.rank_ops.owned_rows`), of the
    first-order pattern (``row1``) and of the pinned pressure matrix (``pressure_rows``), the
    lumped masses, pin, Dirichlet nodes and no-normal-flow frames in local ids, the
    coefficients and the state at the local nodes, ``detj_min`` of ``serial``'s elements.
    """
    mesh, spg, ops = serial.mesh, serial.sparsity, serial.ops
    n = mesh.nnodes if nnodes is None else int(nnodes)
    l2g = rp.l2g
    g2l = np.full(n, -1, np.int64)
    g2l[l2g] = np.arange(l2g.size)
    at = l2g if ids is None else np.searchsorted(ids, l2g)     # the local nodes in serial
    node_local = g2l if ids is None else g2l[ids]         # serial's nodes' local ids (or −1)
    dir_local = node_local[np.asarray(ops.dir_nodes, np.int64)]
    nnf = None
    if ops.nnf is not None:           # the rotated nodes this rank holds, in local ids
        loc = node_local[np.asarray(ops.nnf.nodes, np.int64)]
        keep = np.flatnonzero(loc >= 0)
        nnf = SimpleNamespace(nodes=loc[keep],
                              frames=np.asarray(ops.nnf.frames).reshape(-1, 3, 3)[keep],
                              fixed=np.asarray(ops.nnf.fixed)[keep])
    p = ops.pressure_host
    pp, pi, pos = extract_rows(p.indptr, p.indices, rp, n, 2, ids)
    c, s = serial.coeffs, serial.state
    return {
        "rp": rp, "nnodes": n, "coords": np.asarray(mesh.coords)[at],
        "ml": np.asarray(ops.ml)[at], "ml_inv_u": np.asarray(ops.ml_inv_u)[at],
        "C": owned_rows(rp, n, ops.C, 1, 3, ids, node_local),
        "CT": owned_rows(rp, n, ops.CT, 3, 1, ids, node_local),
        "kmk": owned_rows(rp, n, ops.kmk, 1, 1, ids, node_local),
        "pin": int(g2l[ops.pin if pin is None else pin]),
        "dir_nodes": np.sort(dir_local[dir_local >= 0]), "detj_min": ops.detj_min, "nnf": nnf,
        "row1": extract_rows(spg.indptr, spg.indices, rp, n, 1, ids)[:2],
        "pressure_rows": (pp, pi, p.data[pos]),
        "coeffs": dataclasses.replace(
            c, sigma=c.sigma[at], dtheta_bar_dz=c.dtheta_bar_dz[at],
            q_ref={k: v[at] for k, v in c.q_ref.items()},
            g_over_theta_bar=c.g_over_theta_bar[at], zeros=np.zeros(l2g.size)),
        "state": State(u=s.u[at].copy(), p=s.p[at].copy(),
                       theta_prime=s.theta_prime[at].copy(),
                       q={k: v[at].copy() for k, v in s.q.items()}, t=s.t),
    }
