"""Replaying ledger games (gcpipe.match.replay) and drawing them (gcpipe.match.viewer): the replay is
the recorded game, the SVG shows every ply of it, and a game that does not replay is never drawn."""
import re

import pytest
from typer.testing import CliRunner

from gcpipe.cli import app
from gcpipe.engine.game import action_to_string
from gcpipe.errors import UserError
from gcpipe.match import match
from gcpipe.match import viewer as viewer_module
from gcpipe.match.ledger import read_ledger
from gcpipe.match.replay import Replay, play_game, replay_record
from gcpipe.match.viewer import view_ledger
from gcpipe.players import from_identity, parse_spec


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ledgers")
    return {name: match(g, c, games, out=folder / f"{name}.jsonl", workers=1, progress=False).ledger
            for name, g, c, games in (("greedy", "greedy", "greedy", 40), ("mcts", "mcts:40", "greedy", 8),
                                      ("random", "random", "greedy", 30))}


@pytest.mark.parametrize("name", ["greedy", "mcts"])
def test_replays_reproduce_every_recorded_bot_game(ledgers, name):
    for record in read_ledger(ledgers[name]):
        replay = replay_record(record)
        assert (replay.seed, replay.winner, replay.plies, replay.end) == (
            record["seed"], record["winner"], record["plies"], record["end"])


def test_from_identity_is_the_recorded_player():
    for spec in ("random", "greedy", "mcts:300:0.5:random"):
        player = parse_spec(spec)
        assert from_identity("p", player.identity).identity == player.identity
    with pytest.raises(UserError, match="lacks a setting"):
        from_identity("p", {"kind": "mcts", "iterations": 5})
    with pytest.raises(UserError, match="does not exist"):
        from_identity("p", {"kind": "net", "path": "gone.bin", "sha256": "0" * 64, "layout": "5c",
                                   "full_turn": True})


def test_default_pictures_are_the_first_win_of_each_side(ledgers, tmp_path):
    records = read_ledger(ledgers["greedy"])
    paths = view_ledger(ledgers["greedy"], tmp_path / "one")
    assert [p.name for p in paths] == ["guerrilla_win.svg", "coin_win.svg"]
    for path, side in zip(paths, ("guerrilla", "coin")):
        record = min((r for r in records if r["winner"] == side), key=lambda r: r["game"])
        text = path.read_text()
        assert text.startswith("<svg ") and text.endswith("</svg>\n")
        assert f"greedy__greedy, game {record['game']} (seed {record['seed']}): " in text
        # One board per ply after the start position, labelled with the move in the game's notation.
        assert text.count('xlink:href="#board"') == record["plies"] + 1
        replay = play_game(parse_spec("greedy"), parse_spec("greedy"), record["seed"])
        labels = re.findall(r">(\d+)\. ([GC]) ([A-Ha-h]\d-[A-Ha-h]\d)", text)
        assert [(int(n), side_letter, move) for n, side_letter, move in labels] == [
            (n, "GC"[side_of], action_to_string(action, side_of))
            for n, (action, side_of) in enumerate(zip(replay.actions, _sides(replay)), start=1)]
    view_ledger(ledgers["greedy"], tmp_path / "two")
    for name in ("guerrilla_win.svg", "coin_win.svg"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def _sides(replay: Replay) -> list[int]:
    from gcpipe.engine import Game

    game, sides = Game(replay.seed), []
    for action in replay.actions:
        sides.append(game.current_player())
        game.apply_action(action)
    return sides


def test_a_side_without_wins_says_so(ledgers, tmp_path):
    assert all(r["winner"] == "coin" for r in read_ledger(ledgers["random"]))
    view_ledger(ledgers["random"], tmp_path)
    assert "random__greedy: no Guerrilla win among the 30 games of this ledger" in \
           (tmp_path / "guerrilla_win.svg").read_text()
    assert 'xlink:href="#board"' in (tmp_path / "coin_win.svg").read_text()


def test_a_game_that_does_not_replay_is_never_drawn(ledgers, tmp_path, monkeypatch):
    records = read_ledger(ledgers["greedy"])
    first, second = sorted(r["game"] for r in records if r["winner"] == "guerrilla")[:2]

    def replay_with_a_fault(record):
        replay = replay_record(record)
        if record["game"] == first:   # as if the runner had stepped a player otherwise
            return Replay(replay.seed, replay.actions[:-1], "coin", "stalemate")
        return replay

    monkeypatch.setattr(viewer_module, "replay_record", replay_with_a_fault)
    view_ledger(ledgers["greedy"], tmp_path)
    text = (tmp_path / "guerrilla_win.svg").read_text()
    assert f"greedy__greedy, game {second} (seed " in text
    assert f"Game {first} replayed differently from its ledger record, so the next Guerrilla win is shown." in text
    with pytest.raises(UserError, match=f"game {first} replays differently from its ledger record"):
        view_ledger(ledgers["greedy"], tmp_path, games=[first])


def test_cli_view_draws_chosen_games(ledgers, tmp_path):
    result = CliRunner().invoke(app, ["view", str(ledgers["mcts"]), "--out", str(tmp_path), "--game", "3",
                                      "--game", "5"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [str(tmp_path / "game-3.svg"), str(tmp_path / "game-5.svg")]
    assert "mcts40__greedy, game 5 " in (tmp_path / "game-5.svg").read_text()
    missing = CliRunner().invoke(app, ["view", str(ledgers["mcts"]), "--out", str(tmp_path), "--game", "8"])
    assert missing.exit_code == 2
    assert missing.output.strip().splitlines() == [f"gcpipe: error: {ledgers['mcts']} has no game 8"]


def test_search_and_net_games_replay(tmp_path):
    import torch

    from gcpipe.nn.checkpoint import save
    from gcpipe.nn.model import MinGRUPolicy

    path = tmp_path / "alpha.bin"
    save(MinGRUPolicy(128, 2, bias=False, generator=torch.Generator().manual_seed(1)), path, "5c")
    for guerrilla, coin in ((f"search:{path}:8", "greedy"), (f"net:{path}", "random")):
        ledger = match(guerrilla, coin, 12, out=tmp_path / f"{guerrilla[:3]}.jsonl", workers=1, progress=False).ledger
        for record in read_ledger(ledger):
            assert from_identity(record["guerrilla"], record["guerrilla_id"]).identity == record["guerrilla_id"]
            assert replay_record(record).agrees_with(record)
