"""Mesh-only operators, built once per run: lumped mass, C, CMC, K_p, KMK, Dirichlet positions.

docs/equations.md §3: C_ij,d = −∫∂_dψᵢφⱼ + ∫_Γ ψᵢφⱼn_d on the faces that are NOT no-normal-flow (here the
lateral, Dirichlet faces — the omission on ground and lid is the weak no-normal-flow condition).
With that boundary term ``C u`` is the weak divergence of the full velocity (Dirichlet values
included), so the continuity right-hand side ct_rhs is zero. CMC = C M_L⁻¹ Cᵀ with M_L⁻¹ set to
zero at Dirichlet velocity nodes (the correction never moves them); KMK = K_p diag(1/M_Lᵖ) K_p.
The pressure matrix CMC + s·KMK (s = physics.stabilisation) is pinned at one node (pressure is
defined up to a constant) and is constant in time, so its AMG hierarchy is built once.

With the strong no-normal-flow condition (:mod:`dycore.assembly.no_normal_flow`) the correction
M_L⁻¹Cᵀδp loses its normal component at rotated ground/lid nodes, and CMC = C P M_L⁻¹ Cᵀ with
Pᵢ = I − nᵢnᵢᵀ there (symmetric, positive semi-definite like before).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dycore.assembly.no_normal_flow import NoNormalFlow, build_no_normal_flow
from dycore.errors import MeshError

__all__ = ["MeshOperators", "build_mesh_operators", "mesh_operator_arrays",
           "mesh_operators_from_arrays", "csr_positions"]


def csr_positions(sparsity, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Positions in ``values`` of entries (rows[k], cols[k]) of the first-order pattern.

    Raises
    ------
    MeshError if an entry is not in the pattern (the pair shares no element).
    """
    n = sparsity.n
    keys = sparsity.row_of.astype(np.int64) * n + sparsity.indices
    want = np.asarray(rows, np.int64) * n + np.asarray(cols, np.int64)
    pos = np.searchsorted(keys, want)
    if np.any(pos >= keys.size) or np.any(keys[np.minimum(pos, keys.size - 1)] != want):
        raise MeshError("boundary face nodes are not coupled in the element pattern")
    return pos


@dataclass
class MeshOperators:
    """Operators that depend only on the mesh (arrays live on the backend).

    Attributes
    ----------
    ml : (n,) lumped mass [m³]; ml_inv_u : (n,3) 1/M_L, zero at Dirichlet velocity nodes
    C, CT : sparse (n,3n) and (3n,n) divergence matrix and its transpose [m²]
    kmk : sparse (n,n) s·KMK [m]; pressure : sparse (n,n) CMC + s·KMK, pinned [m]
    pressure_host : SciPy CSR copy of ``pressure`` (host solver / AMG set-up)
    pin : int — pinned pressure node
    dir_nodes : (nd,) Dirichlet nodes; dir_row_pos : positions of all nonzeros in Dirichlet
        rows; dir_diag_pos : (nd,) positions of their diagonal entries; dir_row_start,
        dir_row_end : (nd,) int32 first and one-past-last nonzero of each Dirichlet row
    detj_min : float — smallest element det J (checked > 0)
    nnf : NoNormalFlow with backend arrays (frames flat, (9·nr,)) for the strong
        no-normal-flow condition, or None (weak condition: nothing rotated)
    """

    ml: object
    ml_inv_u: object
    C: object
    CT: object
    kmk: object
    pressure: object
    pressure_host: sp.csr_matrix
    pin: int
    dir_nodes: object
    dir_row_pos: object
    dir_diag_pos: object
    detj_min: float
    dir_row_start: object = None
    dir_row_end: object = None
    nnf: NoNormalFlow | None = None


def _lateral_face_mass(mesh, sparsity, tags) -> np.ndarray:
    """∫_Γ ψᵢφⱼ n_d over faces with the given tags, as (nnz,3) additions to C."""
    sel = np.isin(mesh.face_tags, np.asarray(tags))
    faces = mesh.faces[sel].astype(np.int64)
    x = mesh.coords[faces]                                     # (nf,3,3)
    cross = np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])     # outward, |cross| = 2·area
    area_n = 0.5 * cross                                       # area · n
    out = np.zeros((sparsity.nnz, 3))
    for a in range(3):
        for b in range(3):
            w = (2.0 if a == b else 1.0) / 12.0                # ∫ψaψb = A(1+δ)/12
            pos = csr_positions(sparsity, faces[:, a], faces[:, b])
            np.add.at(out, pos, w * area_n)
    return out


def _projected_inverse_mass(ml_inv_u, nnf) -> sp.csr_matrix:
    """(3n,3n) block diagonal M_L⁻¹ with Pᵢ = I − Σₐ nᵢₐnᵢₐᵀ (its ``fixed`` normals) at the
    rotated nodes of ``nnf``."""
    n = ml_inv_u.shape[0]
    diag = ml_inv_u.ravel().copy()
    if nnf is None or nnf.nodes.size == 0:
        return sp.diags(diag).tocsr()
    diag[(3 * nnf.nodes[:, None] + np.arange(3)).ravel()] = 0.0
    frames = np.asarray(nnf.frames).reshape(-1, 3, 3)
    fixed = np.asarray(nnf.fixed)
    proj = np.eye(3)[None] - frames[:, 0, :, None] * frames[:, 0, None, :]
    two = fixed >= 2
    proj[two] -= frames[two, 1, :, None] * frames[two, 1, None, :]
    blocks = ml_inv_u[nnf.nodes, 0][:, None, None] * proj
    rows = np.repeat(3 * nnf.nodes[:, None] + np.arange(3), 3, axis=1)      # (nr, 9)
    cols = np.tile(3 * nnf.nodes[:, None] + np.arange(3), (1, 3))
    a = sp.coo_matrix((blocks.reshape(-1, 9).ravel(), (rows.ravel(), cols.ravel())),
                      shape=(3 * n, 3 * n))
    return (sp.diags(diag) + a).tocsr()


def build_mesh_operators(mesh, backend, assembler, sparsity, dirichlet_tags, stabilisation,
                         timers, no_normal_flow_tags=(), surface_normals=None) -> MeshOperators:
    """Assemble every mesh-only operator once (docs/equations.md §3, §6).

    :func:`mesh_operator_arrays` (the work, host arrays) then
    :func:`mesh_operators_from_arrays` (onto the backend); a run with the set-up cache
    (:mod:`dycore.io.setup_cache`) stores the first and loads it instead of integrating.

    Parameters
    ----------
    mesh : Mesh; backend : CPU/GPU backend; assembler : that backend's assembler
    sparsity : Sparsity (host arrays); dirichlet_tags : face tags with strong Dirichlet velocity
    stabilisation : float — scale s of KMK (1 = the K_e = ½∫∇ψᵀh̄∇ψ of docs/equations.md §3)
    no_normal_flow_tags : face tags with the strong no-normal-flow condition (empty: the weak
        condition only, nothing rotated)
    surface_normals : exact normals per tag (see
        :func:`dycore.assembly.no_normal_flow.build_no_normal_flow`), or None

    Raises
    ------
    MeshError naming the first element with det J <= 0 or a singular edge-length system.
    """
    arrays = mesh_operator_arrays(mesh, backend, assembler, sparsity, dirichlet_tags,
                                  stabilisation, timers, no_normal_flow_tags, surface_normals)
    return mesh_operators_from_arrays(arrays, backend, sparsity)


def _put_csr(out: dict, name: str, a: sp.csr_matrix) -> None:
    a = a.tocsr()
    out[f"{name}.data"], out[f"{name}.indices"], out[f"{name}.indptr"] = (a.data, a.indices,
                                                                           a.indptr)
    out[f"{name}.shape"] = np.asarray(a.shape, np.int64)


def _get_csr(arrays: dict, name: str) -> sp.csr_matrix:
    return sp.csr_matrix((arrays[f"{name}.data"], arrays[f"{name}.indices"],
                          arrays[f"{name}.indptr"]),
                         shape=tuple(int(v) for v in arrays[f"{name}.shape"]))


#: the NoNormalFlow attributes stored by :func:`mesh_operator_arrays` (prefix ``nnf.``)
_NNF_FIELDS = ("nodes", "frames", "blk_pos", "blk_row", "blk_col", "blk_diag", "diag_pos",
               "fixed")


def mesh_operator_arrays(mesh, backend, assembler, sparsity, dirichlet_tags, stabilisation,
                         timers, no_normal_flow_tags=(), surface_normals=None,
                         pin: int | None = None) -> dict:
    """The mesh-only operators as host arrays ({name: ndarray}; CSR matrices as
    ``NAME.data/.indices/.indptr/.shape`` for C, kmk and the pinned pressure matrix; ``ml``,
    ``dir_nodes``, ``dir_row_pos``, ``dir_diag_pos``, 0-d ``pin`` and ``detj_min``, and
    ``nnf.*`` when the strong no-normal-flow condition is on). Parameters and errors as
    :func:`build_mesh_operators`; ``pin``: the pressure node pinned to 0 (default: the highest
    node, a node on the lid), −1 for none (a rank's part of a mesh that does not hold it)."""
    n = mesh.nnodes
    ml = backend.to_host(assembler.lumped_mass())
    c_vol, detj = assembler.divergence()
    c_vol, detj = backend.to_host(c_vol), backend.to_host(detj)
    bad = np.flatnonzero(~(detj > 0.0))
    if bad.size:
        e = int(bad[0])
        raise MeshError(f"element {e} has det J = {detj[e]:.3e} (nodes {mesh.tets[e].tolist()}, "
                        f"coordinates {mesh.coords[mesh.tets[e]].tolist()})")
    kp, status = assembler.stabilisation()
    kp, status = backend.to_host(kp), backend.to_host(status)
    bad = np.flatnonzero(status != 0)
    if bad.size:
        raise MeshError(f"element {int(bad[0])}: singular edge-length system in get_edge_lengths")

    with timers("assemble CMC + KMK (host, once)"):
        c_vals = c_vol + _lateral_face_mass(mesh, sparsity, dirichlet_tags)
        cols = (3 * sparsity.indices[:, None].astype(np.int64) + np.arange(3)).ravel()
        C = sp.csr_matrix((c_vals.ravel(), cols, 3 * sparsity.indptr.astype(np.int64)),
                          shape=(n, 3 * n))
        dir_nodes = np.unique(mesh.faces[np.isin(mesh.face_tags, np.asarray(dirichlet_tags))])
        ml_inv_u = np.repeat((1.0 / ml)[:, None], 3, axis=1)
        ml_inv_u[dir_nodes] = 0.0
        nnf = (build_no_normal_flow(mesh, sparsity, no_normal_flow_tags, dir_nodes,
                                    surface_normals) if len(no_normal_flow_tags) else None)
        cmc = (C @ _projected_inverse_mass(ml_inv_u, nnf) @ C.T).tocsr()
        Kp = sp.csr_matrix((kp, sparsity.indices, sparsity.indptr), shape=(n, n))
        kmk = (Kp @ sp.diags(1.0 / ml) @ Kp).tocsr()
        kmk.data *= stabilisation                   # (SciPy's s·A, without its copy)
        cmc.sort_indices()                          # (every user sorts them: the sum of two
        kmk.sort_indices()                          # sorted matrices is a merge)
        pressure = cmc + kmk
        del cmc
        if pin is None:
            pin = int(np.argmax(mesh.coords[:, 2]))             # a node on the lid
        _pin(pressure, pin)

    in_dir = np.zeros(n, bool)
    in_dir[dir_nodes] = True
    out = {"ml": ml, "dir_nodes": dir_nodes.astype(np.int64),
           "dir_row_pos": np.flatnonzero(in_dir[sparsity.row_of]).astype(np.int64),
           "dir_diag_pos": csr_positions(sparsity, dir_nodes, dir_nodes).astype(np.int64),
           "pin": np.int64(pin), "detj_min": np.float64(detj.min())}
    for name, a in (("C", C), ("kmk", kmk), ("pressure", pressure)):
        _put_csr(out, name, a)
    if nnf is not None:
        for f in _NNF_FIELDS:
            out[f"nnf.{f}"] = getattr(nnf, f)
    return out


def mesh_operators_from_arrays(arrays: dict, backend, sparsity) -> MeshOperators:
    """:class:`MeshOperators` on ``backend`` from :func:`mesh_operator_arrays`' host arrays."""
    ml = arrays["ml"]
    dir_nodes = arrays["dir_nodes"]
    ml_inv_u = np.repeat((1.0 / ml)[:, None], 3, axis=1)
    ml_inv_u[dir_nodes] = 0.0
    C, kmk, pressure = (_get_csr(arrays, name) for name in ("C", "kmk", "pressure"))
    CT = C.T.tocsr()
    nnf = None
    if "nnf.nodes" in arrays:
        nnf = NoNormalFlow(**{f: arrays[f"nnf.{f}"] for f in _NNF_FIELDS})
    return MeshOperators(
        ml=backend.to_device(ml), ml_inv_u=backend.to_device(ml_inv_u),
        C=backend.csr(*_csr_parts(C), C.shape), CT=backend.csr(*_csr_parts(CT), CT.shape),
        kmk=backend.csr(*_csr_parts(kmk), kmk.shape),
        pressure=backend.csr(*_csr_parts(pressure), pressure.shape), pressure_host=pressure,
        pin=int(arrays["pin"]), dir_nodes=backend.to_device(dir_nodes),
        dir_row_pos=backend.to_device(arrays["dir_row_pos"]),
        dir_diag_pos=backend.to_device(arrays["dir_diag_pos"]),
        detj_min=float(arrays["detj_min"]),
        dir_row_start=backend.to_device(sparsity.indptr[dir_nodes].astype(np.int32)),
        dir_row_end=backend.to_device(sparsity.indptr[dir_nodes + 1].astype(np.int32)),
        nnf=None if nnf is None else _on_backend(nnf, backend))


def _on_backend(nnf: NoNormalFlow, backend) -> NoNormalFlow:
    """``nnf`` with its arrays on the backend, frames flattened to (9·nr,) for the kernels."""
    dev = backend.to_device
    return NoNormalFlow(nodes=dev(nnf.nodes), frames=dev(nnf.frames.reshape(-1)),
                        blk_pos=dev(nnf.blk_pos), blk_row=dev(nnf.blk_row),
                        blk_col=dev(nnf.blk_col), blk_diag=dev(nnf.blk_diag),
                        diag_pos=dev(nnf.diag_pos), fixed=dev(nnf.fixed))


def _csr_parts(a: sp.csr_matrix):
    a = a.tocsr()
    a.sort_indices()
    return a.data.copy(), a.indices.astype(np.int32), a.indptr.astype(np.int32)


def _pin(a: sp.csr_matrix, node: int) -> None:
    """Replace row and column ``node`` of ``a`` (CSR, sorted, with its diagonal) by the
    identity, in place (the pinned pressure value is 0); explicit zeros are dropped (``node``
    −1: only that). The entries equal diag(d) a diag(d) + e_node e_nodeᵀ with d = 1 − e_node,
    the product the pin was first written as, value for value."""
    if node >= 0:
        lo, hi = a.indptr[node], a.indptr[node + 1]
        a.data[a.indices == node] = 0.0
        a.data[lo:hi] = 0.0
        at = lo + np.searchsorted(a.indices[lo:hi], node)
        if at >= hi or a.indices[at] != node:
            raise ValueError(f"pinned node {node}: the matrix has no diagonal entry there")
        a.data[at] = 1.0
    a.eliminate_zeros()
    a.sort_indices()
