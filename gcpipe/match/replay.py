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

from gcpipe.engine import GUERRILLA, NO_SIDE, SIDE_NAMES, TOURNAMENT_PLY_CAP, Game, GameBatch
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


@dataclass(frozen=True)
class Ply:
    """One ply of a game, read off the engine: who moved, the action, the pieces after it and what
    changed (stones placed, the coin's step, pieces captured)."""
    side: int                       # GUERRILLA 0 | COIN 1
    action: int
    stones: tuple[int, ...]         # points with a stone after the ply
    coins: tuple[int, ...]          # squares with a coin after the ply
    placed: tuple[int, ...]         # points where the Guerrilla just placed stones
    step: tuple[int, int] | None    # (from, to) squares of the coin's move
    captured: tuple[int, ...]       # the points (COIN moved) or squares (Guerrilla moved) captured
    to_move: int | None             # the side to move after the ply; None once the game is over


def plies_of(seed: int, actions) -> list[Ply]:
    """The plies of the game from seed `seed` with these actions (each legal in turn)."""
    game, out = Game(seed), []
    for action in actions:
        side = game.current_player()
        stones, coins = set(game.stones()), set(game.coins())
        game.apply_action(int(action))
        after_stones, after_coins = tuple(game.stones()), tuple(game.coins())
        if side == GUERRILLA:
            placed, step = tuple(sorted(set(after_stones) - stones)), None
            captured = tuple(sorted(coins - set(after_coins)))
        else:
            source, direction = divmod(int(action), 4)
            placed, step = (), (source, source + (-9, -7, 7, 9)[direction])
            captured = tuple(sorted(stones - set(after_stones)))
        to_move = None if game.is_terminal() else game.current_player()
        out.append(Ply(side, int(action), after_stones, after_coins, placed, step, captured, to_move))
    return out


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
