"""How well a checkpoint's values predict outcomes on the games its search plays (`gcpipe values`).

Plays `games` self-play games whose moves a Gumbel search with the checkpoint chooses (seeds
apart from any training's, so the games are held out), and at every searched position compares
with the game's outcome: the net's value of the position (the search's leaf-value mapping:
'outcome' = (value row - pass logit) / 2, or a calibration file's logistic) and the search's own
root value after the search.  Per side to move it reports the Brier score of P(Guerrilla wins)
= (value + 1) / 2, the base rate's Brier score, and a reliability table: positions binned by
predicted probability, with the mean prediction and the observed Guerrilla win frequency.
"""
from __future__ import annotations

import numpy as np

from gcpipe.engine import COIN, GUERRILLA, NO_SIDE
from gcpipe.engine.game import MAX_GAMES_AT_ONCE, check_seed
from gcpipe.errors import UserError, check_int
from gcpipe.nn.checkpoint import load
from gcpipe.players import define
from gcpipe.search.calibration import calibrated_settings
from gcpipe.search.settings import make_settings
from gcpipe.train.expert import game_seed, play_games, search_expert   # the trainer's self-play, on held-out seeds

BINS = 10
_SEED_OFFSET = 0x5EED0000     # game seeds apart from training's (gcpipe.train.expert.game_seed)
_SIDES = {GUERRILLA: "guerrilla_to_move", COIN: "coin_to_move"}


def value_accuracy(checkpoint_path, games: int = 400, simulations: int = 32, seed: int = 1,
                   calibration=None) -> dict:

    checkpoint = load(checkpoint_path)
    if not checkpoint.has_value_head:
        raise UserError(f"checkpoint {checkpoint_path} has no value head (layout {checkpoint.layout})")
    check_int("--games", games, 1, MAX_GAMES_AT_ONCE)
    check_seed(seed)
    settings = make_settings(where="gcpipe values", simulations=simulations)
    if calibration is not None:
        settings = calibrated_settings(settings, calibration, checkpoint.sha256, "gcpipe values")
    seeds = np.array([game_seed(seed + _SEED_OFFSET, 0, j) for j in range(games)], np.uint32)
    # Self-play only (NO_SIDE): the bots of play_games' bot games play no move here.
    records = play_games(search_expert(checkpoint.net, settings), seeds, np.full(games, NO_SIDE),
                         (define("greedy", {"kind": "greedy"}),) * 2)
    report = {"checkpoint_sha256": checkpoint.sha256, "games": games, "simulations": simulations,
              "value": settings.value, "guerrilla_win_rate": float(np.mean([r.outcome > 0 for r in records]))}
    for side, label in _SIDES.items():
        net, search, won = [], [], []
        for r in records:
            rows = r.movers == side
            net.append(r.root_values[rows])
            search.append(r.search_values[rows])
            won.append(np.full(int(rows.sum()), r.outcome > 0, dtype=float))
        net, search, won = ((np.concatenate(x) + 1) / 2 if i < 2 else np.concatenate(x)
                            for i, x in enumerate((net, search, won)))
        report[label] = {"positions": int(len(won)), "brier_net_value": _brier(net, won),
                         "brier_search_value": _brier(search, won), "brier_base_rate": _brier(np.full_like(won, won.mean()), won),
                         "reliability": _reliability(net, won)}
    return report


def _brier(predicted: np.ndarray, won: np.ndarray) -> float:
    return float(np.mean((predicted - won) ** 2)) if len(won) else float("nan")


def _reliability(predicted: np.ndarray, won: np.ndarray) -> list[dict]:
    """Per probability bin with positions: its range, count, mean prediction and win frequency."""
    index = np.clip((predicted * BINS).astype(int), 0, BINS - 1)
    out = []
    for b in range(BINS):
        rows = index == b
        if rows.any():
            out.append({"low": b / BINS, "high": (b + 1) / BINS, "positions": int(rows.sum()),
                        "mean_predicted": float(predicted[rows].mean()), "observed": float(won[rows].mean())})
    return out
