"""The C engine's Python surface: `Game` (OpenSpiel vocabulary), `GameBatch`, `VecEnv`, bots.

Names are loaded on first use (PEP 562), so `gcpipe.engine.build` can recompile a missing or
broken extension without importing it first."""
import importlib

_EXPORTS = {
    "gcpipe.engine.game": ["COIN", "END_REASONS", "GUERRILLA", "MAX_GAME_LENGTH", "NO_SIDE", "NUM_ACTIONS", "OBS_SIZE", "PASS_ACTION",
                           "SIDE_NAMES", "TERMINAL_PLAYER", "TOURNAMENT_PLY_CAP", "Game", "GameBatch",
                           "IllegalActionError", "action_to_string", "string_to_action"],
    "gcpipe.engine.vecenv": ["VecEnv"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = list(_MODULE_OF)


def __getattr__(name):
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'gcpipe.engine' has no attribute '{name}'")
    value = getattr(importlib.import_module(_MODULE_OF[name]), name)
    globals()[name] = value
    return value
