"""Helpers shared by the checks (``dycore validate``, ``dycore bench``, the regression run and
``scripts/gpu_check.py``): one configuration-with-backend-overrides, one array comparison, one
set of random nodal inputs."""
from __future__ import annotations

import numpy as np

__all__ = ["with_backend", "compare_arrays", "random_fields"]


def with_backend(config, **backend):
    """A copy of the validated ``config`` whose ``backend`` section has the given keys replaced
    (e.g. ``with_backend(cfg, name="gpu", assembly="atomic")``).

    Raises
    ------
    ConfigError naming the key when an override is not a valid backend setting.
    """
    from pydantic import ValidationError

    from dycore.config import Config
    from dycore.errors import ConfigError

    data = config.model_dump()
    data["backend"] = {**data["backend"], **backend}
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"backend overrides {backend}: {exc}") from None


def _ordered_bits(a: np.ndarray) -> np.ndarray:
    """float64 -> int64 whose order is the order of the floats (−0.0 and +0.0 both map to 0)."""
    i = np.ascontiguousarray(a, dtype=np.float64).view(np.int64)
    return np.where(i < 0, np.int64(np.iinfo(np.int64).min) - i, i)


def compare_arrays(ref, new) -> dict:
    """Entry-wise comparison of two float64 arrays of one shape.

    Parameters
    ----------
    ref, new : array_like, same shape, float64
        Reference (e.g. CPU) and tested (e.g. GPU, already on the host) values.

    Returns
    -------
    dict
        ``entries`` (size), ``n_differ`` (entries with ref != new, NaN vs non-NaN counted),
        ``max_abs`` max |Δ|, ``max_rel`` max |Δ| / max |ref| (max |Δ| when ref is all zero),
        ``max_ulp`` max distance in units in the last place (int; difference of the
        order-preserving int64 views of the bit patterns), ``cpu_max`` max |ref|.

    Raises
    ------
    ValueError when the shapes differ.
    """
    a = np.asarray(ref, dtype=np.float64).ravel()
    b = np.asarray(new, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    differ = (a != b) & ~(nan_a & nan_b)
    with np.errstate(invalid="ignore"):
        d = np.where(differ, np.abs(a - b), 0.0)
    scale = float(np.nanmax(np.abs(a))) if a.size and not nan_a.all() else 0.0
    max_abs = float(d.max()) if d.size else 0.0
    oa, ob = _ordered_bits(a), _ordered_bits(b)
    hi, lo = np.maximum(oa, ob).astype(np.uint64), np.minimum(oa, ob).astype(np.uint64)
    ulp = (hi - lo)[differ]                             # modulo 2**64: exact for |Δ| < 2**64
    return {"entries": int(a.size), "n_differ": int(np.count_nonzero(differ)),
            "max_abs": max_abs, "max_rel": max_abs / scale if scale > 0 else max_abs,
            "max_ulp": int(ulp.max()) if ulp.size else 0, "cpu_max": scale}


def random_fields(nnodes: int, seed: int = 0) -> dict:
    """Random nodal inputs of the assembly operators (float64 host arrays).

    Returns
    -------
    dict
        ``u_nl``, ``u_old`` (n,3) = 10 + N(0,1) [m/s]; ``c_old``, ``src``, ``c_ref``, ``p``,
        ``buoy`` (n,) N(0,1); ``sigma`` (n,) uniform in [0, 0.005) [1/s].
    """
    rng = np.random.default_rng(seed)
    n = nnodes
    return {"u_nl": 10.0 + rng.standard_normal((n, 3)), "u_old": 10.0 + rng.standard_normal((n, 3)),
            "c_old": rng.standard_normal(n), "src": rng.standard_normal(n),
            "sigma": rng.uniform(0.0, 0.005, n), "c_ref": rng.standard_normal(n),
            "p": rng.standard_normal(n), "buoy": rng.standard_normal(n)}
