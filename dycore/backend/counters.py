"""Counts of what a run issues to the device: launches, graph replays, host syncs, allocations."""
from __future__ import annotations

import weakref

__all__ = ["Counters"]


class Counters:
    """What the program issues, counted where it is issued (not estimated).

    Attributes
    ----------
    launches : numba kernel launches issued from Python through :meth:`GPUBackend.launch`
        (kernels inside a graph replay are not counted here)
    graph_replays : CUDA-graph launches; graph_kernels : kernels those replays ran
    syncs : host waits on the device (stream synchronize, device→host copies, scalar reads)
    allocations : CuPy memory-pool allocations (a ``cupy.cuda.MemoryHook``), GPU only
    halo_exchanges, halo_bytes : device halo exchanges a GPU rank posted and the bytes of
        float64 values it sent in them
        (:class:`~dycore.parallel.device_halo.DeviceHaloExchange`), those inside a captured
        graph counted at each replay (:class:`~dycore.backend.graphs.Graph`)
    halo_packs : those exchanges that packed their values into a send buffer first (a pack
        kernel; the others sent from the vector itself), counted the same way
    """

    FIELDS = ("launches", "graph_replays", "graph_kernels", "syncs", "allocations",
              "halo_exchanges", "halo_bytes", "halo_packs")
    #: the fields a captured graph adds at each replay (what its capture counted)
    REPLAYED = ("halo_exchanges", "halo_bytes", "halo_packs")

    def __init__(self):
        for f in self.FIELDS:
            setattr(self, f, 0)

    def snapshot(self) -> dict:
        return {f: getattr(self, f) for f in self.FIELDS}

    def watch_cupy_allocations(self) -> None:
        """Count every CuPy memory-pool allocation of this process from now on.

        One CuPy memory hook is installed per process (CuPy refuses two hooks of one name);
        it adds to every :class:`Counters` that asked, for as long as that object lives."""
        _WATCHERS.add(self)
        global _HOOK
        if _HOOK is not None:
            return
        from cupy.cuda import memory_hook

        class _Count(memory_hook.MemoryHook):
            name = "dycore-counter"

            def malloc_preprocess(self, **kwargs):
                for c in list(_WATCHERS):
                    c.allocations += 1

        _HOOK = _Count()
        _HOOK.__enter__()        # stays installed for the life of the process


_WATCHERS: "weakref.WeakSet[Counters]" = weakref.WeakSet()
_HOOK = None
