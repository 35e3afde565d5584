"""Keeps the C heap's freed blocks for reuse in long numeric runs (training, its benchmark).

glibc's malloc maps each block above its mmap threshold on its own and unmaps it when freed, and
trims the heap's free top above a trim threshold; the next allocation of that size then faults in
fresh pages, which the kernel zeroes.  The threshold adapts (it rises to the size of a freed mapped
block, up to 32 MiB, and the trim threshold to twice that), but a PPO update allocates and frees
tensors of several MiB dozens of times per minibatch, on a machine whose memory bandwidth already
bounds it.  Fixing the mmap threshold at glibc's largest and trimming only above 1 GiB of free top
made `gcpipe bench train` 5-6 % faster (docs/experiments.md).  Values do not change: torch aligns every
CPU allocation to 64 bytes wherever it comes from.  Elsewhere than glibc this does nothing."""
from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3          # glibc's malloc.h
MMAP_THRESHOLD = 32 << 20                            # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit)
TRIM_THRESHOLD = 1 << 30


def keep_freed_blocks() -> bool:
    """Sets the thresholds; False where the C library has no glibc mallopt (nothing changed)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
