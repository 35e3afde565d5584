"""Replaying a game: a ledger records each game's seed and players, not its moves, and a game is a
function of those (rules.md §8-§9), so playing it again move by move gives its actions.

`play_game` plays one game alone the way the match runner plays it, through the player protocol
(gcpipe.players) on a one-game batch: every player draws from the game's own generator, the
waiting side observes the position before each ply, COIN wins at the ply cap.  `Replay.agrees_with`
says whether a replay is the game a ledger record describes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gcpipe.engine import NO_SIDE, SIDE_NAMES, TOURNAMENT_PLY_CAP, GameBatch
from gcpipe.players import Player, from_identity

_SLOT = np.zeros(1, np.int32)


@dataclass(frozen=True)
class Replay:
    seed: int
    actions: tuple[int, ...]
    winner: str          # "guerrilla" | "coin"
    end: str             # an END_REASONS name

    @property
    def plies(self) -> int:
        return len(self.actions)

    def agrees_with(self, record: dict) -> bool:
        """Whether this is the game the ledger record describes."""
        return (self.seed, self.winner, self.plies, self.end) == (record["seed"], record["winner"],
                                                                   record["plies"], record["end"])


def play_game(guerrilla: Player, coin: Player, seed: int) -> Replay:
    """One game from the start position and generator seed `seed`; returns its actions and result."""
    players = [guerrilla.runtime(), coin.runtime()]
    games = GameBatch(1)
    games.reset(0, seed)
    for player in players:
        player.start(1)
        player.new_games(_SLOT)
    actions = []
    while games.winners[0] == NO_SIDE and games.plies[0] < TOURNAMENT_PLY_CAP:
        side = int(games.to_move[0])
        players[1 - side].observe(games, _SLOT)
        actions.append(int(players[side].choose(games, _SLOT)[0]))
        games.apply(_SLOT, actions[-1:])
    games.declare_coin_win(_SLOT, "ply_cap")     # only a game still running at the cap
    game = games.game(0)
    return Replay(seed=seed, actions=tuple(actions), winner=SIDE_NAMES[game.winner], end=game.end_reason)


def replay_record(record: dict) -> Replay:
    """The game of a ledger record, replayed with the players it names (see the module doc)."""
    return play_game(from_identity(record["guerrilla"], record["guerrilla_id"]),
                     from_identity(record["coin"], record["coin_id"]), record["seed"])
