"""Dot products over GPU ranks that give the same bits on any number of GPUs.

:class:`DeviceExactReducer` is the device twin of :class:`dycore.parallel.reduce.Reducer` in its
``"exact"`` mode: each rank turns its owned products into exact integer parts on the device
(:func:`~dycore.parallel.device_kernels` ``exact_dot_parts``), the parts of all ranks are added
with one int64 NCCL all-reduce (integer addition: any order, the same integers), and each rank
rounds the exact total to float64 once (:func:`~dycore.parallel.reduce.parts_to_float`). The
value is the correctly rounded Σ x_i·y_i of the global vectors — equal to ``math.fsum`` of the
serial products and to the CPU ranks' exact reduction — so 1, 2 and 4 GPUs agree bit for bit.

Cost per call: one kernel per dot product (grid-stride, shared-memory buckets), one all-reduce
of 33.6 kB per dot product, and the rounding: on the host (:meth:`DeviceExactReducer.finish`,
one device→host copy; 234 µs a call on two H200, docs/performance.md §11) or on the device
(:meth:`DeviceExactReducer.finish_on_device`, one single-thread kernel per call and no host
traffic, so it can sit inside a captured graph).
"""
from __future__ import annotations

import numpy as np

from dycore.parallel.device_kernels import EXACT_BLOCK, NPARTS, ROUND_BLOCK, get_rank_kernels
from dycore.parallel.reduce import parts_to_float

__all__ = ["DeviceExactReducer"]


class DeviceExactReducer:
    """Exact global dot products of device vectors.

    Parameters
    ----------
    backend : GPUBackend (or its simulator); transport : NcclTransport or loopback transport
    max_dots : int — dot products one :meth:`dots` call may combine
    blocks : int — blocks of the parts kernel (grid-stride; each adds its buckets once)
    threads : int — threads per block of the parts kernel (any count gives the same integers;
        fewer keep the simulator fast)

    Attributes
    ----------
    calls : int — global reductions done (one per :meth:`dots` call)
    """

    def __init__(self, backend, transport, max_dots: int = 3, blocks: int = 264,
                 threads: int = EXACT_BLOCK):
        self.b, self.t = backend, transport
        self.k = get_rank_kernels(getattr(backend, "strict", False))
        self.parts = backend.zeros(NPARTS * int(max_dots), np.int64)
        self.values = backend.zeros(int(max_dots))
        self.max_dots, self.blocks, self.threads = int(max_dots), int(blocks), int(threads)
        self.calls = 0

    def post_dots(self, *pairs) -> None:
        """Launch the parts of each ``(x, y)`` (1-D float64 device arrays of one length, the
        owned entries only) and their all-reduce; :meth:`finish` reads the results.

        Raises
        ------
        ValueError for more pairs than ``max_dots`` or arrays of different lengths.
        """
        if len(pairs) > self.max_dots:
            raise ValueError(f"exact reducer: {len(pairs)} dot products in one call, at most "
                             f"{self.max_dots}")
        b = self.b
        self.parts[...] = 0
        for i, (x, y) in enumerate(pairs):
            if x.shape != y.shape:
                raise ValueError(f"exact reducer: dot of shapes {x.shape} and {y.shape}")
            n = int(x.shape[0])
            b.launch(self.k["exact_dot_parts"], (self.blocks, self.threads), b.nb(x), b.nb(y), n,
                     b.nb(self.parts[i * NPARTS:(i + 1) * NPARTS]))
        self._n = len(pairs)
        self.t.allreduce(self.parts[:self._n * NPARTS], "sum")
        self.calls += 1

    def finish(self) -> list[float]:
        """The correctly rounded values of the last :meth:`post_dots` (one host copy)."""
        host = np.asarray(self.b.to_host(self.parts[:self._n * NPARTS]))
        return [parts_to_float(host[i * NPARTS:(i + 1) * NPARTS]) for i in range(self._n)]

    def finish_on_device(self):
        """The correctly rounded values of the last :meth:`post_dots` as a (k,) float64 device
        array (the reducer's own, overwritten by the next call), rounded by the
        ``exact_round`` kernel (one block per dot product): the same bits as :meth:`finish`,
        no host copy."""
        b = self.b
        b.launch(self.k["exact_round"], (self._n, min(self.threads, ROUND_BLOCK)),
                 b.nb(self.parts), self._n, b.nb(self.values))
        return self.values[:self._n]

    def dots(self, *pairs) -> list[float]:
        """Σ x·y over every rank's owned entries for each pair, in one all-reduce."""
        self.post_dots(*pairs)
        return self.finish()
