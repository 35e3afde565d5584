import json

import pytest

from gcpipe.errors import UserError
from gcpipe.match.ledger import (END_REASONS, LedgerWriter, encode_record, game_seed, merge_shards,
                                 read_ledger, summarize, summary_path_for, wilson_interval,
                                 write_summary)

G_ID = {"kind": "mcts", "iterations": 2000, "exploration": 0.7, "rollout": "greedy"}
C_ID = {"kind": "greedy"}
ENGINE = "0123456789abcdef"   # an engine fingerprint (these tests read and write ledgers, play none)


def record(game, winner="coin", end=None, plies=40, guerrilla="mcts2k", coin="greedy"):
    end = end or ("coins_cleared" if winner == "guerrilla" else "stones_wiped")
    return {"cell": f"{guerrilla}__{coin}", "guerrilla": guerrilla, "coin": coin, "game": game,
            "seed": game_seed(3, 1, game), "winner": winner, "plies": plies,
            "end": end, "guerrilla_id": G_ID, "coin_id": C_ID, "engine": ENGINE}


def write(path, records):
    with LedgerWriter(path) as writer:
        for rec in records:
            writer.append(rec)


def test_line_format_is_compact_and_in_key_order():
    line = encode_record(record(3, winner="guerrilla", plies=57))
    assert line == ('{"cell":"mcts2k__greedy","guerrilla":"mcts2k","coin":"greedy","game":3,'
                    f'"seed":{(0x9E3779B9 * (49 * 100003 + 3)) % 2**32 | 1},"winner":"guerrilla","plies":57,'
                    '"end":"coins_cleared","guerrilla_id":{"kind":"mcts","iterations":2000,'
                    '"exploration":0.7,"rollout":"greedy"},"coin_id":{"kind":"greedy"},"engine":"0123456789abcdef"}\n')


def test_round_trip(tmp_path):
    path = tmp_path / "matches" / "mcts2k__greedy.jsonl"
    records = [record(g, winner="guerrilla" if g % 3 else "coin") for g in range(7)]
    write(path, records)
    assert read_ledger(path) == records
    assert path.read_text().count("\n") == 7


def test_writer_resumes_and_reports_done_games(tmp_path):
    path = tmp_path / "a__b.jsonl"
    write(path, [record(0), record(1)])
    with LedgerWriter(path) as writer:
        assert writer.done_games == {0, 1}
        writer.append(record(2))
        with pytest.raises(UserError, match="game 1 is already recorded"):
            writer.append(record(1))
        with pytest.raises(UserError, match="cell"):
            writer.append(record(3, guerrilla="other"))
    assert [r["game"] for r in read_ledger(path)] == [0, 1, 2]


@pytest.mark.parametrize("torn", [b'{"cell":"mcts2k__gre', b"garbage\n",
                                  encode_record(record(2)).rstrip("\n").encode()])
def test_torn_last_line_is_ignored_then_truncated(tmp_path, torn):
    path = tmp_path / "mcts2k__greedy.jsonl"
    write(path, [record(0), record(1)])
    clean = path.read_bytes()
    with open(path, "ab") as handle:
        handle.write(torn)
    assert [r["game"] for r in read_ledger(path)] == [0, 1]
    with LedgerWriter(path) as writer:
        assert path.read_bytes() == clean
        writer.append(record(2))
    assert path.read_bytes() == clean + encode_record(record(2)).encode()


def test_malformed_middle_line_names_file_and_line(tmp_path):
    path = tmp_path / "mcts2k__greedy.jsonl"
    path.write_text(encode_record(record(0)) + "{oops\n" + encode_record(record(2)))
    with pytest.raises(UserError, match=rf"^{path}:2: not valid JSON$"):
        read_ledger(path)
    with pytest.raises(UserError, match=rf"^{path}:2: not valid JSON$"):
        LedgerWriter(path).__enter__()


@pytest.mark.parametrize("change, message", [
    ({"winner": "draw"}, "winner must be one of"),
    ({"end": "coins_cleared", "winner": "coin"}, "means a guerrilla win"),
    ({"seed": 2**32}, "unsigned 32-bit"),
    ({"game": True}, "game must be an integer"),
    ({"cell": "x__y"}, "does not match players"),
    ({"coin_id": "greedy"}, "coin_id must be a JSON object"),
])
def test_invalid_records_are_rejected_with_line_number(tmp_path, change, message):
    path = tmp_path / "mcts2k__greedy.jsonl"
    bad = {**record(1), **change}
    path.write_text(encode_record(record(0)) + json.dumps(bad) + "\n")
    with pytest.raises(UserError, match=rf"^{path}:2: .*{message}"):
        read_ledger(path)
    with pytest.raises(UserError, match=message):
        encode_record(bad)


def test_missing_and_unknown_keys(tmp_path):
    path = tmp_path / "l.jsonl"
    partial = {k: v for k, v in record(0).items() if k != "plies"}
    path.write_text(json.dumps(partial) + "\n" + encode_record(record(1)))
    with pytest.raises(UserError, match=":1: missing key"):
        read_ledger(path)
    path.write_text(json.dumps({**record(0), "extra": 1}) + "\n" + encode_record(record(1)))
    with pytest.raises(UserError, match=":1: unknown key"):
        read_ledger(path)


def test_duplicates_and_mixed_players_are_detected(tmp_path):
    path = tmp_path / "mcts2k__greedy.jsonl"
    path.write_text(encode_record(record(0)) + encode_record(record(1)) + encode_record(record(0)))
    with pytest.raises(UserError, match=r":3: game 0 already recorded on line 1"):
        read_ledger(path)
    other_id = {**record(1), "coin_id": {"kind": "random"}}
    path.write_text(encode_record(record(0)) + encode_record(other_id))
    with pytest.raises(UserError, match=r":2: coin_id .* differs"):
        read_ledger(path)


def test_missing_ledger_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such ledger"):
        read_ledger(tmp_path / "nope.jsonl")


def test_summary_numbers(tmp_path):
    ends = (["coins_cleared"] * 3 + ["stones_exhausted"] * 4 + ["stones_wiped"] * 2
            + ["ply_cap"])
    records = [record(g, winner="guerrilla" if end == "coins_cleared" else "coin", end=end,
                      plies=30 + g) for g, end in enumerate(ends)]
    summary = summarize(records)
    assert summary == {
        "cell": "mcts2k__greedy", "guerrilla": "mcts2k", "coin": "greedy", "games": 10,
        "guerrilla_wins": 3, "coin_wins": 7, "guerrilla_win_rate": 0.3,
        # Wilson 95% interval for 3 of 10 (z = 1.959964), computed with 40-digit decimals.
        "guerrilla_win_rate_ci95": [0.107791, 0.603222],
        "mean_plies": 34.5,
        "end_reasons": {"coins_cleared": 3, "stones_exhausted": 4, "stones_wiped": 2,
                        "stalemate": 0, "ply_cap": 1},
        "guerrilla_id": G_ID, "coin_id": C_ID, "engine": ENGINE,
    }
    assert list(summary["end_reasons"]) == list(END_REASONS)
    path = tmp_path / "mcts2k__greedy.jsonl"
    write(path, records)
    assert write_summary(path) == summary
    assert summary_path_for(path) == tmp_path / "mcts2k__greedy.json"
    assert json.loads(summary_path_for(path).read_text()) == summary


def test_wilson_bounds_solve_the_score_equation():
    # The Wilson bounds are the p with (phat - p)^2 = z^2 p (1 - p) / n.
    z = 1.959963984540054
    for wins, games in ((0, 100), (8, 100), (33, 100), (100, 100), (1, 3)):
        for p in wilson_interval(wins, games):
            assert (wins / games - p) ** 2 == pytest.approx(z * z * p * (1 - p) / games, abs=1e-12)


def test_summary_of_no_games_is_an_error():
    with pytest.raises(UserError, match="without finished games"):
        summarize([])


def test_merge_shards_is_sorted_and_independent_of_shard_order(tmp_path):
    games = [record(g, winner="guerrilla" if g % 2 else "coin") for g in range(10)]
    first, second = tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"
    write(first, [games[g] for g in (4, 0, 2, 1, 3)])
    write(second, [games[g] for g in (9, 5, 8, 6, 7)])
    merged_a, merged_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert merge_shards([first, second], merged_a) == games
    merge_shards([second, first], merged_b, games=10)
    assert merged_a.read_bytes() == merged_b.read_bytes()
    assert merged_a.read_text() == "".join(encode_record(r) for r in games)


def test_merge_shards_detects_overlaps_and_gaps(tmp_path):
    games = [record(g) for g in range(6)]
    first, second = tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"
    write(first, games[:3])
    write(second, games[2:5])
    with pytest.raises(UserError, match=rf"game 2 is in both {first} and {second}"):
        merge_shards([first, second], tmp_path / "m.jsonl")
    write(second := tmp_path / "s2.jsonl", [games[4], games[5]])
    with pytest.raises(UserError, match="missing game\\(s\\) 3"):
        merge_shards([first, second], tmp_path / "m.jsonl")
    write(third := tmp_path / "s3.jsonl", [games[3]])
    with pytest.raises(UserError, match="missing game\\(s\\) 6-7"):
        merge_shards([first, second, third], tmp_path / "m.jsonl", games=8)
    with pytest.raises(UserError, match="unexpected game\\(s\\) 5"):
        merge_shards([first, second, third], tmp_path / "m.jsonl", games=5)
    assert not (tmp_path / "m.jsonl").exists()
