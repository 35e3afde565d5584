"""`gcpipe play`: a scripted person against bots; bad input re-prompts with the reason."""
import re

import pytest
from typer.testing import CliRunner

from gcpipe.cli import app
from gcpipe.engine import SIDE_NAMES, Game
from gcpipe.errors import UserError
from gcpipe.play import play, scripted


def first_hinted_move_player():
    """A person who always plays the first move of the latest hint, after one bad entry per turn."""
    lines: list[str] = []
    tried_bad = set()

    def write(text: str) -> None:
        lines.append(text)

    def read_line(prompt: str) -> str:
        hint = next(line for line in reversed(lines) if "legal moves" in line)
        turn = len([line for line in lines if line.startswith(("you:",))])
        if turn not in tried_bad:
            tried_bad.add(turn)
            return "h9-h8"
        return re.search(r"(?:\): |e\.g\. )(\S+)", hint).group(1)

    return read_line, write, lines


@pytest.mark.parametrize("side, last_line, plies, end", [("guerrilla", "random wins.", 108, "stones_exhausted"),
                                                        ("coin", "You win!", 82, "stalemate")])
def test_a_whole_game_against_random(side, last_line, plies, end):
    read_line, write, lines = first_hinted_move_player()
    game = play(side, "random", seed=5, read_line=read_line, write=write)
    assert (game.is_terminal(), game.plies, game.end_reason, lines[-1]) == (True, plies, end, last_line)
    # one unreadable entry re-prompted at each of the person's turns
    assert sum("cannot read 'h9-h8'" in line for line in lines) == sum(line.startswith("you: ") for line in lines) > 10
    # The record of moves replays to the same final position; the winner the last line names is its winner.
    replay = Game(5)
    for line in lines:
        if line.startswith(("you: ", "random: ")):
            replay.apply_action(replay.string_to_action(line.split(": ")[1]))
    assert replay.serialize().split()[1:9] == game.serialize().split()[1:9]
    assert (replay.winner == SIDE_NAMES.index(side)) == (last_line == "You win!")


def test_illegal_but_readable_move_is_refused_with_the_reason():
    lines = []
    game = play("guerrilla", "greedy", read_line=scripted(["d4-d5", "a1-b2", "quit"]), write=lines.append)
    assert game.plies == 2  # d4-d5 and greedy's reply; then a1-b2 is refused (not neighbours), then quit
    assert any("orthogonal neighbours" in line for line in lines)
    assert lines[-1] == "Game abandoned."


def test_bad_opponent_and_side_fail_before_the_game():
    with pytest.raises(UserError):
        play("guerrilla", "mcts:abc", read_line=scripted([]), write=lambda _: None)
    with pytest.raises(UserError):
        play("both", "random", read_line=scripted([]), write=lambda _: None)
    result = CliRunner().invoke(app, ["play", "--opponent", "net:/nonexistent.bin"])
    assert result.exit_code == 2 and "nonexistent.bin" in result.output and "Traceback" not in result.output


def test_a_search_opponent_searches(tmp_path):
    """--opponent search:FILE:SIMS plays the search player's moves (the player protocol on this one
    game: it steps on the person's positions too), not the bare network's samples."""
    import numpy as np
    import torch

    from gcpipe.engine import GameBatch
    from gcpipe.nn import checkpoint as ckpt
    from gcpipe.nn.model import MinGRUPolicy
    from gcpipe.search.player import SearchPlayer
    from gcpipe.search.settings import make_settings

    ckpt.save(MinGRUPolicy(generator=torch.Generator().manual_seed(4)), tmp_path / "net.bin", "5c")
    read_line, write, lines = first_hinted_move_player()
    play("coin", f"s=search:{tmp_path / 'net.bin'}:8", seed=3, read_line=read_line, write=write)
    plies = [line.split(": ") for line in lines if line.startswith(("you: ", "s: "))]
    assert len(plies) > 10
    searcher = SearchPlayer(tmp_path / "net.bin", make_settings(simulations=8))
    searcher.start(1)
    batch, slot = GameBatch(1), np.zeros(1, np.int32)
    batch.reset(0, 3)
    searcher.new_games(slot)
    for mover, move in plies:
        game = batch.game(0)
        if mover == "s":
            assert game.action_to_string(int(searcher.choose(batch, slot)[0])) == move
        else:
            searcher.observe(batch, slot)
        batch.apply(slot, [game.string_to_action(move)])
