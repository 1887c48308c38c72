"""Global dot products and norms over owned values: three reduction modes.

- ``"exact"`` (default): the correctly rounded sum of the rounded products, the same bits on
  any number of ranks and any partition. Each rank splits its products p = f·2^e (``frexp``,
  f·2^53 an integer below 2^53) into a high and a low 26/27-bit integer half and adds them per
  exponent (``bincount``: every partial sum is an integer below 2^53, exact in float64 for up
  to 2^26 products per exponent); the per-exponent integer sums are added across ranks with an
  int64 ``Allreduce`` (integer addition is associative: any reduction order gives the same
  integers) and every rank turns the exact total into the nearest float64 with Python's
  correctly rounded big-integer division. The result equals ``math.fsum(x * y)`` of the whole
  vectors (Shewchuk 1997, the algorithm of ``math.fsum``), so it is also the serial value.
  Cost: one Allreduce of 2·2098 + 3 int64 per product (33.6 kB).
- ``"ordered"``: a local ``np.dot`` per rank, the partials gathered (``allgather``) and summed
  in rank order: the same bits run to run for a fixed rank count, not across rank counts.
- ``"allreduce"``: local ``np.dot`` + ``MPI.SUM`` Allreduce (the MPI library's order).

``comm=None`` runs serially (no MPI import): the tests and one-rank runs use it.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["MODES", "Reducer", "exact_parts", "exact_sum", "parts_to_float"]

MODES = ("exact", "ordered", "allreduce")

_EMIN, _EMAX = -1073, 1024                 # frexp exponents of float64 (subnormals included)
_NB = _EMAX - _EMIN + 1
_SPLIT = 2.0 ** 26
_MANT = 2.0 ** 53
#: products per exponent bucket for which the float64 bucket sums stay exact
MAX_TERMS = 2 ** 26


def exact_parts(p: np.ndarray) -> np.ndarray:
    """Exact integer representation of sum(p) (p float64, any shape).

    Returns
    -------
    parts : (2·2098 + 3,) int64 — per-exponent sums of the high and low mantissa halves, then
        the counts of NaN, +inf and −inf. Parts of disjoint arrays add (as integers) to the
        parts of their union.

    Raises
    ------
    ValueError if p has more than 2^26 entries (a bucket sum could round).
    """
    p = np.asarray(p, np.float64).ravel()
    if p.size > MAX_TERMS:
        raise ValueError(f"exact_parts: {p.size} terms > {MAX_TERMS}; split the vector")
    out = np.zeros(2 * _NB + 3, np.int64)
    finite = np.isfinite(p)
    if not finite.all():
        bad = p[~finite]
        out[2 * _NB:] = (np.isnan(bad).sum(), (bad == np.inf).sum(), (bad == -np.inf).sum())
        p = p[finite]
    f, e = np.frexp(p)
    m = f * _MANT                              # exact integers, |m| < 2^53
    hi = np.trunc(m / _SPLIT)                  # |hi| < 2^27
    lo = m - hi * _SPLIT                       # |lo| < 2^26, exact
    b = e - _EMIN
    out[:_NB] = np.bincount(b, weights=hi, minlength=_NB)
    out[_NB:2 * _NB] = np.bincount(b, weights=lo, minlength=_NB)
    return out


def parts_to_float(parts: np.ndarray) -> float:
    """The float64 nearest to the exact sum represented by ``parts`` (ties to even).

    NaN if any NaN or both infinities were summed; ±inf if one infinity was, or if the exact
    finite sum overflows float64.
    """
    nan, pinf, ninf = (int(v) for v in parts[2 * _NB:])
    if nan or (pinf and ninf):
        return math.nan
    if pinf or ninf:
        return math.inf if pinf else -math.inf
    hi, lo = parts[:_NB], parts[_NB:2 * _NB]
    nz = np.flatnonzero((hi != 0) | (lo != 0))
    total = 0
    for b in nz.tolist():                     # value = (hi·2^26 + lo)·2^(b + EMIN − 53)
        total += ((int(hi[b]) << 26) + int(lo[b])) << b
    if total == 0:
        return 0.0
    try:
        return total / (1 << (53 - _EMIN))      # correctly rounded int / int
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def exact_sum(p: np.ndarray) -> float:
    """Correctly rounded sum of a float64 array (= ``math.fsum``), serially."""
    return parts_to_float(exact_parts(p))


class Reducer:
    """Global reductions over the ranks of ``comm`` (or serial when ``comm`` is None).

    Parameters
    ----------
    comm : mpi4py communicator or None
    mode : "exact" | "ordered" | "allreduce" (module docstring)

    Attributes
    ----------
    calls : int — number of global reductions done (each one Allreduce / allgather; one
        :meth:`dots` call is one reduction)

    Raises
    ------
    ValueError for an unknown mode.
    """

    def __init__(self, comm=None, mode: str = "exact"):
        if mode not in MODES:
            raise ValueError(f"reduction mode must be one of {MODES}, got {mode!r}")
        self.comm, self.mode = comm, mode
        self.calls = 0

    def dot(self, x: np.ndarray, y: np.ndarray) -> float:
        """Σ x_i y_i over all ranks' owned values (x, y: same-shape float64 arrays)."""
        return self.dots((x, y))[0]

    def dots(self, *pairs) -> list[float]:
        """Several dot products in ONE global reduction: ``dots((x1, y1), (x2, y2))``.

        Each value is the one :meth:`dot` gives (the same bits); only the messages are shared.
        """
        self.calls += 1
        prods = [np.asarray(x).ravel() * np.asarray(y).ravel() if self.mode == "exact"
                 else float(np.dot(np.asarray(x).ravel(), np.asarray(y).ravel()))
                 for x, y in pairs]
        serial = self.comm is None or self.comm.size == 1
        if self.mode == "exact":
            parts = np.concatenate([exact_parts(p) for p in prods])
            if not serial:
                from mpi4py import MPI
                total = np.empty_like(parts)
                self.comm.Allreduce(parts, total, op=MPI.SUM)
                parts = total
            return [parts_to_float(c) for c in np.split(parts, len(prods))]
        if serial:
            return prods
        if self.mode == "ordered":
            out = [0.0] * len(prods)
            for values in self.comm.allgather(prods):          # rank order
                for i, v in enumerate(values):
                    out[i] += v
            return out
        from mpi4py import MPI
        total = np.empty(len(prods))
        self.comm.Allreduce(np.array(prods), total, op=MPI.SUM)
        return [float(v) for v in total]

    def norm(self, x: np.ndarray) -> float:
        """Euclidean norm over all ranks: sqrt(dot(x, x))."""
        return math.sqrt(self.dot(x, x))

    def max(self, value: float) -> float:
        """Global maximum of a per-rank float (exact in any order)."""
        if self.comm is None or self.comm.size == 1:
            return float(value)
        from mpi4py import MPI
        self.calls += 1
        return float(self.comm.allreduce(float(value), op=MPI.MAX))
