"""A thread-safe ``cuda.shared.array`` for numba-cuda 0.30.4's simulator.

The simulator runs a block's threads as Python threads and gives them one NumPy array per
``cuda.shared.array`` call site, made by the first thread to get there: a dictionary look-up,
an allocation, a store — not atomic. When the interpreter switches threads between the look-up
and the store (likelier on a loaded machine and with the short switch interval the GPU ranks
set under the simulator), two threads each make an array and the one whose store is
overwritten writes into a private copy: its shared writes are lost. Seen as a block reduction
missing one thread's value — a wrong max |∇·u| of one step in one CI run of
tests/parallel/test_gpu_ranks_step.py, while every field was right — and reproduced on the
development machine as 1 launch in 300 of an 8-thread kernel summing its shared array (switch
interval 1 µs). Importing this module under the simulator makes the look-up and the store one
step under a lock (tested in tests/unit/test_cudasim_compat.py); on a GPU it does nothing.
The modules whose kernels use shared arrays import it before their kernels are built.
"""
import sys
import threading

import numpy as np
from numba import config as numba_config

_LOCK = threading.Lock()


def _install() -> None:
    if not numba_config.ENABLE_CUDASIM:
        return
    from numba.core import types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support

    shared = kernelapi.FakeCUDAShared
    if getattr(shared.array, "locked", False):
        return
    original = shared.array

    def array(self, shape, dtype, alignment=None):
        """``FakeCUDAShared.array`` with its per-call-site allocation under a lock (the same
        key: the calling line's file and line number)."""
        if alignment is not None or shape == 0:        # errors / the dynamic shared buffer
            return original(self, shape, dtype, alignment)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        frame = sys._getframe(1)
        caller = (frame.f_code.co_filename, frame.f_lineno)
        with _LOCK:
            res = self._allocations.get(caller)
            if res is None:
                res = self._allocations[caller] = np.empty(shape, dtype)
        return res

    array.locked = True
    array.original = original                      # kept for the test of the race
    shared.array = array


_install()
