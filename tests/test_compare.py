"""`gcpipe compare`: game pairs from the two cells' ledgers, the fixed-size report, the SPRT's stop
(independent of step size, workers and interruption) and the bad-input rules."""
import json

import pytest
from typer.testing import CliRunner

from gcpipe.cli import app
from gcpipe.errors import UserError
from gcpipe.match import compare, game_seed
from gcpipe.match.compare import pair_wins, sprt_test, summary_path_for
from gcpipe.match.ledger import read_ledger
from gcpipe.stats.sprt import SPRT, pentanomial


def _run(*args):
    return CliRunner().invoke(app, ["compare", *map(str, args)])


def _summary_without_paths(result) -> dict:
    summary = dict(result.summary)
    summary.pop("ledgers")
    return summary


def test_pairs_are_game_g_of_both_cells():
    as_guerrilla = [{"game": g, "winner": w} for g, w in enumerate(["guerrilla", "coin", "guerrilla", "coin"])]
    as_coin = [{"game": g, "winner": w} for g, w in reversed(list(enumerate(["coin", "coin", "guerrilla", "guerrilla"])))]
    assert pair_wins(as_guerrilla, as_coin, 4).tolist() == [2, 1, 1, 0]
    assert pair_wins(as_guerrilla, as_coin, 2).tolist() == [2, 1]
    with pytest.raises(UserError, match=r"game\(s\) 4 are missing"):
        pair_wins(as_guerrilla, as_coin, 5)


def test_fixed_compare_prints_sides_pairs_and_self_cells(tmp_path):
    result = _run("greedy", "random", "--games", 40, "--quiet", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    as_guerrilla = read_ledger(tmp_path / "greedy__random.jsonl")
    as_coin = read_ledger(tmp_path / "random__greedy.jsonl")
    assert [r["seed"] for r in as_guerrilla] == [game_seed(0, 1, g) for g in range(40)]
    assert [r["seed"] for r in as_coin] == [game_seed(1, 0, g) for g in range(40)]
    won_g = [r["winner"] == "guerrilla" for r in as_guerrilla]
    won_c = [r["winner"] == "coin" for r in as_coin]
    both = sum(g and c for g, c in zip(won_g, won_c))
    neither = sum(not g and not c for g, c in zip(won_g, won_c))
    lines = result.output.splitlines()
    assert lines[0] == "greedy (candidate) vs random (baseline): 40 game pairs (80 games)"
    assert lines[1].startswith(f"  candidate as Guerrilla: {sum(won_g)}-{40 - sum(won_g)} (")
    assert lines[2].startswith(f"  candidate as COIN:      {sum(won_c)}-{40 - sum(won_c)} (")
    assert lines[3] == (f"  pairs: won both {both}, split {40 - both - neither}, lost both {neither} "
                        f"(score {100 * (sum(won_g) + sum(won_c)) / 80:.1f}%)")
    assert lines[4].startswith("  Elo +") and "LOS 100.0%" in lines[4]
    assert [line.split(":")[0] for line in lines[5:]] == ["  self cell greedy__greedy", "  self cell random__random",
                                                           "  summary"]
    summary = json.loads(summary_path_for("greedy", "random", tmp_path).read_text())
    assert summary["pair_results"] == {"won_both": both, "split": 40 - both - neither, "lost_both": neither}
    assert summary["pentanomial"] == [neither, 0, 40 - both - neither, 0, both]
    assert summary["sprt"] is None and summary["games"] == 80


def test_sprt_accepts_h1_at_the_first_pair_count_past_the_bound(tmp_path):
    result = compare("greedy", "random", sprt=SPRT(0, 50), out_dir=tmp_path, workers=1, progress=False)
    # greedy wins 16 pairs and splits 1: fishtest's LLR_normalized(0, 50, [0, 0, 1, 0, 16]) = 2.994817894044333
    # crosses ln(0.95/0.05) = 2.944, while [0, 0, 1, 0, 15] gave 2.812870787012245.
    assert (result.state.pairs, result.state.decision) == (17, "H1 accepted")
    assert result.state.counts == (0, 0, 1, 0, 16)
    assert result.state.llr == pytest.approx(2.994817894044333, rel=1e-10)
    sprt = result.summary["sprt"]
    assert (sprt["decision"], sprt["llr"], result.summary["games"]) == ("H1 accepted", 2.994818, 34)
    assert result.summary["elo_ci95"][0] < result.summary["elo"] <= result.summary["elo_ci95"][1]
    # The ledgers hold the whole first step; the decision counts the pairs up to 17 only.
    assert len(read_ledger(tmp_path / "greedy__random.jsonl")) == 1000
    assert not (tmp_path / "greedy__greedy.jsonl").exists()


def test_sprt_accepts_h0_for_the_weaker_candidate(tmp_path):
    result = _run("random", "greedy", "--sprt", "0,50", "--quiet", "--workers", 1, "--out", tmp_path)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].startswith("  SPRT nElo [0, 50], alpha 0.05, beta 0.05: H0 accepted after ")


def test_sprt_stop_does_not_depend_on_step_size_or_workers(tmp_path):
    runs = [compare("greedy", "twin=greedy", sprt=SPRT(-10, 40), out_dir=tmp_path / f"{step}-{workers}",
                    workers=workers, progress=False, pairs_per_step=step)
            for step, workers in ((1000, 1), (7, 2), (64, 1))]
    decided = runs[0].state
    assert decided.decision == "H0 accepted" and 20 < decided.pairs < 1000
    assert all(_summary_without_paths(run) == _summary_without_paths(runs[0]) for run in runs[1:])
    wins = pair_wins(read_ledger(runs[0].summary["ledgers"][0]), read_ledger(runs[0].summary["ledgers"][1]), 1000)
    assert SPRT(-10, 40).scan(wins) == decided
    assert decided.counts == tuple(pentanomial(wins[:decided.pairs]))


def test_interrupted_sprt_reaches_the_same_decision(tmp_path):
    whole = compare("greedy", "twin=greedy", sprt=SPRT(-10, 40), out_dir=tmp_path / "whole", workers=1,
                    progress=False, pairs_per_step=16)
    folder = tmp_path / "killed"
    # A run stopped at the cap of 40 games (20 pairs) undecided, then a kill in the middle of a step:
    # one ledger holds 5 more games than the other and ends in a torn line.
    capped = compare("greedy", "twin=greedy", sprt=SPRT(-10, 40), out_dir=folder, workers=1, progress=False,
                     pairs_per_step=16, max_games=40)
    assert (capped.state.decision, capped.summary["sprt"]["decision"], capped.state.pairs) == (None, "no decision", 20)
    ledger = folder / "greedy__twin.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    extra = (tmp_path / "whole" / "greedy__twin.jsonl").read_bytes().splitlines(keepends=True)[20:25]
    ledger.write_bytes(b"".join(lines + extra) + b'{"cell":"greedy__tw')
    resumed = compare("greedy", "twin=greedy", sprt=SPRT(-10, 40), out_dir=folder, workers=2, progress=False,
                      pairs_per_step=16)
    assert _summary_without_paths(resumed) == _summary_without_paths(whole)
    for name in ("greedy__twin.jsonl", "twin__greedy.jsonl"):
        assert (folder / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()


@pytest.mark.parametrize("args, message", [
    (["--sprt", "10,0"], "--sprt ELO0,ELO1 needs ELO0 < ELO1, got 10,0"),
    (["--sprt", "0,10", "--alpha", "1.5"], "--alpha must lie strictly between 0 and 1, got 1.5"),
    (["--sprt", "0,10", "--beta", "0"], "--beta must lie strictly between 0 and 1, got 0"),
    (["--alpha", "0.1"], "--alpha, --beta and --sprt-model only apply with --sprt ELO0,ELO1"),
    (["--max-games", "100"], "--max-games only applies with --sprt ELO0,ELO1"),
    (["--sprt", "0,10", "--max-games", "101"], "--max-games must be an even number >= 2 (games come in pairs), got 101"),
    (["--sprt", "0,10", "--sprt-model", "bayes"], "--sprt-model must be one of normalized, logistic, got 'bayes'"),
    (["--games", "0"], "--games must be an integer >= 1, got 0"),
])
def test_bad_sprt_input_is_one_line_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "out"
    result = _run("greedy", "random", *args, "--out", out)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"gcpipe: error: {message}"]
    assert not out.exists()


def test_a_ledger_of_another_pairing_stops_before_any_game(tmp_path):
    assert _run("greedy", "random", "--games", 10, "--quiet", "--out", tmp_path).exit_code == 0
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    # greedy__random.jsonl now meets a Guerrilla "greedy" that is MCTS, and a roster swap changes every seed.
    for args, message in ((["greedy=mcts:5", "random"], "greedy__random.jsonl was played by another guerrilla player"),
                          (["random", "greedy"], "other roster positions")):
        result = _run(*args, "--sprt", "0,10", "--out", tmp_path)
        assert result.exit_code == 2
        assert len(result.output.strip().splitlines()) == 1 and message in result.output
        assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


def test_sprt_options_parse_into_a_test():
    assert sprt_test(None) is None
    assert sprt_test("-5,5", alpha=0.1, model="logistic") == SPRT(-5, 5, alpha=0.1, beta=0.05, model="logistic")
