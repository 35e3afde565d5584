"""`gcpipe play`: a person plays one side against any player in the terminal.

Moves use the notation of gcpipe.engine.game: a Guerrilla move names its two points ("d4-d5"),
a COIN move its source and destination squares ("D3-C4"); "#N" plays action N.  At the prompt,
"moves" lists every legal move, "board" redraws the board, "quit" ends the game.
"""
from __future__ import annotations

from typing import Callable, Iterator

from gcpipe.engine import COIN, GUERRILLA, Game, IllegalActionError
from gcpipe.errors import UserError

SIDES = {"guerrilla": GUERRILLA, "coin": COIN}
_HINT_COUNT = 12


def make_opponent(spec: str, config=None, seed: int = 1):
    """An opponent from a player spec or a config player name (checked before the game starts), on
    one game from generator seed `seed`: the single-game player protocol of gcpipe.match.replay
    (a full-turn net or a search player also steps on the person's plies, rules.md §9)."""
    from gcpipe.match.players import PlayerBook
    from gcpipe.match.replay import single_game_player

    book = PlayerBook.from_config_file(config) if config else PlayerBook()
    player = book.resolve(spec)
    return single_game_player(player, seed), player.name


def legal_move_hint(game: Game, everything: bool = False) -> str:
    moves = [game.action_to_string(a) for a in game.legal_actions()]
    if everything or len(moves) <= _HINT_COUNT:
        return f"legal moves ({len(moves)}): " + " ".join(moves)
    return f"{len(moves)} legal moves, e.g. " + " ".join(moves[:_HINT_COUNT]) + " ... ('moves' lists all)"


def play(side: str, opponent_spec: str, seed: int = 1, config=None,
         read_line: Callable[[str], str] = input, write: Callable[[str], None] = print) -> Game:
    """Runs one game; returns it finished (or as it stood when the person quit)."""
    if side not in SIDES:
        raise UserError(f"side must be 'guerrilla' or 'coin', got '{side}'")
    human = SIDES[side]
    opponent, name = make_opponent(opponent_spec, config, seed)
    game = Game(seed)
    write(f"You play {side} against {name}. Type 'moves' for the legal moves, 'quit' to stop.")
    write(str(game))
    while not game.is_terminal():
        if game.current_player() == human:
            opponent.observe(game)
            action = _ask_move(game, read_line, write)
            if action is None:
                write("Game abandoned.")
                return game
            mover = "you"
        else:
            action = opponent.choose(game)
            mover = name
        text = game.action_to_string(action)
        game.apply_action(action)
        opponent.follow(action)
        write(f"{mover}: {text}")
        write(str(game))
    write("You win!" if game.winner == human else f"{name} wins.")
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
            action = game.string_to_action(text)
            if action not in game.legal_actions():
                raise IllegalActionError(f"'{text}' is not legal here")
            return action
        except UserError as error:
            write(f"{error}. {legal_move_hint(game)}")


def scripted(lines: list[str]) -> Callable[[str], str]:
    """A read_line that answers from a list (tests, demos); EOF when it runs out."""
    feed: Iterator[str] = iter(lines)

    def read_line(prompt: str) -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    return read_line
