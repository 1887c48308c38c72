"""Tracer-operator CSR matrix + right-hand-side assembly variants (the paper's Table 6).

- GPU atomic + lookup table: the production tracer kernel (:mod:`dycore.backend.gpu_loops`,
  generated from the loop table :data:`dycore.assembly.loops.ASSEMBLY`; mode ``ATOMIC``), the
  nonzero position of (tets[e,i], tets[e,j]) read from ``lookup``.
- GPU atomic + binary search: the same kernel in mode ``SEARCH``, the position found by
  :func:`dycore.assembly.csr_search.csr_find` in the sorted CSR row instead.
- GPU deterministic: the production kernel in mode ``ELEMENTS`` + the gather by nonzero.
- CPU: the generated ``@njit(parallel=True)`` element loop (:mod:`dycore.assembly.cpu_loops`) +
  gather (:mod:`dycore.assembly.gather`).
"""
from __future__ import annotations

import numpy as np

from dycore.assembly.csr_search import csr_find, lookup_by_search

__all__ = ["csr_find", "lookup_by_search", "tracer_inputs"]


def tracer_inputs(nnodes: int, seed: int = 0) -> dict:
    """Random nodal inputs of the tracer operator (as in scripts/gpu_check.py).

    Returns
    -------
    dict
        ``u_nl`` (n,3) [m/s], ``c_old``, ``src``, ``sigma`` (0..0.005 1/s), ``c_ref`` (n,), plus
        ``kdiag`` = (5, 5, 1) m^2/s and ``dt_theta`` = 5 s.
    """
    rng = np.random.default_rng(seed)
    return {"u_nl": 10.0 + rng.standard_normal((nnodes, 3)), "c_old": rng.standard_normal(nnodes),
            "src": rng.standard_normal(nnodes), "sigma": rng.uniform(0.0, 0.005, nnodes),
            "c_ref": rng.standard_normal(nnodes), "kdiag": (5.0, 5.0, 1.0), "dt_theta": 5.0}
