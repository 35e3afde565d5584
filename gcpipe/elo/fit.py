"""Side-specific Bradley–Terry Elo (the reference fit of baselines.md §3).

Each (player, side) is its own entity: a player's Guerrilla rating and COIN rating are
separate numbers, and only Guerrilla–COIN games exist, so the entities form a bipartite graph
with one edge per played cell. The model is

    P(Guerrilla entity i beats COIN entity j) = 1 / (1 + 10 ** ((R_j - R_i) / 400)).

Every played cell gets a half-game prior (+0.5 Guerrilla win, +0.5 COIN win) before the
maximum-likelihood fit; this keeps ratings finite for 100-0 cells. Ratings are only
determined up to a common shift, which the anchor fixes: by default their mean is 1500, or a
named entry (player, side) gets a given value.

Confidence intervals ("±"): the half-width of the 95% Wald interval from the observed Fisher
information, i.e. the inverse Hessian of the log-likelihood (priors included) at the optimum,
for the *anchored* ratings. With a mean anchor it is the uncertainty of each entry relative to
the field mean; with a named anchor, relative to that entry (whose ± is 0).
"""
import math
from dataclasses import dataclass

import numpy as np
import scipy.optimize
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from gcpipe.elo.crosstable import CrossTable
from gcpipe.errors import UserError
from gcpipe.match.ledger import SIDES
from gcpipe.schema import ANCHOR_LIMIT
from gcpipe.stats.normal import Z95

SIDE_LABELS = {"guerrilla": "Guerrilla", "coin": "COIN"}
PRIOR_GAMES = 0.5  # per side and played cell
ELO_PER_NAT = 400 / math.log(10)  # Elo points per unit of natural log-odds
CI_METHOD = ("95% Wald interval from the inverse Hessian of the log-likelihood "
             "(half-game priors included), relative to the anchor")


@dataclass(frozen=True)
class Anchor:
    """How the free common shift is fixed: the mean of all entries, or one entry, = value."""
    value: float = 1500.0
    entity: tuple[str, str] | None = None

    @classmethod
    def parse(cls, spec: str) -> "Anchor":
        """'mean:1500' or 'PLAYER/SIDE:VALUE' (SIDE is guerrilla or coin), e.g. 'greedy/guerrilla:1000'."""
        target, colon, value_text = spec.rpartition(":")
        try:
            value = float(value_text)
        except ValueError:
            value = math.nan
        if not colon or not math.isfinite(value):
            raise UserError(f"bad anchor {spec!r}: expected 'mean:VALUE' or 'PLAYER/SIDE:VALUE'")
        if abs(value) > ANCHOR_LIMIT:
            raise UserError(f"bad anchor {spec!r}: the value must be within ±{ANCHOR_LIMIT:g} (ratings are "
                            f"written as plain numbers; a far-off anchor only loses their precision)")
        if target == "mean":
            return cls(value=value)
        player, slash, side = target.rpartition("/")
        if not slash or not player or side.lower() not in SIDES:
            raise UserError(f"bad anchor {spec!r}: expected 'mean:VALUE' or 'PLAYER/SIDE:VALUE' "
                            f"with SIDE one of {', '.join(SIDES)}")
        return cls(value=value, entity=(player, side.lower()))

    def describe(self) -> str:
        if self.entity is None:
            return f"mean of all entries = {self.value:g}"
        return f"{self.entity[0]} as {SIDE_LABELS[self.entity[1]]} = {self.value:g}"


@dataclass(frozen=True)
class EloRatings:
    """The fitted ratings; arrays are aligned with `entities`, (player, side) pairs."""
    entities: tuple[tuple[str, str], ...]
    elo: np.ndarray
    ci95: np.ndarray        # half-widths, Elo points
    games: np.ndarray       # games played by the entity (no priors)
    wins: np.ndarray        # games won by the entity (no priors)
    anchor: Anchor
    log_likelihood: float   # at the optimum, priors included, natural log
    # Covariance of `elo` (Elo^2) relative to the anchor, from the same inverse Hessian as ci95: the
    # variance of a difference R_i - R_j is C_ii + C_jj - 2 C_ij, which no choice of anchor changes.
    covariance: np.ndarray

    def rating(self, player: str, side: str) -> float:
        return float(self.elo[self.entities.index((player, side))])

    def ranked(self) -> list[int]:
        """Entity indices by rating, best first (ties keep entity order)."""
        return sorted(range(len(self.entities)), key=lambda k: -self.elo[k])


def _entities(table: CrossTable) -> tuple[tuple[str, str], ...]:
    """Guerrilla entities in row order, then COIN entities in column order."""
    return tuple((g, "guerrilla") for g in table.guerrillas) + tuple((c, "coin") for c in table.coins)


def _check_connected(entities, guerrilla_index, coin_index) -> None:
    """Ratings of separate components are not comparable; name the components."""
    n = len(entities)
    graph = coo_matrix((np.ones(len(guerrilla_index)), (guerrilla_index, coin_index)), shape=(n, n))
    count, labels = connected_components(graph, directed=False)
    if count > 1:
        groups = [", ".join(f"{p}/{s}" for k, (p, s) in enumerate(entities) if labels[k] == label)
                  for label in dict.fromkeys(labels)]
        raise UserError("the field is not connected, so its groups cannot be rated against each "
                        "other: " + " | ".join(f"{{{group}}}" for group in groups))


def fit_elo(table: CrossTable, anchor: Anchor = Anchor()) -> EloRatings:
    """Maximum-likelihood side-specific Bradley–Terry ratings of a cross table (see module doc)."""
    entities = _entities(table)
    n = len(entities)
    index = {entity: k for k, entity in enumerate(entities)}
    cells = table.cells()
    g_idx = np.array([index[(g, "guerrilla")] for g, _, _, _ in cells])
    c_idx = np.array([index[(c, "coin")] for _, c, _, _ in cells])
    g_wins = np.array([gw for _, _, gw, _ in cells], dtype=float)
    c_wins = np.array([cw for _, _, _, cw in cells], dtype=float)
    _check_connected(entities, g_idx, c_idx)
    if anchor.entity is not None and anchor.entity not in index:
        raise UserError(f"anchor {anchor.entity[0]}/{anchor.entity[1]} is not in the field; "
                        f"entries: {', '.join(f'{p}/{s}' for p, s in entities)}")

    won = g_wins + PRIOR_GAMES      # Guerrilla wins per cell, prior included
    played = won + c_wins + PRIOR_GAMES

    def hessian(theta):
        """Hessian of the negative log-likelihood (a weighted graph Laplacian)."""
        p = _sigmoid(theta[g_idx] - theta[c_idx])
        weight = played * p * (1 - p)
        h = np.diag(_per_entity(g_idx, weight, n) + _per_entity(c_idx, weight, n))
        h[g_idx, c_idx] = -weight  # each (G, C) pair is one cell, so no index repeats here
        h[c_idx, g_idx] = -weight
        return h

    # The likelihood only sees rating differences, so fix entity 0 at 0 to make the problem
    # strictly convex; the anchor shift is applied afterwards. Variables are natural log-odds.
    def full(free):
        return np.concatenate(([0.0], free))

    def objective(free):
        """Negative log-likelihood and its gradient in the free variables."""
        theta = full(free)
        d = theta[g_idx] - theta[c_idx]
        negative_ll = np.sum(won * np.logaddexp(0, -d) + (played - won) * np.logaddexp(0, d))
        residual = played * _sigmoid(d) - won  # d(-LL)/d(d) per cell
        gradient = _per_entity(g_idx, residual, n) - _per_entity(c_idx, residual, n)
        return negative_ll, gradient[1:]

    def hessian_free(free):
        return hessian(full(free))[1:, 1:]

    # The optimum is where the gradient vanishes: MINPACK's hybrid method (scipy.optimize.root)
    # solves that with the exact Hessian as the Jacobian, to about 1e-9 Elo.  scipy.optimize.
    # minimize's trust-exact and Newton-CG stop up to 1e-3 Elo short on ill-conditioned fields
    # (near the optimum their acceptance tests compare function values whose differences drown
    # in rounding), which would change the tables' last written decimal.
    def solve(start):
        return scipy.optimize.root(lambda free: objective(free)[1], start, jac=hessian_free, method="hybr",
                                   options={"xtol": 1e-12})

    result = solve(np.zeros(n - 1))
    if not result.success:
        # The hybrid method converges only from near enough: from 0 it stalls on some lopsided
        # fields (a 10-0 cell beside a 948-52 one).  Newton steps with a backtracking line search
        # descend the convex objective from anywhere; it finishes from where they stop.
        result = solve(_damped_newton(objective, hessian_free, np.zeros(n - 1)))
    if not result.success:
        raise RuntimeError(f"Bradley–Terry fit did not converge: {result.message}")
    free = result.x
    negative_ll = float(objective(free)[0])
    theta = full(free)
    information = hessian(theta)

    if anchor.entity is None:
        theta = theta - theta.mean()
        # Covariance of the mean-centred ratings: the pseudo-inverse of the Laplacian-shaped
        # information matrix, whose null space is exactly the common shift.
        covariance = np.linalg.pinv(information, hermitian=True)
    else:
        k = index[anchor.entity]
        theta = theta - theta[k]
        others = [m for m in range(n) if m != k]
        covariance = np.zeros((n, n))
        covariance[np.ix_(others, others)] = np.linalg.inv(information[np.ix_(others, others)])
    variance = np.clip(np.diag(covariance), 0.0, None)

    games = _per_entity(g_idx, g_wins + c_wins, n) + _per_entity(c_idx, g_wins + c_wins, n)
    wins = _per_entity(g_idx, g_wins, n) + _per_entity(c_idx, c_wins, n)
    return EloRatings(entities=entities, elo=anchor.value + ELO_PER_NAT * theta,
                      ci95=Z95 * ELO_PER_NAT * np.sqrt(variance),
                      games=games.astype(int), wins=wins.astype(int), anchor=anchor,
                      log_likelihood=-negative_ll, covariance=ELO_PER_NAT ** 2 * covariance)


def _damped_newton(objective, hessian, x, steps: int = 200):
    """Newton's method with a backtracking (Armijo) line search on a smooth strictly convex
    objective -> (value, gradient): each step lowers the value, so it converges from any start.
    Stops when a full step no longer lowers the value (the optimum to rounding) or after `steps`."""
    value, gradient = objective(x)
    for _ in range(steps):
        direction = np.linalg.solve(hessian(x), gradient)
        slope = float(gradient @ direction)
        if not slope > 0:
            break
        t = 1.0
        while True:
            trial_value, trial_gradient = objective(x - t * direction)
            if trial_value <= value - 1e-4 * t * slope:
                break
            t /= 2
            if t < 1e-12:
                return x
        x, value, gradient = x - t * direction, trial_value, trial_gradient
    return x


def _per_entity(entity_index, values, n):
    """Sum per-cell values into per-entity totals."""
    return np.bincount(entity_index, weights=values, minlength=n)


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * x))
