"""SPRT correctness by simulation: the error rates and average sample numbers of gcpipe's SPRT
(gcpipe.stats.sprt, the rule `gcpipe compare --sprt` applies) against Wald's approximations.

Game model (Bernoulli games, no draws): equal players win as Guerrilla with probability g0; a
player stronger by d logistic Elo on both sides wins as Guerrilla with L(b + d) and as COIN with
L(d - b), b = Elo(g0), L(x) = 1 / (1 + 10^(-x / 400)).  d is solved so that the pairs' true
normalized (or logistic) Elo is ELO0 (then H0 holds) or ELO1 (H1).  Each run draws pairs until the
test decides, exactly as compare scans its ledgers (the LLR after every pair); runs still open at
--max-pairs count as undecided.

Wald: under H0 the test accepts H1 with probability about alpha (bound alpha / (1 - beta)), under H1
it accepts H0 with about beta (bound beta / (1 - alpha)); the average sample number is
E[N] = (P(accept H0) * lower + P(accept H1) * upper) / drift, drift being the LLR's expected change
per pair (no overshoot, so the real test stops a little later and errs a little less).

    python benchmarks/sprt_simulation.py [--runs 2000] [--elo0 0] [--elo1 20] [--model normalized]
                                         [--guerrilla-rate 0.33] [--seed 1]
"""
import argparse
import math
import time

import numpy as np
import scipy.optimize

from gcpipe.stats.normal import Z95
from gcpipe.stats.sprt import NELO_PER_NT, PAIR_SCORES, SPRT, logistic_score


def pair_distribution(p_guerrilla: float, p_coin: float) -> np.ndarray:
    """P(pair score 0, 1/4, 1/2, 3/4, 1) when A wins its Guerrilla game with p_guerrilla, its COIN game
    with p_coin."""
    both, neither = p_guerrilla * p_coin, (1 - p_guerrilla) * (1 - p_coin)
    return np.array([neither, 0.0, 1.0 - both - neither, 0.0, both])


def true_elo(distribution: np.ndarray, model: str) -> float:
    mu = float(distribution @ PAIR_SCORES)
    if model == "logistic":
        return -400 * math.log10(1 / mu - 1)
    sigma = math.sqrt(float(distribution @ (PAIR_SCORES - mu) ** 2))
    return (mu - 0.5) / sigma / math.sqrt(2) * NELO_PER_NT


def side_rates(target: float, guerrilla_rate: float, model: str) -> tuple[float, float]:
    """A's win rates as Guerrilla and as COIN when its pairs' true Elo is `target`."""
    bias = -400 * math.log10(1 / guerrilla_rate - 1)

    def rates(d):
        return logistic_score(bias + d), logistic_score(d - bias)

    d = scipy.optimize.brentq(lambda d: true_elo(pair_distribution(*rates(d)), model) - target, -800, 800,
                              xtol=1e-12)
    return rates(d)


def simulate(test: SPRT, p_guerrilla: float, p_coin: float, runs: int, max_pairs: int,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per run: the pairs it took and its decision (1 H1, 0 H0, -1 none by max_pairs)."""
    counts = np.zeros((runs, 5), np.int64)
    pairs = np.full(runs, max_pairs)
    decision = np.full(runs, -1)
    active = np.arange(runs)
    lower, upper = test.bounds
    for n in range(1, max_pairs + 1):
        wins = (rng.random(len(active)) < p_guerrilla).astype(int) + (rng.random(len(active)) < p_coin)
        counts[active, 2 * wins] += 1
        llr = test.llr(counts[active])
        stopped = (llr >= upper) | (llr <= lower)
        pairs[active[stopped]] = n
        decision[active[stopped]] = (llr[stopped] >= upper).astype(int)
        active = active[~stopped]
        if not len(active):
            break
    return pairs, decision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--elo0", type=float, default=0.0)
    parser.add_argument("--elo1", type=float, default=20.0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--beta", type=float, default=0.05)
    parser.add_argument("--model", choices=["normalized", "logistic"], default="normalized")
    parser.add_argument("--guerrilla-rate", type=float, default=0.33,
                        help="Guerrilla win rate between equal players (greedy vs greedy: 0.335).")
    parser.add_argument("--max-pairs", type=int, default=0, help="Cap per run (default 20 x Wald's ASN).")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    test = SPRT(args.elo0, args.elo1, args.alpha, args.beta, args.model)
    lower, upper = test.bounds
    rng = np.random.default_rng(args.seed)
    print(f"SPRT {test.describe()}, {args.model} model; bounds {lower:.4f}, {upper:.4f}; "
          f"equal players win {args.guerrilla_rate:g} as Guerrilla; {args.runs} runs per hypothesis")
    for truth, elo, wrong, nominal in (("H0", test.elo0, 1, test.alpha), ("H1", test.elo1, 0, test.beta)):
        p_guerrilla, p_coin = side_rates(elo, args.guerrilla_rate, args.model)
        distribution = pair_distribution(p_guerrilla, p_coin)
        drift = test.drift(distribution)
        accept_h1 = test.alpha if truth == "H0" else 1 - test.beta
        wald_asn = ((1 - accept_h1) * lower + accept_h1 * upper) / drift
        bound = nominal / (1 - (test.beta if truth == "H0" else test.alpha))
        start = time.perf_counter()
        pairs, decision = simulate(test, p_guerrilla, p_coin, args.runs, args.max_pairs or int(20 * wald_asn), rng)
        errors = int(np.sum(decision == wrong))
        undecided = int(np.sum(decision < 0))
        rate = errors / args.runs
        half_width = Z95 * math.sqrt(rate * (1 - rate) / args.runs)
        print(f"true {test.unit} = {elo:g} ({truth}): wins as Guerrilla {p_guerrilla:.4f}, as COIN {p_coin:.4f}; "
              f"LLR drift {drift:+.5f} per pair")
        print(f"  wrong decisions {errors}/{args.runs} = {rate:.4f} ± {half_width:.4f} "
              f"(nominal {nominal:g}, Wald bound {bound:.4f}); undecided {undecided}")
        print(f"  average sample number {pairs.mean():.1f} pairs = {2 * pairs.mean():.1f} games "
              f"(Wald {wald_asn:.1f} pairs); median {np.median(pairs):.0f}, 95th percentile "
              f"{np.percentile(pairs, 95):.0f}; {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
