"""Pair statistics and the SPRT (gcpipe.stats.sprt) against numbers computed with fishtest's published
formulas (server/fishtest/stats/LLRcalc.py and stat_util.py of official-stockfish/fishtest, run on
their own), and the sequential scan's stopping rule; runs compared over seeds (gcpipe.stats.runs and
benchmarks/runs_ab.py) against hand-computed values and scipy's own Welch test."""
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from gcpipe.errors import UserError
from gcpipe.stats.runs import arm, welch
from gcpipe.stats.sprt import (NELO_LIMIT, SPRT, llr_logistic, llr_normalized, pair_elo, pentanomial)

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

# (model, ELO0, ELO1, pentanomial, fishtest's LLR_normalized / LLR_logistic of it)
FISHTEST_LLR = [
    ("normalized", 0, 10, [10789, 19328, 33806, 19402, 10543], -92.53417765351344),   # a chess test
    ("normalized", 0, 10, [12, 0, 40, 0, 31], 1.007234404737564),
    ("normalized", 0, 10, [31, 0, 40, 0, 12], -1.1414570958439376),
    ("normalized", -5, 5, [12, 0, 40, 0, 31], 1.0744536787527579),
    ("normalized", 0, 50, [3, 0, 10, 0, 7], 0.7459551178201783),
    ("normalized", 0, 50, [0, 0, 5, 0, 0], -0.19757834572401808),
    ("normalized", 0, 50, [0, 0, 0, 0, 6], 1.091134626049565),
    ("normalized", 0, 5, [41, 0, 419, 0, 540], 13.13213576814816),
    ("logistic", 0, 20, [12, 0, 40, 0, 31], 1.8658528102281884),
    ("logistic", -3, 1, [10789, 19328, 33806, 19402, 10543], 2.1310678117940807),
    ("logistic", 0, 50, [0, 0, 0, 0, 6], 0.8017973809696289),
]


@pytest.mark.parametrize("model, elo0, elo1, counts, expected", FISHTEST_LLR)
def test_llr_equals_fishtest(model, elo0, elo1, counts, expected):
    function = llr_normalized if model == "normalized" else llr_logistic
    assert float(function(elo0, elo1, counts)) == pytest.approx(expected, rel=1e-10, abs=1e-12)
    assert float(SPRT(elo0, elo1, model=model).llr(counts)) == pytest.approx(expected, rel=1e-10, abs=1e-12)


def test_llr_of_a_stack_is_the_llr_of_each():
    counts = np.array([case[3] for case in FISHTEST_LLR[1:8] if case[1:3] == (0, 10)] + [[3, 0, 10, 0, 7]])
    each = [float(llr_normalized(0, 10, c)) for c in counts]
    assert llr_normalized(0, 10, counts).tolist() == pytest.approx(each, rel=1e-12)


def test_pentanomial_of_pairs_without_draws():
    assert pentanomial([0, 1, 2, 2, 1, 2]).tolist() == [1, 0, 2, 0, 3]
    assert pentanomial([]).tolist() == [0, 0, 0, 0, 0]
    with pytest.raises(ValueError):
        pentanomial([3])


@pytest.mark.parametrize("counts, elo, elo95, los, nelo", [
    # fishtest's stat_util.get_elo (elo, symmetric half-width, LOS) and nt * 800 / ln 10 of LLRcalc.stats
    ([41, 0, 419, 0, 540], 190.38510108768293, 16.543364051680086, 1.0, 212.76019086274636),
    ([31, 0, 40, 0, 12], -80.96605671284632, 54.33386639639075, 0.0011210636405311512, -82.41136192571001),
])
def test_pair_elo_equals_fishtest(counts, elo, elo95, los, nelo):
    estimate = pair_elo(counts)
    assert estimate.pairs == sum(counts)
    assert estimate.score == pytest.approx(sum(c * k / 4 for k, c in enumerate(counts)) / sum(counts), rel=1e-15)
    assert estimate.elo == pytest.approx(elo, rel=1e-12)
    assert (estimate.elo_ci95[1] - estimate.elo_ci95[0]) / 2 == pytest.approx(elo95, rel=1e-9)
    assert estimate.los == pytest.approx(los, rel=1e-9)
    assert estimate.nelo == pytest.approx(nelo, rel=1e-12)
    low, high = estimate.nelo_ci95
    assert low < estimate.nelo < high and (low + high) / 2 == pytest.approx(nelo, rel=1e-12)


def test_wald_bounds():
    test = SPRT(0, 10, alpha=0.05, beta=0.1)
    assert test.bounds == (math.log(0.1 / 0.95), math.log(0.9 / 0.05))
    assert test.decide(math.log(0.9 / 0.05)) == "H1 accepted"
    assert test.decide(math.log(0.1 / 0.95)) == "H0 accepted"
    assert test.decide(0.0) is None


def test_scan_stops_at_the_first_pair_count_that_decides():
    test = SPRT(0, 50)
    wins = np.random.default_rng(7).choice([0, 1, 2], size=400, p=[0.2, 0.45, 0.35])
    lower, upper = test.bounds
    llrs = [float(test.llr(pentanomial(wins[:n]))) for n in range(1, len(wins) + 1)]
    first = next(n for n, llr in enumerate(llrs, start=1) if not lower < llr < upper)
    state = test.scan(wins)
    assert (state.pairs, state.llr, state.counts) == (first, llrs[first - 1], tuple(pentanomial(wins[:first])))
    assert state.decision == ("H1 accepted" if llrs[first - 1] >= upper else "H0 accepted")
    # Scanning in steps gives the same stop, wherever the steps end.
    for step in (1, 7, 50):
        partial = test.scan(wins[:0])
        for end in range(step, len(wins) + step, step):
            partial = test.scan(wins[:end], start=partial.pairs)
            if partial.decision:
                break
        assert partial == state
    undecided = test.scan(wins[:first - 1])
    assert (undecided.pairs, undecided.decision) == (first - 1, None)
    assert undecided.llr == llrs[first - 2]


@pytest.mark.parametrize("make, message", [
    (lambda: SPRT(10, 0), "needs ELO0 < ELO1, got 10,0"),
    (lambda: SPRT(5, 5), "needs ELO0 < ELO1, got 5,5"),
    (lambda: SPRT(0, 5, alpha=0), "--alpha must lie strictly between 0 and 1, got 0"),
    (lambda: SPRT(0, 5, beta=1.5), "--beta must lie strictly between 0 and 1, got 1.5"),
    (lambda: SPRT(0, 5, alpha=0.6, beta=0.5), "--alpha + --beta must be below 1"),
    (lambda: SPRT(0, 5, model="bayes"), "--sprt-model must be one of normalized, logistic, got 'bayes'"),
    (lambda: SPRT(0, 300), "normalized Elo bounds must lie within ±231.6"),
    (lambda: SPRT.parse("0"), "--sprt takes ELO0,ELO1 (two numbers, e.g. 0,10), got '0'"),
    (lambda: SPRT.parse("a,b"), "--sprt takes ELO0,ELO1"),
    (lambda: SPRT.parse("0,nan"), "SPRT elo1 must be a finite number"),
])
def test_bad_sprt_settings_are_one_line(make, message):
    with pytest.raises(UserError) as caught:
        make()
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_logistic_model_takes_large_bounds_and_the_limit_is_fishtests():
    assert SPRT(0, 300, model="logistic").bounds[1] > 0
    # Just inside the limit the iteration still has a root; the limit is where it stops having one.
    assert math.isfinite(float(llr_normalized(0, NELO_LIMIT - 0.5, [3, 0, 10, 0, 7])))
    assert NELO_LIMIT == pytest.approx(231.6, abs=0.05)


def test_arm_of_runs_by_hand():
    runs = arm([3, 5, 7], [10, 10, 10])
    assert runs.rates == (0.3, 0.5, 0.7) and runs.runs == 3
    assert runs.mean == pytest.approx(0.5, abs=1e-15)
    assert runs.run_sd == pytest.approx(0.2, abs=1e-15)                  # s^2 = (0.04 + 0 + 0.04) / 2
    assert runs.sampling_sd == pytest.approx(math.sqrt(0.67 / 30), abs=1e-15)   # (0.21 + 0.25 + 0.21) / 10 / 3


def test_welch_difference_by_hand_and_as_scipy_computes_it():
    a, b = arm([3, 5, 7], [10, 10, 10]), arm([6, 8], [10, 10])
    d = welch(a, b)
    # var_A = 0.04 / 3 = 1/75, var_B = 0.02 / 2 = 1/100: se^2 = 7/300, df = (7/300)^2 / ((1/75)^2 / 2 + (1/100)^2)
    assert d.difference == pytest.approx(0.2, abs=1e-15)
    assert d.se == pytest.approx(math.sqrt(7 / 300), abs=1e-15)
    assert d.df == pytest.approx(49 / 17, rel=1e-12)
    scipy_test = scipy.stats.ttest_ind(b.rates, a.rates, equal_var=False)
    interval = scipy_test.confidence_interval(0.95)
    assert scipy_test.df == pytest.approx(d.df, rel=1e-12)
    assert (d.low, d.high) == pytest.approx((interval.low, interval.high), rel=1e-12)


def test_welch_without_any_spread_is_the_difference_itself():
    d = welch(arm([5, 5], [10, 10]), arm([7, 7], [10, 10]))
    assert (d.difference, d.se, d.df) == (pytest.approx(0.2, abs=1e-15), 0.0, math.inf)
    assert d.low == d.high == d.difference


@pytest.mark.parametrize("wins, games, message", [
    ([5], [10], "an arm needs at least two runs to measure their spread, got 1"),
    ([5, 6], [10], "2 win counts for 1 game counts"),
    ([5, 11], [10, 10], "a run's wins must be an integer from 0 to its games (> 0), got 11 of 10"),
    ([5, 0], [10, 0], "got 0 of 0"),
    ([5, 2.5], [10, 10], "got 2.5 of 10"),
])
def test_bad_arm_is_one_line(wins, games, message):
    with pytest.raises(UserError) as caught:
        arm(wins, games)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def _script(name: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_runs_ab_compares_strength_ledgers_over_runs(tmp_path):
    # Greedy against greedy on four roster positions (four "runs"; the engine's games are the same
    # on every machine): as Guerrilla 14, 11, 17 and 19 of 40, as COIN 27, 27, 29 and 31 of 40.
    for roster in (8, 10, 12, 13):
        done = _script("strength.py", "--games", 40, "--roster", roster, "--workers", 1,
                       "--out", tmp_path / f"r{roster}", "greedy", "--", "greedy")
        assert done.returncode == 0, done.stderr
    done = _script("runs_ab.py", "--a", tmp_path / "r8", tmp_path / "r10", "--b", tmp_path / "r12", tmp_path / "r13")
    assert done.returncode == 0, done.stderr
    rows = {line[:14].strip(): line[14:].split() for line in done.stdout.splitlines()[4:]}
    # Guerrilla: A 35.0 and 27.5 %, B 42.5 and 47.5 %: +13.75 points, se sqrt((0.075^2 + 0.05^2) / 4) = 4.5,
    # df 0.00203125^2 / (0.00140625^2 + 0.000625^2) = 1.74.
    assert rows["as Guerrilla"] == ["31.2", "%", "(", "5.3,", "7.3)", "45.0", "%", "(", "3.5,", "7.9)",
                                    "+13.7", "[", "-8.7,", "+36.2]", "1.7"]
    assert rows["as COIN"][-4:] == ["+7.5", "[-24.3,", "+39.3]", "1.0"]      # A's runs agree: df 1
    assert rows["both sides"][:2] == ["49.4", "%"] and rows["weaker side"] == rows["as Guerrilla"]
    done = _script("runs_ab.py", "--a", tmp_path / "r8", tmp_path / "r10", "--b", tmp_path / "r12", tmp_path / "r8")
    assert (done.returncode, done.stderr) == (2, f"runs_ab: error: {tmp_path / 'r8'}: given twice; "
                                                 "each run counts once, in one arm\n")
    mixed = tmp_path / "mixed"
    done = _script("strength.py", "--games", 4, "--workers", 1, "--out", mixed, "greedy", "--", "random")
    assert done.returncode == 0, done.stderr
    done = _script("runs_ab.py", "--a", tmp_path / "r8", tmp_path / "r10", "--b", mixed, tmp_path / "r12")
    assert done.returncode == 2
    assert done.stderr == (f"runs_ab: error: {mixed}: its opponent 'random' is not the other folders' 'greedy' "
                           f"({tmp_path / 'r8'}); compare runs against one opponent\n")
    done = _script("runs_ab.py", "--a", tmp_path / "r8", tmp_path, "--b", tmp_path / "r12", tmp_path / "r10")
    assert (done.returncode, done.stderr) == (2, f"runs_ab: error: {tmp_path}: no guerrilla_0_0.jsonl "
                                                 "(a benchmarks/strength.py --out folder?)\n")
    (tmp_path / "r10" / "coin_0_0.jsonl").write_bytes(b"")          # a cell whose first game never finished
    done = _script("runs_ab.py", "--a", tmp_path / "r8", tmp_path / "r10", "--b", tmp_path / "r12", tmp_path / "r13")
    assert (done.returncode, done.stderr) == (2, f"runs_ab: error: {tmp_path / 'r10' / 'coin_0_0.jsonl'}: "
                                                 "no finished games yet\n")


def test_strength_names_the_default_config_s_players(tmp_path):
    # The docs' commands name `mcts2k` without --config: the default config's players are known.
    done = _script("strength.py", "--games", 2, "--workers", 1, "--out", tmp_path, "greedy", "--", "mcts2k")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "greedy vs mcts2k: as Guerrilla 0/2 (0.0 %, 0.0-65.8) as COIN 0/2 (0.0 %, 0.0-65.8)\n"



def test_strength_refuses_what_it_cannot_play_before_any_game(tmp_path):
    # It played and wrote every pair it could before it came to an unknown name or a 17th position.
    unknown = _script("strength.py", "--games", 2, "--workers", 1, "--out", tmp_path, "greedy", "--", "random",
                      "nosuch")
    assert (unknown.returncode, unknown.stderr.splitlines()[0][:50]) == (
        2, "strength: error: unknown player 'nosuch': not a co")
    crowded = _script("strength.py", "--games", 2, "--workers", 1, "--out", tmp_path, "random", "--", "greedy",
                      "random", "mcts:2", "mcts:3", "mcts:4", "mcts:5", "mcts:6")
    assert (crowded.returncode, crowded.stderr) == (2, "strength: error: --roster 8 with 1 player(s) and 7 opponent(s) "
                                                       "needs roster positions up to 16; positions end at 15\n")
    assert not list(tmp_path.iterdir())
