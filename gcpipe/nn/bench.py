"""`gcpipe bench net`: throughput of batched network play — per ply, observe every game, run the
networks (the C step, one thread per process), sample and apply the moves in C, restart finished
games.  Two NetworkPlayers (one per side) as in a match; actor-only steps each game's mover only,
full-turn also the waiting net (state only, no outputs).  With W workers, W processes each play
games/W games at once, as the match runner's workers do."""
from __future__ import annotations

import time

import numpy as np
import torch

from gcpipe.engine import GUERRILLA, NO_SIDE, GameBatch
from gcpipe.engine.game import MAX_GAMES_AT_ONCE, check_seed
from gcpipe.errors import check_int
from gcpipe.lifetime import worker_pool
from gcpipe.nn.checkpoint import HIDDEN, LAYERS, Checkpoint, load
from gcpipe.nn.inference import best_simd
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.nn.player import NetworkPlayer
from gcpipe.torch_env import MAX_THREADS

def bench_net(games: int = 4096, plies: int = 300, workers: int = 1, full_turn: bool = False,
              checkpoint: str | None = None, seed: int = 1, warmup: int = 10, simd: str = "best") -> dict:
    """Plays `plies` plies in each of `games` concurrent games (split over `workers` processes) and
    returns the rate in game-steps/s (one game advanced by one ply), the network's share of the
    time and the floating-point rate of its dense products."""
    check_int("--games", games, 1, MAX_GAMES_AT_ONCE)
    check_int("--plies", plies, 1)
    check_int("--workers", workers, 1, min(games, MAX_THREADS))   # processes of one thread, each with games
    check_int("warmup", warmup, 0)
    check_seed(seed)
    if checkpoint is None:
        model = MinGRUPolicy(HIDDEN, LAYERS, generator=torch.Generator().manual_seed(seed)).eval()
        source = Checkpoint.from_model(model)
    else:
        source = load(checkpoint)
    shares = [games // workers + (w < games % workers) for w in range(workers)]
    tasks = [(source, share, plies, full_turn, seed + w * 1_000_003, warmup, simd) for w, share in enumerate(shares)]
    if workers == 1:
        results = [_play(*tasks[0])]
    else:
        with worker_pool(workers) as pool:
            results = pool.starmap(_play, tasks)
    seconds = max(r["seconds"] for r in results)
    net_seconds = sum(r["network_seconds"] for r in results)
    forwards, advances = sum(r["forwards"] for r in results), sum(r["advances"] for r in results)
    # Dense multiply-adds: the MinGRU projections on every step, the decoder on steps with outputs;
    # not the encoder, whose zero inputs the C step skips.
    _, *projections, (decoder_in, decoder_out) = source.model.matrix_shapes()
    recurrent_macs = sum(inputs * outputs for inputs, outputs in projections)
    return {"games": games, "plies": plies, "workers": workers, "simd": best_simd() if simd == "best" else simd,
            "mode": "full-turn" if full_turn else "actor-only",
            "game_steps_per_s": games * plies / seconds, "seconds": seconds,
            "network_share": net_seconds / sum(r["seconds"] for r in results),
            "network_gflops_per_worker": 2e-9 * (forwards * (recurrent_macs + decoder_in * decoder_out)
                                                 + advances * recurrent_macs) / net_seconds,
            "games_finished": sum(r["games_finished"] for r in results)}


def _play(source: Checkpoint, games: int, plies: int, full_turn: bool, seed: int, warmup: int, simd: str) -> dict:
    players = [NetworkPlayer(source, full_turn=full_turn, simd=simd) for _ in range(2)]
    for player in players:
        player.start(games)
    batch = GameBatch(games)
    next_seed = seed
    for i in range(games):
        batch.reset(i, next_seed)
        next_seed += 1
    all_games = np.arange(games, dtype=np.int32)
    net_seconds = 0.0
    finished = forwards = advances = 0
    for ply in range(warmup + plies):
        if ply == warmup:
            net_seconds = 0.0
            finished = forwards = advances = 0
            started = time.perf_counter()
        obs, _ = batch.observe(all_games)
        guerrilla_moves = batch.to_move == GUERRILLA
        movers = [np.flatnonzero(guerrilla_moves).astype(np.int32), np.flatnonzero(~guerrilla_moves).astype(np.int32)]
        t1 = time.perf_counter()
        if full_turn:
            # Each net also steps on the games where the other side moves (no outputs needed there).
            for player, waiting in zip(players, movers[::-1]):
                player.advance(waiting, obs[waiting])
            advances += games
        logits = [player.forward(side_games, obs[side_games]) for player, side_games in zip(players, movers)]
        forwards += games
        net_seconds += time.perf_counter() - t1
        for side_games, side_logits in zip(movers, logits):
            batch.apply(side_games, batch.sample(side_games, side_logits))
        done = np.flatnonzero(batch.winners != NO_SIDE)
        for i in done:
            batch.reset(int(i), next_seed)
            next_seed += 1
        for player in players:
            player.reset(done)
        finished += len(done)
    return {"seconds": time.perf_counter() - started, "network_seconds": net_seconds, "forwards": forwards,
            "advances": advances, "games_finished": finished}
