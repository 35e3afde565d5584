"""`gcpipe analyse` (gcpipe.analysis.position): a net's probabilities and value rows are those of the
net stepped along the game as a match player steps it; a search's visits, Q-values, improved policy
and line are the search's own; bad queries are one line or an error object."""
import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from gcpipe.analysis.position import AnalysisService, parse_moves
from gcpipe.cli import app
from gcpipe.engine import COIN, GUERRILLA, NUM_ACTIONS, PASS_ACTION, SIDE_NAMES, Game, GameBatch
from gcpipe.errors import UserError
from gcpipe.match import match
from gcpipe.match.ledger import encode_record, read_ledger
from gcpipe.match.replay import replay_record
from gcpipe.nn.checkpoint import load, save
from gcpipe.nn.inference import OUTPUTS, CompiledNet
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.players import PlayerBook
from gcpipe.search.player import SearchPlayer
from gcpipe.search.settings import SearchSettings

# A COIN capture chain: after these moves from seed 1 the coin on G6 must capture again, and
# G6-H5 is its one legal move.
FORCED = ("e3-e4 E6-F7 e5-d5 C4-B3 f4-f5 F7-G8 e6-e7 D5-C4 e2-e1 E4-F5 F5-G4 d6-c6 D3-E2 d7-c7 C4-D3 d3-d2 "
          "G8-H7 f7-f6 H7-G8 g5-g4 B3-C2 f3-f2 G4-F5 c2-c1 G8-H7 c5-b5 D3-C4 a5-a4 C2-B1 e4-d4 E2-D1 b2-b1 "
          "H7-G6 a6-a7 B1-A2 b3-c3 G6-F7 F7-E6 E6-D7 D7-C8 b7-b6 F5-G6").split()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("analysis")
    torch.manual_seed(0)
    model = MinGRUPolicy(128, 2, bias=False, generator=torch.Generator().manual_seed(1))
    save(model, folder / "alpha.bin", "5c")
    with pytest.warns(Warning):
        save(model, folder / "old.bin", "legacy")
    ledger = match(f"net:{folder / 'alpha.bin'}", "greedy", 6, out=folder / "games.jsonl", workers=1,
                   progress=False).ledger
    return {"net": folder / "alpha.bin", "legacy": folder / "old.bin", "ledger": ledger, "folder": folder}


def _expected_outputs(path, actions, seed, every_ply: bool) -> tuple[Game, np.ndarray]:
    """The net's outputs at the position after `actions`, stepped directly with the C net: on every
    ply (a full-turn 5c net) or on the mover's own plies only (a legacy net)."""
    net = CompiledNet.from_arrays(load(path).net)
    states, out = net.new_states(1), np.zeros((1, OUTPUTS), np.float32)
    batch, slot = GameBatch(1), np.zeros(1, np.int32)
    batch.reset(0, seed)
    game = Game(seed)
    for action in actions:
        game.apply_action(action)
    mover = game.current_player()
    for action in list(actions) + [None]:
        if every_ply or batch.to_move[0] == mover:
            net.step(states, slot, batch.observe(slot)[0], out)
        if action is not None:
            batch.apply(slot, [action])
    return game, out[0]


@pytest.mark.parametrize("kind", ["net", "legacy"])
def test_a_nets_view_is_the_net_stepped_as_a_match_player_steps_it(files, kind):
    moves = FORCED[:11]
    answer = AnalysisService().answer({"player": f"net:{files[kind]}", "moves": moves, "seed": 7})
    actions = parse_moves(moves, 7)
    game, out = _expected_outputs(files[kind], actions, 7, every_ply=kind == "net")
    legal = game.legal_actions()
    logits = out[legal].astype(np.float64)
    prior = np.exp(logits - logits.max())
    prior /= prior.sum()
    assert answer["ply"] == 11 and answer["to_move"] == SIDE_NAMES[game.current_player()]
    assert {m["action"]: m["prior"] for m in answer["moves"]} == dict(zip(legal, prior.tolist()))
    assert [m["move"] for m in answer["moves"]] == [game.action_to_string(a) for a in
                                                    sorted(legal, key=lambda a: (-prior[legal.index(a)], a))]
    assert answer["stones"] == [f"{'abcdefg'[g % 7]}{g // 7 + 1}" for g in game.stones()]
    if kind == "net":
        assert answer["value"] == {"guerrilla": float(out[NUM_ACTIONS]), "coin": float(out[PASS_ACTION])}
        assert answer["outcome"] == pytest.approx((out[NUM_ACTIONS] - out[PASS_ACTION]) / 2)
    else:
        assert answer["value"] is None and answer["outcome"] is None
    # A legacy net's state differs from one stepped on every ply: the check above can tell them apart.
    _, every = _expected_outputs(files[kind], actions, 7, every_ply=True)
    assert (kind == "net") == bool(np.array_equal(every, out))


def _search_by_hand(path, settings, actions, seed):
    """The search at the position after `actions`, played the way the match runner plays a search
    player on both sides: observe, choose, the recorded move applied."""
    players = [SearchPlayer(path, settings), SearchPlayer(path, settings)]
    batch, slot = GameBatch(1), np.zeros(1, np.int32)
    batch.reset(0, seed)
    for player in players:
        player.start(1)
        player.new_games(slot)
    for action in list(actions) + [None]:
        side = int(batch.to_move[0])
        players[1 - side].observe(batch, slot)
        chosen = players[side].choose(batch, slot, want_policy=action is None)
        if action is None:
            return players[side], int(chosen[0])
        batch.apply(slot, [action])


def _check_against_the_search(answer, player, chosen, game):
    last, tree = player.last, player._searcher.tree(0)
    sign = 1.0 if game.current_player() == GUERRILLA else -1.0
    search = answer["search"]
    assert (search["root_value"], search["search_value"], search["evaluations"]) == (
        float(last.root_value[0]), float(last.search_value[0]), int(last.evaluations[0]))
    assert answer["choice"] == game.action_to_string(chosen) == search["pv"][0]
    children = {node.action: node for node in tree[1:] if node.parent == 0}
    for move in answer["moves"]:
        node = children.get(move["action"])
        assert move["visits"] == (node.visits if node else 0)
        assert move["q"] == (sign * node.value_sum / node.visits if node and node.visits else None)
        assert move["policy"] == float(last.policy[0, move["action"]])
    assert sum(m["visits"] for m in answer["moves"]) == tree[0].visits - 1 if len(tree) > 1 else True


def test_a_forced_capture_against_the_search(files):
    settings = SearchSettings(simulations=24)
    answer = AnalysisService().answer({"player": f"search:{files['net']}:24", "moves": FORCED})
    actions = parse_moves(FORCED)
    game = Game(1)
    for action in actions:
        game.apply_action(action)
    assert game.current_player() == COIN and game.legal_actions() == [game.string_to_action("G6-H5")]
    assert [(m["move"], m["prior"], m["visits"], m["q"]) for m in answer["moves"]] == [("G6-H5", 1.0, 0, None)]
    assert answer["search"]["pv"] == ["G6-H5"] and answer["search"]["evaluations"] == 0
    player, chosen = _search_by_hand(files["net"], settings, actions, 1)
    _check_against_the_search(answer, player, chosen, game)


def _choices_before_the_end(record) -> int:
    replay = replay_record(record)
    game = Game(record["seed"])
    for action in replay.actions[:-1]:
        game.apply_action(action)
    return len(game.legal_actions())


def test_one_ply_from_the_end_against_the_search(files):
    # The shortest game whose last move was one of several.
    record = min((r for r in read_ledger(files["ledger"]) if _choices_before_the_end(r) > 1), key=lambda r: r["plies"])
    replay = replay_record(record)
    ply = replay.plies - 1
    # Every legal move considered, so the winning one is visited.
    wide = {"kind": "search", "path": str(files["net"]), "simulations": 256, "considered": 168}
    answer = AnalysisService(PlayerBook({"wide": wide})).answer({"player": "wide", "ledger": str(files["ledger"]),
                                                         "game": record["game"], "ply": ply})
    game = Game(record["seed"])
    for action in replay.actions[:ply]:
        game.apply_action(action)
    last = replay.actions[ply]
    entry = next(m for m in answer["moves"] if m["action"] == last)
    # The move ends the game: its Q is the terminal value from the mover's view, exactly.
    mover_won = record["winner"] == answer["to_move"]
    assert entry["visits"] > 0 and entry["q"] == (1.0 if mover_won else -1.0)
    player, chosen = _search_by_hand(files["net"], SearchSettings(simulations=256, considered=168),
                                     replay.actions[:ply], record["seed"])
    _check_against_the_search(answer, player, chosen, game)
    # The end itself: the game is over, nothing to analyse but the result.
    end = AnalysisService().answer({"player": f"net:{files['net']}", "ledger": str(files["ledger"]),
                                    "game": record["game"], "ply": replay.plies})
    assert (end["terminal"], end["winner"], end["end"], end["moves"]) == (True, record["winner"], record["end"], [])


def test_a_ledger_position_is_its_move_list_with_the_games_seed(files):
    record = read_ledger(files["ledger"])[1]
    replay = replay_record(record)
    service = AnalysisService(default_player=f"search:{files['net']}:16")
    by_ledger = service.answer({"ledger": str(files["ledger"]), "game": record["game"], "ply": 5})
    game, moves = Game(record["seed"]), []
    for action in replay.actions[:5]:
        moves.append(game.action_to_string(action))
        game.apply_action(action)
    by_moves = AnalysisService().answer({"player": f"search:{files['net']}:16", "moves": " ".join(moves),
                                 "seed": record["seed"]})
    for key in ("ledger", "game", "ply_count"):
        by_ledger.pop(key)
    assert by_ledger == by_moves


def test_answers_are_deterministic(files, tmp_path):
    query = json.dumps({"player": f"search:{files['net']}:16", "moves": FORCED[:9], "seed": 3})
    texts = [CliRunner().invoke(app, ["analyse", "--jsonl"], input=query + "\n").output for _ in range(2)]
    assert texts[0] == texts[1] and json.loads(texts[0])["seed"] == 3
    single = CliRunner().invoke(app, ["analyse", "--player", f"search:{files['net']}:16", "--moves",
                                      " ".join(FORCED[:9]), "--seed", "3"])
    assert single.exit_code == 0 and single.output == texts[0]


def test_the_json_lines_mode_answers_every_line_and_goes_on(files):
    good = {"id": 1, "moves": ["d4-d5"], "top": 2}
    lines = [json.dumps(good), "{not json", json.dumps({"id": "x", "mvoes": []}), "",
             json.dumps({"id": 3, "moves": ["d4-d5", "d4-d5"]}), json.dumps({"id": 4, "player": "bogus"}),
             json.dumps([1, 2]), json.dumps({"id": 5, "player": "greedy"}),
             json.dumps({"id": 6, "ledger": str(files["ledger"]), "game": 0, "ply": 999}),
             json.dumps({"id": 7, "ledger": str(files["ledger"]), "game": 99, "ply": 0}), json.dumps(good)]
    result = CliRunner().invoke(app, ["analyse", "--jsonl", "--player", f"net:{files['net']}"],
                                input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    answers = [json.loads(line) for line in result.output.splitlines()]
    assert len(answers) == 10
    assert answers[0]["id"] == 1 and [m["move"] for m in answers[0]["moves"]] == \
        [m["move"] for m in answers[-1]["moves"]] and len(answers[0]["moves"]) == 2
    assert answers[1]["error"].startswith("not JSON: ")
    assert answers[2] == {"id": "x", "error": "unknown key(s) 'mvoes'; a query has id, player, moves, ledger, "
                                              "game, ply, seed, top"}
    assert answers[3]["id"] == 3 and answers[3]["error"].startswith(
        "move 2 'd4-d5' (coin to move): 'd4-d5': a coin moves one square diagonally; legal: D3-C2 D3-E2 ")
    assert answers[4]["error"].startswith("unknown player 'bogus'")
    assert answers[5] == {"error": "a query is a JSON object, got a list"}
    assert answers[6]["error"].startswith("player greedy is a greedy player; an analysis needs a network")
    plies = read_ledger(files["ledger"])[0]["plies"]
    assert answers[7]["error"] == f"ply 999 is beyond the end of game 0 of {files['ledger']} ({plies} plies)"
    assert answers[8]["error"] == f"{files['ledger']} has no game 99"
    assert answers[9] == {**answers[0], "id": 1}


@pytest.mark.parametrize("args, message", [
    (["--moves", "d4-d5 D3-C2 d4-d5"], "move 3 'd4-d5' (guerrilla to move): 'd4-d5' is not legal here: a stone is "
                                       "already on d4 and d5; legal: "),
    (["--moves", "d4-d5 D3-C2 a1-a2"], "move 3 'a1-a2' (guerrilla to move): 'a1-a2' is not legal here: the first "
                                       "stone must go next to a stone on the board (a1 is not); legal: "),
    (["--moves", "d4-d5 D3-C4"], "move 2 'D3-C4' (coin to move): 'D3-C4' is not legal here: C4 is taken by a coin"),
    (["--moves", " ".join(FORCED[:-1] + ["F5-G6", "C8-B7"])], "move 43 'C8-B7' (coin to move): 'C8-B7' is not legal "
                                                              "here: COIN must go on capturing with the coin on G6; "
                                                              "legal: G6-H5"),
    (["--moves", "d4-d5 D3-D4"], "move 2 'D3-D4' (coin to move): 'D3-D4': a coin moves one square diagonally"),
    (["--moves", "d4-d5", "--ply", "2"], "ply 2 is beyond the end of the move list (1 moves)"),
    (["--player", "nope:1"], "unknown player 'nope:1'"),
    (["--player", "random"], "player random is a random player; an analysis needs a network"),
    (["--ledger", "missing.jsonl", "--game", "0", "--ply", "0"], "missing.jsonl"),
    (["--jsonl", "--moves", "d4-d5"], "--jsonl reads the positions from standard input; --moves go(es) in each"),
])
def test_bad_input_is_one_line(files, args, message):
    full = (["--player", f"net:{files['net']}"] if "--player" not in args else []) + args
    result = CliRunner().invoke(app, ["analyse", *full])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gcpipe: error: ") and message in lines[0]


def test_a_ledger_record_that_does_not_replay_is_refused(files, tmp_path):
    records = read_ledger(files["ledger"])
    record = next(r for r in records if r["end"] == "stones_exhausted")
    path = tmp_path / f"{record['cell']}.jsonl"
    path.write_text(encode_record(dict(record, plies=record["plies"] + 2)))   # as if another player had played
    with pytest.raises(UserError, match=f"game {record['game']} does not replay: its players give "):
        AnalysisService().answer({"player": f"net:{files['net']}", "ledger": str(path), "game": record["game"],
                                  "ply": 0})
