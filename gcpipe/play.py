"""`gcpipe play`: a person plays one side against any player in the terminal.

Moves use the notation of gcpipe.engine.game: a Guerrilla move names its two points ("d4-d5"),
a COIN move its source and destination squares ("D3-C4"); "#N" plays action N.  At the prompt,
"moves" lists every legal move, "board" redraws the board, "quit" ends the game.  The opponent
plays through the player protocol (gcpipe.players) in a batch of one game.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from gcpipe.engine import COIN, NUM_ACTIONS, SIDE_NAMES, Game, GameBatch, IllegalActionError, action_to_string
from gcpipe.engine.game import point_name, square_name
from gcpipe.errors import UserError
from gcpipe.players import PlayerBook

_HINT_COUNT = 12
_SLOT = np.zeros(1, np.int32)   # the one game


def legal_move_hint(game: Game, everything: bool = False) -> str:
    moves = [game.action_to_string(a) for a in game.legal_actions()]
    if everything or len(moves) <= _HINT_COUNT:
        return f"legal moves ({len(moves)}): " + " ".join(moves)
    return f"{len(moves)} legal moves, e.g. " + " ".join(moves[:_HINT_COUNT]) + " ... ('moves' lists all)"


def play(side: str, opponent_spec: str, seed: int = 1, book: PlayerBook | None = None,
         read_line: Callable[[str], str] = input, write: Callable[[str], None] = print) -> Game:
    """Runs one game against the player `opponent_spec` (a short spec or a name in `book`); returns
    it finished (or as it stood when the person quit).  Bad input fails before the game starts."""
    if side not in SIDE_NAMES:
        raise UserError(f"side must be 'guerrilla' or 'coin', got '{side}'")
    human = SIDE_NAMES.index(side)
    definition = (book or PlayerBook()).resolve(opponent_spec)
    opponent = definition.runtime()
    games = GameBatch(1)
    games.reset(0, seed)
    opponent.start(1)
    opponent.new_games(_SLOT)
    game = games.game(0)
    write(f"You play {side} against {definition.name}. Type 'moves' for the legal moves, 'quit' to stop.")
    write(str(game))
    while not game.is_terminal():
        if game.current_player() == human:
            opponent.observe(games, _SLOT)
            action = _ask_move(game, read_line, write)
            if action is None:
                write("Game abandoned.")
                return game
            mover = "you"
        else:
            action = int(opponent.choose(games, _SLOT)[0])
            mover = definition.name
        text = game.action_to_string(action)
        games.apply(_SLOT, [action])
        game = games.game(0)
        write(f"{mover}: {text}")
        write(str(game))
    write("You win!" if game.winner == human else f"{definition.name} wins.")
    return game


def _ask_move(game: Game, read_line, write) -> int | None:
    write(legal_move_hint(game))
    while True:
        try:
            text = read_line("your move> ").strip()
        except EOFError:
            return None
        if text in ("quit", "q", "exit"):
            return None
        if text in ("moves", "?", "help"):
            write(legal_move_hint(game, everything=True))
            continue
        if text == "board":
            write(str(game))
            continue
        try:
            return read_move(game, text)
        except UserError as error:
            write(f"{error}. {legal_move_hint(game)}")


def read_move(game: Game, text: str) -> int:
    """The action a move in the notation above names, if it is legal in `game`; else a UserError
    (IllegalActionError when the move reads but cannot be played) saying why."""
    action = game.string_to_action(text)
    if game.is_terminal():
        raise IllegalActionError(f"'{text}' cannot be played: the game is over")
    if action not in game.legal_actions():
        if not 0 <= action < NUM_ACTIONS:
            raise IllegalActionError(f"'{text}' is out of range (actions are #0 .. #{NUM_ACTIONS - 1})")
        raise IllegalActionError(f"'{text}' is not legal here: {_why_illegal(game, action)}")
    return action


def _why_illegal(game: Game, action: int) -> str:
    """The rule a well-formed move breaks, in words (rules.md)."""
    side = game.current_player()
    first, direction = divmod(action, 4)
    if side == COIN:
        target = first + (-9, -7, 7, 9)[direction]
        if game.chain_square is not None:
            return f"COIN must go on capturing with the coin on {square_name(game.chain_square)}"
        if first not in game.coins():
            return f"there is no coin on {square_name(first)}"
        if not 0 <= target < 64 or abs(target % 8 - first % 8) != 1:
            return "the coin would leave the board"
        if target in game.coins():
            return f"{square_name(target)} is taken by a coin"
        return "the coin cannot step there"
    points = action_to_string(action, side).split("-")
    taken = [p for p in points if p in {point_name(g) for g in game.stones()}]
    if taken:
        return f"a stone is already on {' and '.join(taken)}"
    return f"the first stone must go next to a stone on the board ({points[0]} is not)"


def scripted(lines: list[str]) -> Callable[[str], str]:
    """A read_line that answers from a list (tests, demos); EOF when it runs out."""
    feed: Iterator[str] = iter(lines)

    def read_line(prompt: str) -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    return read_line
