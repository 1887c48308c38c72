"""numpy 2.5 removed ``np.row_stack``, which numba-cuda 0.30.4 still calls when it compiles a
kernel (docs/equations.md §7). Importing this module restores the alias; the GPU kernel module imports it
before anything is compiled."""
import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
