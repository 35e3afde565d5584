"""Replaying a game: a ledger records each game's seed and players, not its moves, and a game is a
function of those (rules.md §8-§9), so playing it again move by move gives its actions.

`play_game` plays one game the way the match runner does (both players draw from the game's own
generator; a full-turn network also steps on the other side's plies; COIN wins at the ply cap) with
single-game players: `Bot`, or `NetworkBot` on one torch thread like the runner's workers.  The
runner batches networks across games, so where batching changes a network's rounding (issue 13) a
replayed net game can differ from the recorded one; `replay_record` says whether it matched.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from gcpipe.engine import Game
from gcpipe.engine.bots import TOURNAMENT_PLY_CAP, Bot
from gcpipe.engine.game import SIDE_NAMES
from gcpipe.match.players import Player, player_from_identity


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
    players = (guerrilla, coin)
    with _one_torch_thread(any(p.is_net for p in players)):
        movers = [_single_game_player(p) for p in players]
        game = Game(seed)
        actions = []
        while not game.is_terminal() and game.plies < TOURNAMENT_PLY_CAP:
            side = game.current_player()
            if players[1 - side].is_net:
                movers[1 - side].observe(game)
            action = movers[side].choose(game)
            game.apply_action(action)
            actions.append(action)
    if not game.is_terminal():
        game.declare_coin_win("ply_cap")
    return Replay(seed=seed, actions=tuple(actions), winner=SIDE_NAMES[game.winner], end=game.end_reason)


def replay_record(record: dict) -> Replay:
    """The game of a ledger record, replayed with the players it names (see the module doc)."""
    return play_game(player_from_identity(record["guerrilla"], record["guerrilla_id"]),
                     player_from_identity(record["coin"], record["coin_id"]), record["seed"])


def _single_game_player(player: Player):
    if not player.is_net:
        return Bot(player.bot)
    from gcpipe.nn.checkpoint import load
    from gcpipe.nn.player import NetworkBot, NetworkPlayer

    bot = NetworkBot(NetworkPlayer(load(player.path, expected_sha256=player.sha256), full_turn=player.full_turn))
    bot.new_game()
    return bot


@contextmanager
def _one_torch_thread(needed: bool):
    """Networks forward on one thread, as in the runner's workers (thread counts change the sums)."""
    if not needed:
        yield
        return
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
