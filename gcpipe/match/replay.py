"""Replaying a game: a ledger records each game's seed and players, not its moves, and a game is a
function of those (rules.md §8-§9), so playing it again move by move gives its actions.

`play_game` plays one game the way the match runner does (every player draws from the game's own
generator; a full-turn network, or a search player, also steps on the position the other side is
about to play; COIN wins at the ply cap) with single-game players: `Bot`, `NetworkBot`, and search
and OpenSpiel players (the batched protocol) over a one-game batch that mirrors the game.
`Replay.agrees_with` says whether a replay is the game a ledger record describes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gcpipe.engine import Game, GameBatch
from gcpipe.engine.bots import TOURNAMENT_PLY_CAP, Bot
from gcpipe.engine.game import SIDE_NAMES
from gcpipe.match.players import AGENT_KINDS, Player, make_agent, player_from_identity


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
    game = Game(seed)
    movers = [single_game_player(p, seed) for p in (guerrilla, coin)]
    actions = []
    while not game.is_terminal() and game.plies < TOURNAMENT_PLY_CAP:
        side = game.current_player()
        movers[1 - side].observe(game)
        action = movers[side].choose(game)
        game.apply_action(action)
        for mover in movers:
            mover.follow(action)
        actions.append(action)
    if not game.is_terminal():
        game.declare_coin_win("ply_cap")
    return Replay(seed=seed, actions=tuple(actions), winner=SIDE_NAMES[game.winner], end=game.end_reason)


def replay_record(record: dict) -> Replay:
    """The game of a ledger record, replayed with the players it names (see the module doc)."""
    return play_game(player_from_identity(record["guerrilla"], record["guerrilla_id"]),
                     player_from_identity(record["coin"], record["coin_id"]), record["seed"])


def single_game_player(player: Player, seed: int):
    """`player` on one game that starts from generator seed `seed`: `choose(game)` on its plies,
    `observe(game)` before each ply of the other side, `follow(action)` after every ply."""
    if player.kind in AGENT_KINDS:
        return _AgentMover(make_agent(player), seed)
    if player.is_net:
        from gcpipe.nn.checkpoint import load
        from gcpipe.nn.player import NetworkBot, NetworkPlayer

        bot = NetworkBot(NetworkPlayer(load(player.path, expected_sha256=player.sha256), full_turn=player.full_turn))
        bot.new_game()
        return _Mover(bot.choose, bot.observe)
    return _Mover(Bot(player.bot).choose)


class _Mover:
    """A single-game player: `choose(game)`, `observe(game)` before the other side's ply, and
    `follow(action)` after every ply."""

    def __init__(self, choose, observe=None):
        self.choose = choose
        self.observe = observe or (lambda game: None)

    def follow(self, action: int) -> None:
        """Bots and networks read the Game itself."""


class _AgentMover:
    """A player of the batched protocol (search, OpenSpiel: make_agent) on a one-game batch that
    repeats every ply of the game; its generator is the game's, handed over for each move."""

    def __init__(self, agent, seed: int):
        self.agent = agent
        self.agent.start(1)
        self.slot = np.zeros(1, np.int64)
        self.agent.new_games(self.slot)
        self.batch = GameBatch(1)
        self.batch.reset(0, seed)

    def observe(self, game: Game) -> None:
        self.agent.observe(self.batch, self.slot)

    def choose(self, game: Game) -> int:
        self.batch.states["rng"][0] = game.rng_state
        action = int(self.agent.choose(self.batch, self.slot)[0])
        game.rng_state = int(self.batch.states["rng"][0])    # the player's draws
        return action

    def follow(self, action: int) -> None:
        self.batch.apply(0, action)
