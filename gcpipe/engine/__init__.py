"""The C engine's Python surface: `Game` (OpenSpiel vocabulary), `GameBatch`, `VecEnv`, bots."""
from gcpipe.engine.game import (COIN, GUERRILLA, NUM_ACTIONS, OBS_SIZE, PASS_ACTION, TERMINAL_PLAYER, Game,
                                GameBatch, IllegalActionError, action_to_string, string_to_action)
from gcpipe.engine.vecenv import VecEnv

__all__ = ["COIN", "GUERRILLA", "NUM_ACTIONS", "OBS_SIZE", "PASS_ACTION", "TERMINAL_PLAYER", "Game",
           "GameBatch", "IllegalActionError", "action_to_string", "string_to_action",
           "VecEnv"]
