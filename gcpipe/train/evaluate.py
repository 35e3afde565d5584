"""The periodic evaluation of training: the current policy against a built-in bot from one side,
played through the player protocol like any match (moves sampled in C with each game's own
generator, tournament ply cap), the policy stepping on its own turns only."""
from __future__ import annotations

import numpy as np

from gcpipe.engine import GUERRILLA
from gcpipe.nn.checkpoint import Checkpoint
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.nn.player import NetworkPlayer
from gcpipe.players import parse_spec, play_games
from gcpipe.players.network import NetPlayer


def win_rate(policy: MinGRUPolicy, *, side: int, games: int, seed: int, opponent: str = "greedy") -> float:
    """Fraction of `games` games won by `policy` playing `side` (GUERRILLA or COIN) against the
    player `opponent` (a short spec).  Game seeds are drawn from `seed`."""
    net = NetPlayer(NetworkPlayer(Checkpoint.from_model(policy), full_turn=False))
    bot = parse_spec(opponent).runtime()
    seeds = np.random.default_rng(seed).integers(1, 2**32, size=games, dtype=np.uint32)
    players = (net, bot) if side == GUERRILLA else (bot, net)
    results = play_games(*players, seeds, slots=games)
    return float(np.mean(results.winners == side))
