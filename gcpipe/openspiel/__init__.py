"""Guerrilla Checkers for OpenSpiel (the `openspiel` extra: pip install 'gcpipe[openspiel]').

    import pyspiel
    import gcpipe.openspiel                       # registers the game with pyspiel
    game = pyspiel.load_game("guerrilla_checkers")

The game is a Python game over gcpipe's C engine (`game`); `GcpipeBot` lets gcpipe's players
play in OpenSpiel (`bots`), and the match player kind `openspiel` puts OpenSpiel's algorithms
in gcpipe's matches (gcpipe.players.openspiel).
"""
from gcpipe.errors import MissingExtraError

try:
    import pyspiel
except ImportError:
    raise MissingExtraError("OpenSpiel", "openspiel") from None

from gcpipe.openspiel.bots import GcpipeBot
from gcpipe.openspiel.game import (GAME_INFO, GAME_TYPE, OBSERVATION_VIEWS, SHORT_NAME, GuerrillaCheckersGame,
                                   GuerrillaCheckersState)

pyspiel.register_game(GAME_TYPE, GuerrillaCheckersGame)

__all__ = ["GAME_INFO", "GAME_TYPE", "OBSERVATION_VIEWS", "SHORT_NAME", "GcpipeBot", "GuerrillaCheckersGame",
           "GuerrillaCheckersState"]
