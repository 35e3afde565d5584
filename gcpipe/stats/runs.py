"""Two training settings compared over their runs (seeds), the run being the unit.

An RL run's strength varies from seed to seed by more than a 1000-game cell's sampling noise (docs/evaluation.md:
the default candidate's Guerrilla won 40.6 to 57.5 % of 1000 games against MCTS 2K in four
runs of the same settings).  Pooling an arm's games then understates the uncertainty, so a
difference of two settings is judged against the spread of their runs, as Welch's t does with one
win rate per run.  For an arm of k runs with win rates p_1..p_k (w_i wins of n_i games):

    mean m = (1/k) sum p_i,   run variance s^2 = sum (p_i - m)^2 / (k - 1),   standard error s / sqrt k
    sampling variance v = (1/k) sum p_i (1 - p_i) / n_i    (the spread the games alone would give)

s^2 well above v says the runs, not the games, decide.  The difference d = m_B - m_A has standard
error se = sqrt(s_A^2 / k_A + s_B^2 / k_B) and Welch-Satterthwaite degrees of freedom

    df = se^4 / (s_A^4 / (k_A^2 (k_A - 1)) + s_B^4 / (k_B^2 (k_B - 1))),

its 95 % interval d -+ t(0.975, df) se (B. L. Welch, Biometrika 34, 1947).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import scipy.stats

from gcpipe.errors import UserError, is_int


@dataclass(frozen=True)
class Arm:
    """One setting's runs: their win rates and the statistics of the module docstring."""
    rates: tuple[float, ...]
    mean: float
    run_sd: float          # s
    sampling_sd: float     # sqrt(v)

    @property
    def runs(self) -> int:
        return len(self.rates)


@dataclass(frozen=True)
class Difference:
    """m_B - m_A with its Welch standard error, degrees of freedom and 95 % interval."""
    difference: float
    se: float
    df: float
    low: float
    high: float


def arm(wins: Sequence[int], games: Sequence[int]) -> Arm:
    """The arm of runs whose wins and games (one entry a run) are given; at least two runs."""
    if len(wins) != len(games):
        raise UserError(f"{len(wins)} win counts for {len(games)} game counts")
    if len(wins) < 2:
        raise UserError(f"an arm needs at least two runs to measure their spread, got {len(wins)}")
    for w, n in zip(wins, games):
        if not (is_int(w) and is_int(n) and 0 <= w <= n and n > 0):
            raise UserError(f"a run's wins must be an integer from 0 to its games (> 0), got {w!r} of {n!r}")
    rates = tuple(w / n for w, n in zip(wins, games))
    k = len(rates)
    mean = sum(rates) / k
    run_variance = sum((p - mean) ** 2 for p in rates) / (k - 1)
    sampling_variance = sum(p * (1 - p) / n for p, n in zip(rates, games)) / k
    return Arm(rates, mean, math.sqrt(run_variance), math.sqrt(sampling_variance))


def welch(a: Arm, b: Arm) -> Difference:
    """B's mean minus A's with its 95 % Welch interval.  Where neither arm's runs vary the
    interval is the difference itself (df infinite)."""
    var_a, var_b = a.run_sd ** 2 / a.runs, b.run_sd ** 2 / b.runs
    se = math.sqrt(var_a + var_b)
    d = b.mean - a.mean
    if se == 0.0:
        return Difference(d, 0.0, math.inf, d, d)
    df = se ** 4 / (var_a ** 2 / (a.runs - 1) + var_b ** 2 / (b.runs - 1))
    half = float(scipy.stats.t.ppf(0.975, df)) * se
    return Difference(d, se, df, d - half, d + half)
