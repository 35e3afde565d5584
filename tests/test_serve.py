"""`gcpipe serve` (gcpipe.analysis.serve): a person plays a player over HTTP on localhost; every
finished game lands in the ledger as a match writes it; bad requests are answered, not fatal."""
import json
import threading
import urllib.error
import urllib.request

import pytest

from gcpipe.analysis.serve import HUMAN_ROSTER, Table, make_server
from gcpipe.engine import Game
from gcpipe.errors import UserError
from gcpipe.fingerprint import engine_fingerprint
from gcpipe.match.ledger import game_seed


@pytest.fixture
def server(tmp_path):
    table = Table("coin", "random@3", tmp_path / "random__me.jsonl", name="me")
    httpd = make_server(table, port=0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", table
    httpd.shutdown()
    httpd.server_close()
    table.close()


def call(base, path, body=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(base + path, data=data, method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_two_whole_games_go_to_the_ledger(server):
    base, table = server
    for index in range(2):
        status, state = call(base, "/state") if index == 0 else call(base, "/new", {})
        assert status == 200 and state["game"] == index and state["seed"] == game_seed(3, HUMAN_ROSTER, index)
        board = Game(state["seed"])
        for move in state["moves"]:
            board.apply_action(board.string_to_action(move))
        while state["winner"] is None:
            assert state["to_move"] == "coin" and state["legal"] == [board.action_to_string(a)
                                                                     for a in board.legal_actions()]
            status, state = call(base, "/move", {"move": state["legal"][-1]})
            assert status == 200
            board = Game(state["seed"])
            for move in state["moves"]:
                board.apply_action(board.string_to_action(move))
            assert (board.stones(), board.coins()) == (state["stones"], state["coins"])
        assert state["recorded"] and state["legal"] == []
        # On disk while the server still holds the ledger (read_ledger refuses a ledger being written).
        records = [json.loads(line) for line in table.ledger.read_text().splitlines()]
        assert len(records) == index + 1
        assert {key: records[-1][key] for key in ("cell", "guerrilla", "coin", "game", "seed", "winner", "plies",
                                                  "end")} == {
            "cell": "random__me", "guerrilla": "random", "coin": "me", "game": index, "seed": state["seed"],
            "winner": state["winner"], "plies": len(state["moves"]), "end": state["end"]}
        assert records[-1]["coin_id"] == {"kind": "human", "name": "me"}
        assert records[-1]["guerrilla_id"] == {"kind": "random"}
        assert records[-1]["engine"] == engine_fingerprint()
    summary = json.loads(table.ledger.with_suffix(".json").read_text())
    assert summary["games"] == 2


def test_bad_requests_are_answered_and_the_game_goes_on(server):
    base, _ = server
    _, state = call(base, "/state")
    assert call(base, "/move", {"move": "d4-d5"})[1]["error"].startswith("'d4-d5': a coin moves one square")
    assert call(base, "/move", b"{oops") == (400, {"error": "the request is not JSON"})
    assert call(base, "/move", {"move": 5}) == (400, {"error": "a move is text like d4-d5 or D3-C4"})
    assert call(base, "/nothing")[0] == 404
    assert call(base, "/state") == (200, state)
    page = urllib.request.urlopen(base + "/").read().decode()
    assert page.startswith("<!DOCTYPE html>") and "https://" not in page


def test_a_ledger_of_another_cell_is_refused(tmp_path):
    table = Table("guerrilla", "random", tmp_path / "x.jsonl")
    while not table.games.game(0).is_terminal():
        table.move(table.state()["legal"][0])
    table.close()
    with pytest.raises(UserError, match="holds games of human__random, not random__human"):
        Table("coin", "random", tmp_path / "x.jsonl")
    with pytest.raises(UserError, match="unknown player"):
        Table("coin", "nobody", tmp_path / "y.jsonl")
    with pytest.raises(UserError, match="roster position 15 is the person's"):
        Table("coin", "random@15", tmp_path / "y.jsonl")


def test_a_ledger_of_another_engine_is_refused(tmp_path):
    table = Table("guerrilla", "random", tmp_path / "x.jsonl")
    while not table.games.game(0).is_terminal():
        table.move(table.state()["legal"][0])
    table.close()
    other = "0" * 16 if engine_fingerprint() != "0" * 16 else "1" * 16
    ledger = tmp_path / "x.jsonl"
    ledger.write_text(ledger.read_text().replace(f'"engine":"{engine_fingerprint()}"', f'"engine":"{other}"'))
    with pytest.raises(UserError, match=f"engine fingerprint {other} there, {engine_fingerprint()} now"):
        Table("guerrilla", "random", ledger)
