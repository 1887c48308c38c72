"""Backends are values chosen once from the configuration (docs/equations.md §6): ``cpu``, ``gpu``, ``auto``.

Only :func:`select_backend` imports the GPU module, lazily, so CPU-only machines never touch CUDA.
"""
from __future__ import annotations

import logging

from dycore.errors import BackendUnavailableError, ConfigError

__all__ = ["select_backend", "gpu_usable"]

log = logging.getLogger("dycore")


def gpu_usable() -> tuple[bool, str]:
    """(True, description) when numba-cuda sees a GPU or runs its simulator, else (False, why)."""
    try:
        from numba import config as numba_config
        from numba import cuda
        if numba_config.ENABLE_CUDASIM:
            return True, "CUDA simulator"
        if not cuda.is_available():
            return False, "numba-cuda finds no CUDA device"
        name = cuda.get_current_device().name
        return True, name.decode() if isinstance(name, bytes) else str(name)
    except Exception as exc:  # pragma: no cover - depends on the machine
        return False, f"CUDA not usable: {exc}"


def select_backend(cfg):
    """Build the backend named by ``cfg`` (a BackendConfig).

    Raises
    ------
    BackendUnavailableError when ``gpu`` is asked for and no GPU is usable.
    ConfigError for an unknown name.
    """
    name = cfg.name
    if name == "auto":
        ok, why = gpu_usable()
        name = "gpu" if ok else "cpu"
        log.info("backend auto -> %s (%s)", name, why)
    if name == "cpu":
        from dycore.backend.cpu import CPUBackend
        return CPUBackend(threads=cfg.threads)
    if name == "gpu":
        ok, why = gpu_usable()
        if not ok:
            raise BackendUnavailableError(f"backend.name: gpu requested but {why}")
        from dycore.backend.gpu import gpu_backend    # SimulatorBackend under the simulator
        return gpu_backend(solver_mode=cfg.solver_mode, assembly=cfg.assembly, strict=cfg.strict,
                           threads=cfg.threads, graphs=cfg.graphs)
    raise ConfigError(f"backend.name: unknown backend '{name}' (expected cpu, gpu or auto)")
