"""How a checkpoint's value outputs map to win probabilities, measured on its own games and stored.

A PPO-trained file's value rows estimate discounted, shaped returns, not outcomes: over its own
self-play games the Guerrilla row of gcpipe's default candidate averages +0.20 when the Guerrilla
wins and +0.01 when it loses.  A search needs P(Guerrilla wins).  `calibrate` plays `games`
self-play games with the network (sampled moves as in matches, rules.md §9; one recurrent state
per game, since both sides are the same net on the same observations), records at every ply
x = (value row, pass logit, [Guerrilla to move], 1) and the outcome, and fits a logistic regression
P(Guerrilla wins) = sigmoid(w . x) on the first 80 % of the games (maximum likelihood, scipy).  The
other 20 % are held out: the record gives the Brier score there of the fit and of the raw
'outcome' mapping (value row - pass logit) / 2, per side to move.  Search players read the file
with `value: calibrated` (the checkpoint's SHA-256 must match).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from gcpipe.engine import GUERRILLA, NO_SIDE, NUM_ACTIONS, PASS_ACTION, GameBatch
from gcpipe.engine.game import MAX_GAMES_AT_ONCE, check_seed
from gcpipe.errors import UserError, check_int
from gcpipe.io import atomic_write_json, check_output_file, read_text
from gcpipe.nn.checkpoint import load
from gcpipe.nn.inference import OUTPUTS, CompiledNet
from gcpipe.search.settings import SearchSettings, make_settings

HELD_OUT = 0.2
_VALUE_ROW, _PASS_ROW = NUM_ACTIONS, PASS_ACTION


def selfplay_values(net: CompiledNet, games: int, seed: int, slots: int = 256) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features [positions, 4], game index [positions] and outcome per game (+1 Guerrilla won)."""
    slots = min(slots, games)
    batch, states = GameBatch(slots), net.new_states(slots)
    out = np.zeros((slots, OUTPUTS), np.float32)
    slot_game = np.full(slots, -1, np.int64)
    features, owners, outcomes = [], [], np.zeros(games)
    next_game = 0

    def start(free):
        nonlocal next_game
        for slot in free:
            if next_game < games:
                batch.reset(int(slot), (seed * 1_000_003 + next_game) % 2**32 | 1)
                states[slot] = 0.0
                slot_game[slot] = next_game
                next_game += 1

    start(range(slots))
    while (active := np.flatnonzero(slot_game >= 0).astype(np.int32)).size:
        obs, _ = batch.observe(active)
        rows = out[:len(active)]
        net.step(states, active, obs, rows)
        guerrilla = (batch.to_move[active] == GUERRILLA).astype(np.float32)
        features.append(np.stack([rows[:, _VALUE_ROW], rows[:, _PASS_ROW], guerrilla, np.ones_like(guerrilla)], 1))
        owners.append(slot_game[active].copy())
        batch.apply(active, batch.sample(active, rows[:, :NUM_ACTIONS]))
        winners = batch.winners[active]
        finished = active[winners != NO_SIDE]
        outcomes[slot_game[finished]] = np.where(winners[winners != NO_SIDE] == GUERRILLA, 1.0, -1.0)
        slot_game[finished] = -1
        start(finished)
    return np.concatenate(features), np.concatenate(owners), outcomes


def fit_logistic(x: np.ndarray, won: np.ndarray) -> np.ndarray:
    """Maximum-likelihood weights w of P(won) = sigmoid(x . w), by L-BFGS on the exact gradient."""
    def loss(w):
        z = x @ w
        nll = np.sum(np.logaddexp(0.0, z) - won * z)
        return nll, x.T @ (1.0 / (1.0 + np.exp(-z)) - won)

    return minimize(loss, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B").x


def calibrate(checkpoint_path, games: int = 3000, seed: int = 1) -> dict:
    checkpoint = load(checkpoint_path)
    if not checkpoint.has_value_head:
        raise UserError(f"checkpoint {checkpoint_path} has no value head to calibrate (layout {checkpoint.layout})")
    check_int("--games", games, 10, MAX_GAMES_AT_ONCE)   # a fifth is held out: at least 2 games
    check_seed(seed)
    x, owner, outcome = selfplay_values(CompiledNet.from_arrays(checkpoint.net), games, seed)
    won = (outcome[owner] > 0).astype(np.float64)
    train = owner < round((1 - HELD_OUT) * games)
    weights = fit_logistic(x[train].astype(np.float64), won[train])
    held = ~train
    fitted = 1.0 / (1.0 + np.exp(-(x[held] @ weights)))
    raw = (np.clip((x[held, 0] - x[held, 1]) / 2, -1.0, 1.0) + 1) / 2
    brier = {}
    for label, side in (("guerrilla_to_move", 1.0), ("coin_to_move", 0.0)):
        rows = x[held, 2] == side
        brier[label] = {"calibrated": float(np.mean((fitted[rows] - won[held][rows]) ** 2)),
                        "outcome_mapping": float(np.mean((raw[rows] - won[held][rows]) ** 2)),
                        "base_rate": float(np.mean((won[train].mean() - won[held][rows]) ** 2))}
    return {"checkpoint_sha256": checkpoint.sha256, "games": games, "seed": seed, "positions": int(len(x)),
            "held_out_games": games - int(round((1 - HELD_OUT) * games)),
            "guerrilla_win_rate": float((outcome > 0).mean()), "value_squash": "logistic",
            "value_coef": [float(w) for w in weights], "brier_held_out": brier}


def write_calibration(checkpoint_path, out, games: int = 3000, seed: int = 1) -> dict:
    if Path(out).is_dir():
        raise UserError(f"calibration file {out} is a folder; give a .json file")
    if Path(out).exists() and Path(checkpoint_path).exists() and Path(out).samefile(checkpoint_path):
        raise UserError(f"--out {out} is the checkpoint itself; give another file for the calibration")
    check_output_file(out)   # before the games
    record = calibrate(checkpoint_path, games, seed)
    atomic_write_json(out, record)
    return record


def calibrated_settings(settings: SearchSettings, calibration_path, checkpoint_sha256: str, where: str) -> SearchSettings:
    """`settings` with the value coefficients of a calibration file made for this checkpoint."""
    try:
        record = json.loads(read_text(calibration_path))
        coef, squash, sha = record["value_coef"], record["value_squash"], record["checkpoint_sha256"]
    except FileNotFoundError:
        raise UserError(f"{where}: calibration file {calibration_path} does not exist (make it with "
                        f"gcpipe calibrate)") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"{where}: {calibration_path} is not a calibration file ({error})") from None
    if not isinstance(sha, str) or not isinstance(coef, list):
        raise UserError(f"{where}: {calibration_path} is not a calibration file (checkpoint_sha256 must be a string "
                        f"and value_coef a list)")
    if sha != checkpoint_sha256:
        raise UserError(f"{where}: {calibration_path} calibrates checkpoint {sha[:12]}..., not this one "
                        f"({checkpoint_sha256[:12]}...)")
    values = {k: v for k, v in settings.identity().items() if k not in ("value", "value_squash", "value_coef")}
    try:   # the player's own settings were checked already: a problem here is the file's
        return make_settings(where="its record", value="calibrated", value_squash=squash, value_coef=tuple(coef),
                             **values)
    except UserError as problem:
        raise UserError(f"{where}: {calibration_path} is not a calibration file ({problem})") from None
