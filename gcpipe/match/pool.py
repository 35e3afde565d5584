"""The worker processes of a match: the games of a cell in tasks, played in parallel, returned in
game order.  Each worker builds both players' runtimes once and plays its tasks through
gcpipe.players.play_games; a game depends on its seed only, so results do not depend on the
number of workers or on how games are grouped into tasks."""
from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator

import numpy as np

from gcpipe.engine.bots import GameResults
from gcpipe.lifetime import worker_pool
from gcpipe.players import Player, play_games
from gcpipe.players.games import DEFAULT_SLOTS
from gcpipe.torch_env import torch_threads


def usable_cores() -> int:
    """The cores this process may run on: the default worker count (and the Snakefile's budget)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def play_in_tasks(guerrilla: Player, coin: Player, games: np.ndarray, seeds: np.ndarray,
                  workers: int) -> Iterator[tuple[np.ndarray, GameResults]]:
    """Plays game games[k] with seed seeds[k] for every k; yields (game indices, results) per
    task, in game order."""
    size = _task_size(guerrilla, coin, len(games), workers)
    tasks = [(games[i:i + size], seeds[i:i + size]) for i in range(0, len(games), size)]
    slots = min(DEFAULT_SLOTS, size)
    workers = min(workers, len(tasks))
    if workers <= 1:
        cell = _Cell(guerrilla, coin, slots)
        # One torch thread while games are played here, as in a worker (a worker is one core; the pool
        # supplies the parallelism).
        with torch_threads(1):
            yield from map(cell.play_task, tasks)
        return
    # fork: workers start in milliseconds (each limits torch to one thread before any torch work,
    # see _init_worker).
    with worker_pool(workers, _init_worker, (guerrilla, coin, slots)) as pool:
        yield from pool.imap(_play_task, tasks)


def _task_size(guerrilla: Player, coin: Player, n_games: int, workers: int) -> int:
    """Games per task: the smaller of what the two kinds suit (one at a time for MCTS, whose games
    take seconds, so every finished game reaches the ledger soon and workers stay evenly busy) and
    an even share per worker."""
    limit = min(guerrilla.task_games, coin.task_games)
    return max(1, min(limit, math.ceil(n_games / max(1, workers))))


class _Cell:
    """The two runtimes of a cell in this process, reused for every task."""

    def __init__(self, guerrilla: Player, coin: Player, slots: int):
        self.guerrilla, self.coin, self.slots = guerrilla.runtime(), coin.runtime(), slots

    def play_task(self, task):
        games, seeds = task
        return games, play_games(self.guerrilla, self.coin, seeds, self.slots)


_worker_cell: _Cell | None = None


def _init_worker(guerrilla: Player, coin: Player, slots: int) -> None:
    global _worker_cell
    # One thread before any torch work: a forked child must not enter the parent's OpenMP pool.
    _one_torch_thread()
    _worker_cell = _Cell(guerrilla, coin, slots)
    _one_torch_thread()   # in case building the runtimes loaded torch only now (spawn)


def _one_torch_thread() -> None:
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _play_task(task):
    return _worker_cell.play_task(task)
