"""Game pairs in the pentanomial model, their Elo estimates, and the sequential probability ratio
test (SPRT) over them, as fishtest (server/fishtest/stats/LLRcalc.py, stat_util.py) and fastchess
(app/src/matchmaking/sprt/sprt.cpp) compute them.

A *pair* is one game index g played twice with the sides swapped: A as Guerrilla against B as
COIN, and B as Guerrilla against A as COIN.  Its score for A is the share of the two games A won.
The pentanomial counts pairs by score 0, 1/4, 1/2, 3/4, 1 (chess: LL, LD+DL, LW+DD+WL, DW+WD, WW).
Guerrilla Checkers has no draws, so only 0 (lost both), 1/2 (split) and 1 (won both) occur; the
empty bins get fishtest's regularization, a count of 0 becoming 1e-3, which keeps every
probability below positive.

Normalized Elo (the default model; fishtest's LLR_normalized) measures A's edge in standard
deviations of the pair score, so one nElo point costs about the same number of pairs to detect
whatever the side balance or the share of split pairs:
    t = (mu - 1/2) / sigma_pair,   nElo = t / sqrt(2) * 800 / ln 10
(mu and sigma_pair^2: mean and variance of the pair score).  Logistic Elo (fishtest's
LLR_logistic): mu = 1 / (1 + 10^(-Elo / 400)).

The log-likelihood ratio of H1 (Elo = ELO1) against H0 (Elo = ELO0) is the generalized one,
    LLR = N * sum_i phat_i * (ln p1_i - ln p0_i),
with phat the observed (regularized) pair-score distribution, N its total, and p_k the maximum-
likelihood distribution whose statistic (t, or mu for logistic Elo) is that of H_k (M. van den
Bergh, "Comments on normalized Elo": section 4.1 for t, proposition 1.1 for mu).  Wald's bounds
    lower = ln(beta / (1 - alpha)),   upper = ln((1 - beta) / alpha)
decide: LLR >= upper accepts H1, LLR <= lower accepts H0 (fastchess's rule; fishtest's dynamic
overshoot correction is left out).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gcpipe.errors import UserError, is_finite_number
from gcpipe.stats.normal import Z95, normal_cdf

NELO_PER_NT = 800 / math.log(10)            # fishtest's nelo_divided_by_nt
PAIR_SCORES = np.linspace(0.0, 1.0, 5)       # the pentanomial bins
EMPTY_BIN = 1e-3                             # fishtest's regularization of an empty bin
# Games of a pair won by A (0, 1, 2) -> their names; they fill bins 0, 2 and 4.
PAIR_OUTCOMES = ("lost_both", "split", "won_both")
MODELS = ("normalized", "logistic")
H0_ACCEPTED, H1_ACCEPTED = "H0 accepted", "H1 accepted"
# fishtest's t-value iteration starts from the uniform distribution (sigma^2 = 1/8), where the
# secular equation has a root only while |t| < sigma / (sigma^2 + 1/4); beyond, nothing is defined.
NELO_LIMIT = math.sqrt(1 / 8) / (1 / 8 + 1 / 4) / math.sqrt(2) * NELO_PER_NT   # 231.6


def pentanomial(pair_wins) -> np.ndarray:
    """The five bin counts of a sequence of pairs, each given as the games A won in it (0, 1, 2)."""
    wins = np.asarray(pair_wins, dtype=np.int64).reshape(-1)
    if len(wins) and (wins.min() < 0 or wins.max() > 2):
        raise ValueError("a pair has 0, 1 or 2 games won")
    return np.bincount(2 * wins, minlength=5)


def _regularized(counts) -> tuple[np.ndarray, np.ndarray]:
    """fishtest's results_to_pdf: empty bins become EMPTY_BIN; returns (total, distribution)."""
    counts = np.asarray(counts, dtype=float)
    if counts.shape[-1] != 5:
        raise ValueError(f"a pentanomial has 5 bins, got shape {counts.shape}")
    counts = np.where(counts == 0, EMPTY_BIN, counts)
    total = counts.sum(axis=-1)
    return total, counts / total[..., None]


def _secular_root(phi: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row, the x in (-1/max phi, -1/min phi) where sum_i w_i phi_i / (1 + x phi_i) = 0 (fishtest's
    `secular`).  The sum falls from +inf to -inf across that interval, so the root is unique: Newton
    steps while they stay inside the shrinking bracket, bisection otherwise.  Each row iterates on
    its own until it converges, so its root does not depend on the other rows."""
    if np.any(phi.max(axis=-1) <= 0) or np.any(phi.min(axis=-1) >= 0):
        raise ValueError("the secular equation has no root: phi does not change sign")
    low, high = -1.0 / phi.max(axis=-1), -1.0 / phi.min(axis=-1)
    x = np.zeros(len(phi))
    rows = np.arange(len(phi))
    for _ in range(200):
        r, xr = rows, x[rows]
        denominator = 1.0 + xr[:, None] * phi[r]
        terms = weights[r] * phi[r] / denominator
        value = terms.sum(axis=-1)
        slope = -(terms * phi[r] / denominator).sum(axis=-1)
        low[r] = np.where(value > 0, xr, low[r])
        high[r] = np.where(value < 0, xr, high[r])
        newton = xr - value / slope
        following = np.where((newton > low[r]) & (newton < high[r]), newton, 0.5 * (low[r] + high[r]))
        x[r] = following
        rows = r[np.abs(following - xr) > 1e-15 * np.maximum(1.0, np.abs(xr))]
        if not len(rows):
            return x
    raise RuntimeError("the secular equation did not converge")


def _mle_expectation(p_hat: np.ndarray, mu: float) -> np.ndarray:
    """The distribution on the bins closest to p_hat (maximum likelihood) with mean mu (fishtest's
    MLE_expected); rows of p_hat are separate samples."""
    phi = np.broadcast_to(PAIR_SCORES - mu, p_hat.shape)
    return p_hat / (1.0 + _secular_root(phi, p_hat)[:, None] * phi)


def _mle_t_value(p_hat: np.ndarray, t: float) -> np.ndarray:
    """The maximum-likelihood distribution with (mu - 1/2) / sigma = t (fishtest's MLE_t_value with
    ref = 1/2), iterated from the uniform distribution to a fixed point, each row on its own."""
    p = np.full_like(p_hat, 1.0 / len(PAIR_SCORES))
    rows = np.arange(len(p_hat))
    for _ in range(100):
        pr = p[rows]
        mu, sigma = _mean_and_deviation(pr)
        deviation = mu[:, None] - PAIR_SCORES
        phi = PAIR_SCORES - 0.5 - t * (sigma[:, None] ** 2 + deviation ** 2) / (2 * sigma[:, None])
        following = p_hat[rows] / (1.0 + _secular_root(phi, p_hat[rows])[:, None] * phi)
        p[rows] = following
        rows = rows[np.abs(following - pr).max(axis=-1) >= 1e-9]    # fishtest's tolerance
        if not len(rows):
            return p
    # Rows still moving sit at the rounding floor of an ill-conditioned fit (an empty bin taking most
    # of the mass puts 1 + x phi near 0); like fishtest, accept them when they meet the constraint.
    mu, sigma = _mean_and_deviation(p[rows])
    if np.max(np.abs((mu - 0.5) / sigma - t)) > 1e-6:
        raise RuntimeError("the t-value maximum-likelihood iteration did not converge")
    return p


def _mean_and_deviation(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of the pair score under each row of p (elementwise sums, so a
    row's result does not depend on the others)."""
    mu = (p * PAIR_SCORES).sum(axis=-1)
    return mu, np.sqrt((p * (PAIR_SCORES - mu[:, None]) ** 2).sum(axis=-1))


def _llr(counts, p0_of, p1_of):
    total, p_hat = _regularized(counts)
    shape = p_hat.shape[:-1]
    p_hat = p_hat.reshape(-1, len(PAIR_SCORES))
    llr = total.reshape(-1) * (p_hat * (np.log(p1_of(p_hat)) - np.log(p0_of(p_hat)))).sum(axis=-1)
    return llr.reshape(shape)


def llr_normalized(nelo0: float, nelo1: float, counts):
    """fishtest's LLR_normalized(nelo0, nelo1, pentanomial); counts may hold several pentanomials
    (shape [..., 5]), giving one LLR each."""
    t0, t1 = (math.sqrt(2) * nelo / NELO_PER_NT for nelo in (nelo0, nelo1))
    return _llr(counts, lambda p: _mle_t_value(p, t0), lambda p: _mle_t_value(p, t1))


def logistic_score(elo: float) -> float:
    """Expected score at a logistic Elo difference (fishtest's L_)."""
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


def llr_logistic(elo0: float, elo1: float, counts):
    """fishtest's LLR_logistic(elo0, elo1, pentanomial), several at once as llr_normalized."""
    s0, s1 = logistic_score(elo0), logistic_score(elo1)
    return _llr(counts, lambda p: _mle_expectation(p, s0), lambda p: _mle_expectation(p, s1))


@dataclass(frozen=True)
class SPRTState:
    """The test after `pairs` pairs: its LLR and its decision (None while it continues)."""
    pairs: int
    llr: float
    decision: str | None
    counts: tuple[int, ...]


@dataclass(frozen=True)
class SPRT:
    """H0: Elo = elo0 against H1: Elo = elo1 over game pairs, with error rates alpha (accepting H1
    when H0 holds) and beta (accepting H0 when H1 holds); Elo in the `model`'s units."""
    elo0: float
    elo1: float
    alpha: float = 0.05
    beta: float = 0.05
    model: str = "normalized"

    def __post_init__(self):
        for name in ("elo0", "elo1", "alpha", "beta"):
            value = getattr(self, name)
            if not is_finite_number(value):
                raise UserError(f"SPRT {name} must be a finite number, got {value!r}")
        if self.elo0 >= self.elo1:
            raise UserError(f"--sprt ELO0,ELO1 needs ELO0 < ELO1, got {self.elo0:g},{self.elo1:g}")
        for flag, value in (("--alpha", self.alpha), ("--beta", self.beta)):
            if not 0 < value < 1:
                raise UserError(f"{flag} must lie strictly between 0 and 1, got {value:g}")
        if self.alpha + self.beta >= 1:
            raise UserError(f"--alpha + --beta must be below 1, got {self.alpha:g} + {self.beta:g}")
        if self.model not in MODELS:
            raise UserError(f"--sprt-model must be one of {', '.join(MODELS)}, got {self.model!r}")
        if self.model == "normalized" and max(abs(self.elo0), abs(self.elo1)) >= NELO_LIMIT:
            raise UserError(f"normalized Elo bounds must lie within ±{NELO_LIMIT:.1f} (fishtest's t-value "
                            f"estimate has no solution beyond), got {self.elo0:g},{self.elo1:g}; "
                            f"use --sprt-model logistic")

    @classmethod
    def parse(cls, bounds: str, alpha: float = 0.05, beta: float = 0.05, model: str = "normalized") -> "SPRT":
        """From the command line's "ELO0,ELO1"."""
        parts = str(bounds).split(",")
        try:
            elo0, elo1 = (float(part) for part in parts)
        except ValueError:
            raise UserError(f"--sprt takes ELO0,ELO1 (two numbers, e.g. 0,10), got {bounds!r}") from None
        return cls(elo0, elo1, alpha, beta, model)

    @property
    def bounds(self) -> tuple[float, float]:
        """Wald's (lower, upper) LLR bounds."""
        return math.log(self.beta / (1 - self.alpha)), math.log((1 - self.beta) / self.alpha)

    @property
    def unit(self) -> str:
        return "nElo" if self.model == "normalized" else "Elo"

    def describe(self) -> str:
        return f"{self.unit} [{self.elo0:g}, {self.elo1:g}], alpha {self.alpha:g}, beta {self.beta:g}"

    def llr(self, counts):
        """The LLR of one pentanomial, or of each of a stack of them (shape [..., 5])."""
        function = llr_normalized if self.model == "normalized" else llr_logistic
        return function(self.elo0, self.elo1, counts)

    def drift(self, distribution) -> float:
        """Expected LLR change per pair when pair scores 0, 1/4, ..., 1 have these probabilities (the
        drift of fishtest's LLR_drift_variance): sum_i p_i (ln p1_i - ln p0_i), p_k the hypotheses'
        distributions closest to p.  Wald's average sample number is (bound reached) / drift."""
        p = np.asarray(distribution, dtype=float).reshape(1, 5)
        if self.model == "normalized":
            t0, t1 = (math.sqrt(2) * elo / NELO_PER_NT for elo in (self.elo0, self.elo1))
            p0, p1 = _mle_t_value(p, t0), _mle_t_value(p, t1)
        else:
            p0, p1 = (_mle_expectation(p, logistic_score(elo)) for elo in (self.elo0, self.elo1))
        support = p[0] > 0          # bins that never occur add nothing
        return float((p[0][support] * (np.log(p1[0][support]) - np.log(p0[0][support]))).sum())

    def decide(self, llr: float) -> str | None:
        lower, upper = self.bounds
        return H1_ACCEPTED if llr >= upper else H0_ACCEPTED if llr <= lower else None

    def scan(self, pair_wins, start: int = 0) -> SPRTState:
        """The test run over pairs in order (each given as the games A won): stops at the first pair
        count after `start` where it decides, else reports the state after the last pair.  The
        caller knows the test had not decided at `start` or before."""
        wins = np.asarray(pair_wins, dtype=np.int64).reshape(-1)
        if not 0 <= start <= len(wins):
            raise ValueError(f"start {start} lies outside the {len(wins)} pairs")
        if start == len(wins):
            counts = pentanomial(wins)
            return SPRTState(start, float(self.llr(counts)) if start else 0.0, None, tuple(map(int, counts)))
        prefixes = pentanomial(wins[:start]) + np.cumsum(np.eye(5, dtype=np.int64)[2 * wins[start:]], axis=0)
        llrs = self.llr(prefixes)
        lower, upper = self.bounds
        decided = np.flatnonzero((llrs >= upper) | (llrs <= lower))
        k = int(decided[0]) if len(decided) else len(llrs) - 1
        return SPRTState(start + k + 1, float(llrs[k]), self.decide(float(llrs[k])), tuple(map(int, prefixes[k])))


@dataclass(frozen=True)
class PairElo:
    """A's results over pairs: its mean score, Elo and normalized Elo with 95 % intervals, and the
    likelihood of superiority (probability that A is the stronger player)."""
    pairs: int
    score: float
    elo: float
    elo_ci95: tuple[float, float]
    nelo: float
    nelo_ci95: tuple[float, float]
    los: float


def _logistic_elo(score: float) -> float:
    """fishtest's stat_util.elo: the Elo of a score, the score kept within [0.001, 0.999]."""
    score = min(max(score, 1e-3), 1 - 1e-3)
    return -400.0 * math.log10(1.0 / score - 1.0)


def pair_elo(counts) -> PairElo:
    """Estimates from a pentanomial as fishtest's stat_util.get_elo makes them (regularized bins,
    normal interval on the mean score mapped through the Elo curve); the nElo interval divides that
    of the mean by the observed pair-score deviation."""
    counts = np.asarray(counts)
    pairs = int(counts.sum())
    if pairs == 0:
        raise ValueError("no pairs to estimate from")
    total, p = _regularized(counts)
    mu, sigma = (float(v[0]) for v in _mean_and_deviation(p[None]))   # of the pair score
    variance = sigma ** 2
    error = math.sqrt(variance / total)                                # of the mean pair score
    low, high = mu - Z95 * error, mu + Z95 * error
    per_nelo = NELO_PER_NT / math.sqrt(2 * variance)
    return PairElo(pairs=pairs, score=float(counts @ PAIR_SCORES) / pairs, elo=_logistic_elo(mu),
                   elo_ci95=(_logistic_elo(low), _logistic_elo(high)), nelo=(mu - 0.5) * per_nelo,
                   nelo_ci95=((low - 0.5) * per_nelo, (high - 0.5) * per_nelo),
                   los=normal_cdf((mu - 0.5) / error))
