"""Tracer-operator CSR matrix + right-hand-side assembly variants (the paper's Table 6).

- GPU atomic + lookup table: the production tracer kernel (:mod:`dycore.backend.gpu_loops_gen`,
  generated from the loop table :data:`dycore.assembly.loops.ASSEMBLY`; mode ``ATOMIC``), the
  nonzero position of (tets[e,i], tets[e,j]) read from ``lookup``.
- GPU atomic + binary search: the same kernel in mode ``SEARCH``, the position found by
  :func:`dycore.assembly.csr_search.csr_find` in the sorted CSR row instead.
- GPU deterministic: the production kernel in mode ``ELEMENTS`` + the gather by nonzero.
- CPU: the generated ``@njit(parallel=True)`` element loop (:mod:`dycore.assembly.cpu_loops_gen`) +
  gather (:mod:`dycore.assembly.gather`).
"""
from __future__ import annotations

from dycore.assembly.csr_search import csr_find, lookup_by_search
from dycore.checks.common import random_fields

__all__ = ["csr_find", "lookup_by_search", "tracer_inputs"]


def tracer_inputs(nnodes: int, seed: int = 0) -> dict:
    """Random nodal inputs of the tracer operator (:func:`dycore.checks.common.random_fields`,
    as in scripts/gpu_check.py).

    Returns
    -------
    dict
        ``u_nl`` (n,3) [m/s], ``c_old``, ``src``, ``sigma`` (0..0.005 1/s), ``c_ref`` (n,), plus
        ``kdiag`` = (5, 5, 1) m^2/s and ``dt_theta`` = 5 s.
    """
    f = random_fields(nnodes, seed)
    return {k: f[k] for k in ("u_nl", "c_old", "src", "sigma", "c_ref")} | {
        "kdiag": (5.0, 5.0, 1.0), "dt_theta": 5.0}
