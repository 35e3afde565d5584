"""`gcpipe bench net`: throughput of batched network play — per ply, observe every game, run the
networks, sample and apply the moves in C, restart finished games.  Two NetworkPlayers (one per
side) as in a match; actor-only steps each game's mover only, full-turn also the waiting net."""
from __future__ import annotations

import time

import numpy as np
import torch

from gcpipe.engine import GameBatch
from gcpipe.errors import UserError
from gcpipe.nn.checkpoint import HIDDEN, LAYERS, Checkpoint, load
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.nn.player import NetworkPlayer

_GUERRILLA_TO_MOVE = 1   # gc_state.to_move: 1 Guerrilla, 2 COIN


def bench_net(games: int = 4096, plies: int = 300, threads: int = 2, full_turn: bool = False,
              checkpoint: str | None = None, seed: int = 1, warmup: int = 10) -> dict:
    """Plays `plies` plies in each of `games` concurrent games and returns the rate in game-steps/s
    (one game advanced by one ply), with the time split between the networks and the engine."""
    if games <= 0 or plies <= 0 or threads <= 0 or warmup < 0:
        raise UserError("games, plies and threads must be positive and warmup not negative")
    torch.set_num_threads(threads)
    if checkpoint is None:
        model = MinGRUPolicy(HIDDEN, LAYERS, generator=torch.Generator().manual_seed(seed)).eval()
        source = Checkpoint.from_model(model)
    else:
        source = load(checkpoint)
    players = [NetworkPlayer(source, full_turn=full_turn) for _ in range(2)]
    for player in players:
        player.start(games)
    batch = GameBatch(games)
    next_seed = seed
    for i in range(games):
        batch.reset(i, next_seed)
        next_seed += 1
    all_games = np.arange(games, dtype=np.int32)
    net_seconds = engine_seconds = 0.0
    finished = 0
    for ply in range(warmup + plies):
        if ply == warmup:
            net_seconds = engine_seconds = 0.0
            finished = 0
            started = time.perf_counter()
        t0 = time.perf_counter()
        obs, _ = batch.observe(all_games)
        guerrilla_moves = batch.states["to_move"] == _GUERRILLA_TO_MOVE
        movers = [np.flatnonzero(guerrilla_moves).astype(np.int32), np.flatnonzero(~guerrilla_moves).astype(np.int32)]
        t1 = time.perf_counter()
        if full_turn:
            # Both nets step on every game; each game's mover's logits are the ones sampled from.
            logits = [player.forward(all_games, obs)[side_games] for player, side_games in zip(players, movers)]
        else:
            logits = [player.forward(side_games, obs[side_games]) for player, side_games in zip(players, movers)]
        t2 = time.perf_counter()
        for side_games, side_logits in zip(movers, logits):
            batch.sample_apply(side_games, side_logits)
        done = np.flatnonzero(batch.states["winner"])
        for i in done:
            batch.reset(int(i), next_seed)
            next_seed += 1
        for player in players:
            player.reset(done)
        finished += len(done)
        t3 = time.perf_counter()
        net_seconds += t2 - t1
        engine_seconds += (t1 - t0) + (t3 - t2)
    elapsed = time.perf_counter() - started
    return {"games": games, "plies": plies, "threads": threads, "mode": "full-turn" if full_turn else "actor-only",
            "game_steps_per_s": games * plies / elapsed, "seconds": elapsed, "network_seconds": net_seconds,
            "engine_seconds": engine_seconds, "games_finished": finished}
