"""Guerrilla Checkers as an OpenSpiel Python game, every rule played by gcpipe's C engine.

A state wraps a `gcpipe.engine.Game`; legal actions, moves, the end of the game and the
observation come from the engine, so OpenSpiel sees exactly the game gcpipe plays.  The game is
deterministic: the engine's per-game generator (rules.md §8) belongs to gcpipe's players, not to
the rules, and OpenSpiel never sees it.
"""
from __future__ import annotations

import numpy as np
import pyspiel
from open_spiel.python.observation import IIGObserverForPublicInfoGame

from gcpipe.engine import MAX_GAME_LENGTH, NUM_ACTIONS, OBS_SIZE, Game
from gcpipe.engine.game import action_to_string

SHORT_NAME = "guerrilla_checkers"
GAME_TYPE = pyspiel.GameType(
    short_name=SHORT_NAME,
    long_name="Guerrilla Checkers (gcpipe C engine)",
    dynamics=pyspiel.GameType.Dynamics.SEQUENTIAL,
    chance_mode=pyspiel.GameType.ChanceMode.DETERMINISTIC,
    information=pyspiel.GameType.Information.PERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.ZERO_SUM,
    reward_model=pyspiel.GameType.RewardModel.TERMINAL,
    max_num_players=2,
    min_num_players=2,
    provides_information_state_string=True,    # the action history (IIGObserverForPublicInfoGame)
    provides_information_state_tensor=False,
    provides_observation_string=True,          # the board drawing
    provides_observation_tensor=True,          # the engine's 120 observation bytes
    parameter_specification={})
GAME_INFO = pyspiel.GameInfo(
    num_distinct_actions=NUM_ACTIONS,          # Guerrilla 0..195, COIN 0..254 (255 is never legal)
    max_chance_outcomes=0,
    num_players=2,
    min_utility=-1.0,
    max_utility=1.0,
    utility_sum=0.0,                           # no draws: +1 the winner, -1 the loser
    max_game_length=MAX_GAME_LENGTH)

# Named views of the observation bytes (rules.md §5), in their order: stone on point (gx, gy),
# coin on square (x, y), then side to move, must-capture, chaining coin + 1, two always-zero
# bytes, stones ever placed, stones on the board.
OBSERVATION_VIEWS = (("stones", (7, 7)), ("coins", (8, 8)), ("counters", (7,)))


class GuerrillaCheckersGame(pyspiel.Game):
    def __init__(self, params=None):
        super().__init__(GAME_TYPE, GAME_INFO, params or {})

    def new_initial_state(self) -> "GuerrillaCheckersState":
        return GuerrillaCheckersState(self)

    def state_at(self, position: Game) -> "GuerrillaCheckersState":
        """A state at a copy of the engine position `position`.  A bare position has no history:
        the state's history, and the information-state string made of it, start there
        (serialization keeps the position: pyspiel pickles the state's attributes with it)."""
        state = GuerrillaCheckersState(self)
        state.engine_game = position.clone()
        return state

    def make_py_observer(self, iig_obs_type=None, params=None):
        # Perfect information: the observation is the whole state; a perfect-recall observation
        # (the information state) is the action history.
        if iig_obs_type is None or (iig_obs_type.public_info and not iig_obs_type.perfect_recall):
            return BoardObserver(params)
        return IIGObserverForPublicInfoGame(iig_obs_type, params)


class GuerrillaCheckersState(pyspiel.State):
    """A position.  `engine_game` is the engine's Game (its generator unused here)."""

    def __init__(self, game: GuerrillaCheckersGame):
        super().__init__(game)
        self.engine_game = Game()

    def current_player(self) -> int:
        # The engine uses OpenSpiel's ids: Guerrilla 0, COIN 1, kTerminalPlayerId when over.
        return self.engine_game.current_player()

    def _legal_actions(self, player: int) -> list[int]:
        return self.engine_game.legal_actions() if player == self.engine_game.current_player() else []

    def _apply_action(self, action: int) -> None:
        self.engine_game.apply_action(action)

    def _action_to_string(self, player: int, action: int) -> str:
        return action_to_string(action, player)

    def is_terminal(self) -> bool:
        return self.engine_game.is_terminal()

    def returns(self) -> list[float]:
        return self.engine_game.returns()

    def __str__(self) -> str:
        return str(self.engine_game)


class BoardObserver:
    """The observation tensor (the 120 bytes as float32, in OBSERVATION_VIEWS) and the board
    drawing; both players see the same."""

    def __init__(self, params):
        if params:
            raise ValueError(f"guerrilla_checkers observations take no parameters, got {params}")
        self.tensor = np.zeros(OBS_SIZE, np.float32)
        self.dict, offset = {}, 0
        for name, shape in OBSERVATION_VIEWS:
            size = int(np.prod(shape))
            self.dict[name] = self.tensor[offset:offset + size].reshape(shape)
            offset += size

    def set_from(self, state: GuerrillaCheckersState, player: int) -> None:
        self.tensor[:] = state.engine_game.observation()

    def string_from(self, state: GuerrillaCheckersState, player: int) -> str:
        return str(state.engine_game)

