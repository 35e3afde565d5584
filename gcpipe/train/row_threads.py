"""Runs the training path's C kernels over the rows of a batch on the training's threads.

cffi releases the GIL, so the parts run at once; the kernels' rows are independent, so the split
changes no bit.  A kernel must not call run_rows itself: the pool's threads would wait on work
queued behind them."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import torch


class _RowThreads:
    """A pool of torch.get_num_threads() - 1 threads; the caller's thread runs the first part."""

    def __init__(self):
        self.pool: ThreadPoolExecutor | None = None
        self.size = 0
        self.lock = threading.Lock()
        # A forked child has the pool object but none of its threads: it makes its own.
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self.pool, self.size, self.lock = None, 0, threading.Lock()

    def run(self, kernel, rows: int) -> None:
        parts = max(1, min(torch.get_num_threads(), rows))
        bounds = [rows * i // parts for i in range(parts + 1)]
        with self.lock:
            if parts > 1 and self.size < parts - 1:
                if self.pool is not None:
                    self.pool.shutdown(wait=False)       # (its queued work still runs)
                self.pool, self.size = ThreadPoolExecutor(parts - 1, thread_name_prefix="gcpipe-rows"), parts - 1
            others = [self.pool.submit(kernel, bounds[i], bounds[i + 1]) for i in range(1, parts)]
        try:
            kernel(bounds[0], bounds[1])
        finally:                             # the others write into the caller's tensors: wait for them
            for part in others:
                part.result()


_row_threads = _RowThreads()


def run_rows(kernel, rows: int) -> None:
    """kernel(first, end) over the rows [0, rows), split among torch's threads."""
    _row_threads.run(kernel, rows)
