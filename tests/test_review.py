"""The review page of a game (gcpipe.analysis.review): its data is the replay's board and the
analysis `gcpipe analyse` gives, it loads nothing from outside, and bad input writes no page.
tests/test_review_browser.py steps through it in a browser."""
import json
import re

import pytest
from typer.testing import CliRunner

from gcpipe.analysis.position import AnalysisService
from gcpipe.analysis.review import TOP_MOVES, page_html, turning_points
from gcpipe.cli import app
from gcpipe.engine import SIDE_NAMES, Game
from gcpipe.match.replay import replay_record
from review_game import reviewed_game


@pytest.fixture(scope="module")
def game(tmp_path_factory):
    """A net-vs-greedy ledger, its longest game and its review page by the same net."""
    folder = tmp_path_factory.mktemp("review")
    return {**reviewed_game(folder, folder / "pages"), "folder": folder}


def page_data(path) -> dict:
    text = path.read_text()
    return json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S).group(1))


def test_the_page_shows_the_replayed_board_and_the_analysis(game):
    data = page_data(game["page"])
    record, replay = game["record"], replay_record(game["record"])
    assert len(data["plies"]) == record["plies"] + 1
    board = Game(record["seed"])
    service = AnalysisService(default_player=game["net"])
    for ply, shown in enumerate(data["plies"]):
        assert (shown["stones"], shown["coins"]) == (board.stones(), board.coins())
        answer = service.answer({"ledger": str(game["ledger"]), "game": record["game"], "ply": ply})
        assert shown["to_move"] == answer["to_move"]
        if ply < record["plies"]:
            assert shown["value"] == [round(answer["value"]["guerrilla"], 4), round(answer["value"]["coin"], 4)]
            assert shown["outcome"] == round(answer["outcome"], 4)
            assert shown["top"] == [[m["move"], round(m["prior"], 4), None] for m in answer["moves"][:TOP_MOVES]]
            move, side = board.action_to_string(replay.actions[ply]), SIDE_NAMES[board.current_player()]
            assert shown["played"] == data["plies"][ply + 1]["move"] == move
            assert data["plies"][ply + 1]["side"] == side
            board.apply_action(replay.actions[ply])
        else:
            assert answer["terminal"] and "value" not in shown and shown["to_move"] is None
    swings = sorted(((abs(data["plies"][k]["outcome"] - data["plies"][k - 1]["outcome"]), -k)
                     for k in range(1, record["plies"])), reverse=True)
    assert [t["ply"] for t in data["turning"]] == [-k for _, k in swings[:5]]


def test_the_page_is_self_contained_and_small(game):
    text = game["page"].read_text()
    assert text.startswith("<!DOCTYPE html>") and text.endswith("</html>\n")
    # No script, style, image or link from elsewhere: the one URL is the SVG namespace.
    assert set(re.findall(r"https?://[^\s\"']+", text)) == {"http://www.w3.org/2000/svg"}
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=|@import|url\((?!#)", text)
    assert len(text.encode()) < 60_000


def test_text_in_the_data_cannot_end_the_script():
    data = {"title": "a </script><b>x</b> & more", "plies": [], "notes": [], "turning": []}
    text = page_html(data)
    assert text.count("</script>") == 2 and "<title>a &lt;/script&gt;&lt;b&gt;x&lt;/b&gt; &amp; more</title>" in text
    found = json.loads(re.search(r'id="data">(.*?)</script>', text, re.S).group(1))
    assert found["title"] == data["title"]


def test_turning_points_are_the_largest_swings():
    plies = [{"outcome": v, "move": f"m{k}", "side": "coin"} for k, v in enumerate([0.0, 0.1, -0.5, -0.4, 0.3])]
    assert [(t["ply"], t["swing"]) for t in turning_points(plies, 3)] == [(4, 0.7), (2, 0.6), (1, 0.1)]


def test_pages_without_an_analyst_and_for_a_side_without_wins(game, tmp_path):
    result = CliRunner().invoke(app, ["view", str(game["ledger"]), "--out", str(tmp_path), "--html"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["coin_win.html", "coin_win.svg", "guerrilla_win.html",
                                                          "guerrilla_win.svg"]
    coin = page_data(tmp_path / "coin_win.html")
    assert coin["analyst"] is None and "value" not in coin["plies"][0] and coin["turning"] == []
    assert page_data(tmp_path / "guerrilla_win.html")["title"].startswith("alpha__greedy: no Guerrilla win among")


@pytest.mark.parametrize("args, message", [
    (["--analyst", "nope"], "gcpipe: error: unknown player 'nope'"),
    (["--analyst", "greedy"], "gcpipe: error: player greedy is a greedy player; an analysis needs a network"),
    (["--game", "99", "--html"], "has no game 99"),
])
def test_bad_input_writes_no_page(game, tmp_path, args, message):
    result = CliRunner().invoke(app, ["view", str(game["ledger"]), "--out", str(tmp_path / "out"), *args])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and message in result.output
    assert not (tmp_path / "out").exists()
