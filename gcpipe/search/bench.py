"""`gcpipe bench search`: search speed in self-play — every ply, one search per running game (all
games of a worker searched together), the move applied, finished games restarted.  Reported per
worker count: simulations/s (leaves the net evaluated: the root's, simulations ending in a terminal
position and decisions with one legal move are not counted) and decisions/s."""
from __future__ import annotations

import time

import numpy as np
import torch

from gcpipe.engine import NO_SIDE, GameBatch
from gcpipe.engine.game import MAX_GAMES_AT_ONCE, check_seed
from gcpipe.errors import UserError, check_int
from gcpipe.lifetime import worker_pool
from gcpipe.nn.checkpoint import HIDDEN, LAYERS, Checkpoint, load
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.search.player import SearchPlayer
from gcpipe.search.settings import SearchSettings
from gcpipe.torch_env import MAX_THREADS


def bench_search(settings: SearchSettings, games: int = 256, plies: int = 20, workers=(1, 2),
                 checkpoint: str | None = None, seed: int = 1) -> list[dict]:
    check_int("--games", games, 1, MAX_GAMES_AT_ONCE)
    check_int("--plies", plies, 1)
    if not workers:
        raise UserError("--workers names no worker count")
    for count in workers:
        check_int("--workers", count, 1, MAX_THREADS)   # processes of one thread
    check_seed(seed)
    if checkpoint is None:
        source = Checkpoint.from_model(MinGRUPolicy(HIDDEN, LAYERS, generator=torch.Generator().manual_seed(seed)))
    else:
        source = load(checkpoint)
    report = []
    for count in workers:
        tasks = [(source, settings, games, plies, seed + 7919 * w) for w in range(count)]
        started = time.perf_counter()
        if count == 1:
            results = [_selfplay(*tasks[0])]
        else:
            with worker_pool(count) as pool:
                results = pool.starmap(_selfplay, tasks)
        seconds = time.perf_counter() - started
        decisions, evaluations = (sum(part) for part in zip(*results))
        report.append({"workers": count, "games_per_worker": games, "simulations": settings.simulations,
                       "variant": settings.variant, "decisions_per_s": decisions / seconds,
                       "simulations_per_s": evaluations / seconds, "seconds": seconds})
    return report


def _selfplay(source: Checkpoint, settings: SearchSettings, games: int, plies: int, seed: int) -> tuple[int, int]:
    """Plays `plies` plies of `games` self-play games; returns the decisions searched and the leaves
    the net evaluated."""
    player = SearchPlayer(source, settings)
    player.start(games)
    batch = GameBatch(games)
    for i in range(games):
        batch.reset(i, seed + i)
    slots = np.arange(games, dtype=np.int32)
    next_seed, decisions, evaluations = seed + games, 0, 0
    for _ in range(plies):
        batch.apply(slots, player.choose(batch, slots))   # one net plays both sides: its state steps every ply
        decisions += games
        evaluations += int(player.last.evaluations.sum())
        done = np.flatnonzero(batch.winners != NO_SIDE)
        for i in done:
            batch.reset(int(i), next_seed)
            next_seed += 1
        player.new_games(done)
    return decisions, evaluations
