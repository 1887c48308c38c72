"""Path helpers below the writers and the data-safety checks (no dycore imports)."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["same_file"]


def same_file(a: str | Path, b: str | Path) -> bool:
    """True when ``a`` and ``b`` are one file: the same resolved path, or (both existing) the
    same device and inode (hard links)."""
    try:
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)
    except OSError:
        return False
