"""An Ordo-style summary: one rating per player plus one Guerrilla advantage A (Ordo's "white
advantage"), fitted to the same cross table as the side-specific ratings:

    P(player i as Guerrilla beats player j as COIN) = 1 / (1 + 10^(-(r_i - r_j + A) / 400)),

with the same half-game prior per played cell.  A player's side ratings in this model are
r + A/2 (Guerrilla) and r - A/2 (COIN), so r is their mean and the side-specific anchor
('PLAYER/SIDE:VALUE') means the same thing here.  Intervals are 95 % Wald intervals from the
inverse Hessian, relative to the anchor.  One number per player is a simplification for a game this
asymmetric; the deviance against the side-specific fit (2 x the log-likelihood it gives up, with
`degrees_of_freedom` fewer parameters) says by how much.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.optimize
import scipy.special
from matplotlib.figure import Figure

from gcpipe.elo.crosstable import CrossTable
from gcpipe.elo.fit import ELO_PER_NAT, PRIOR_GAMES, Anchor, EloRatings
from gcpipe.errors import UserError
from gcpipe.io import csv_text, markdown_table
from gcpipe.plots import png_bytes
from gcpipe.stats.normal import Z95

ORDO_FILES = ("ordo.csv", "ordo.json", "ordo.md", "ordo.png")
MODEL = ("one rating per player and a Guerrilla advantage A: P(i as Guerrilla beats j as COIN) = "
         "1/(1+10^(-(r_i - r_j + A)/400)), half-game prior per played cell")


@dataclass(frozen=True)
class PlayerRatings:
    """Arrays aligned with `players`; `advantage` is A in Elo."""
    players: tuple[str, ...]
    elo: np.ndarray
    ci95: np.ndarray
    covariance: np.ndarray     # of elo, Elo^2, relative to the anchor
    advantage: float
    advantage_ci95: float
    games: np.ndarray
    wins: np.ndarray
    anchor: Anchor
    log_likelihood: float      # at the optimum, priors included, natural log


def fit_players(table: CrossTable, anchor: Anchor = Anchor()) -> PlayerRatings:
    """Maximum-likelihood ratings of the model above (see the module doc)."""
    players = table.players
    n = len(players)
    index = {player: k for k, player in enumerate(players)}
    if anchor.entity is not None and anchor.entity[0] not in index:
        raise UserError(f"anchor {anchor.entity[0]}/{anchor.entity[1]} is not in the field")
    cells = table.cells()
    # Design matrix over (r_0 .. r_{n-1}, A); r_0 = 0 fixes the common shift, the anchor moves it later.
    design = np.zeros((len(cells), n + 1))
    for row, (g, c, _, _) in enumerate(cells):
        design[row, index[g]] += 1.0
        design[row, index[c]] -= 1.0
        design[row, n] = 1.0
    free = design[:, 1:]
    if np.linalg.matrix_rank(free) < n:
        raise UserError("the Ordo summary cannot tell the players' strengths from the Guerrilla advantage "
                        "with these cells: it needs a connected field where some player meets another "
                        "from both sides (or a self cell)")
    won = np.array([gw for _, _, gw, _ in cells], float) + PRIOR_GAMES
    played = np.array([gw + cw for _, _, gw, cw in cells], float) + 2 * PRIOR_GAMES

    def objective(theta):
        d = free @ theta
        negative_ll = np.sum(won * np.logaddexp(0, -d) + (played - won) * np.logaddexp(0, d))
        return negative_ll, free.T @ (played * scipy.special.expit(d) - won)

    def hessian(theta):
        p = scipy.special.expit(free @ theta)
        return free.T @ ((played * p * (1 - p))[:, None] * free)

    theta = scipy.optimize.minimize(objective, np.zeros(n), jac=True, hess=hessian, method="trust-exact").x
    # trust-exact can stop a rounding step short of the optimum ("a bad approximation caused failure to
    # predict improvement"); from there Newton steps converge quadratically to it.
    for _ in range(3):
        theta = theta - np.linalg.solve(hessian(theta), objective(theta)[1])
    if np.max(np.abs(objective(theta)[1])) > 1e-9 * played.sum():     # rounding noise grows with the games
        raise RuntimeError("the Ordo fit did not converge")
    embed = np.vstack([np.zeros(n), np.eye(n)])                 # free -> (r_0 .. r_{n-1}, A)
    parameters = embed @ theta
    negative_ll = objective(theta)[0]
    covariance = embed @ np.linalg.inv(hessian(theta)) @ embed.T
    anchored = _anchor_map(n, anchor, index)                    # (r, A) -> anchored r - value
    elo_covariance = ELO_PER_NAT ** 2 * anchored @ covariance @ anchored.T
    games = np.zeros(n)
    wins = np.zeros(n)
    for g, c, gw, cw in cells:
        games[index[g]] += gw + cw
        games[index[c]] += gw + cw
        wins[index[g]] += gw
        wins[index[c]] += cw
    return PlayerRatings(players=players, elo=anchor.value + ELO_PER_NAT * anchored @ parameters,
                         ci95=Z95 * np.sqrt(np.clip(np.diag(elo_covariance), 0.0, None)),
                         covariance=elo_covariance, advantage=float(ELO_PER_NAT * parameters[n]),
                         advantage_ci95=float(Z95 * ELO_PER_NAT * np.sqrt(covariance[n, n])),
                         games=games.astype(int), wins=wins.astype(int), anchor=anchor,
                         log_likelihood=-float(negative_ll))


def _anchor_map(n: int, anchor: Anchor, index: dict) -> np.ndarray:
    """The linear map from (r_0 .. r_{n-1}, A) to the anchored ratings (before adding its value):
    ratings minus their mean, or minus the anchored player's side rating r_p +- A/2."""
    shift = np.zeros((n, n + 1))
    if anchor.entity is None:
        shift[:, :n] = 1.0 / n
    else:
        player, side = anchor.entity
        shift[:, index[player]] = 1.0
        shift[:, n] = 0.5 if side == "guerrilla" else -0.5
    return np.hstack([np.eye(n), np.zeros((n, 1))]) - shift


def ordo_outputs(players: PlayerRatings, ratings: EloRatings) -> dict:
    """The contents of ORDO_FILES by file name; `ratings` (the side-specific fit of the same table)
    gives the deviance."""
    ranked = sorted(range(len(players.players)), key=lambda k: -players.elo[k])
    entries = [{"rank": rank, "player": players.players[k], "elo": round(float(players.elo[k]), 3),
                "ci95": round(float(players.ci95[k]), 3), "games": int(players.games[k]),
                "wins": int(players.wins[k]), "score": round(players.wins[k] / players.games[k], 6)}
               for rank, k in enumerate(ranked, start=1)]
    deviance = 2 * (ratings.log_likelihood - players.log_likelihood)
    extra = len(ratings.entities) - 1 - len(players.players)
    advantage = f"{players.advantage:+.0f} ± {players.advantage_ci95:.0f}"
    anchor = (f"mean of all players = {players.anchor.value:g}" if players.anchor.entity is None
              else players.anchor.describe())
    keys = list(entries[0])
    return {
        "ordo.csv": csv_text([keys] + [[f"{e[key]:.3f}" if key in ("elo", "ci95") else
                                        f"{e[key]:.6f}" if key == "score" else e[key] for key in keys]
                                       for e in entries]),
        "ordo.json": {"model": MODEL, "anchor": anchor,
                      "guerrilla_advantage": {"elo": round(players.advantage, 3),
                                              "ci95": round(players.advantage_ci95, 3)},
                      "log_likelihood": round(players.log_likelihood, 6),
                      "deviance_vs_side_specific": round(deviance, 6), "degrees_of_freedom": extra,
                      "ratings": entries},
        "ordo.md": "\n".join([
            "# One rating per player (Ordo style)", "",
            f"Model: {MODEL}. Anchor: {anchor}. ± is a 95 % Wald interval.",
            f"Guerrilla advantage A = {advantage} Elo. Deviance against the side-specific ratings: "
            f"{deviance:.1f} for {extra} fewer parameters.", "",
            markdown_table(["Rank", "Player", "Elo", "±", "Games", "Score %"],
                           [[e["rank"], e["player"], f"{e['elo']:.0f}", f"{e['ci95']:.0f}", e["games"],
                             f"{100 * e['score']:.1f}"] for e in entries], right_from=2)]),
        "ordo.png": _ordo_png(players, ranked, advantage),
    }


def _ordo_png(players: PlayerRatings, ranked: list[int], advantage: str) -> bytes:
    figure = Figure(figsize=(6, 1.2 + 0.4 * len(ranked)), layout="constrained")
    axes = figure.add_subplot()
    axes.errorbar([players.elo[k] for k in ranked], range(len(ranked)),
                  xerr=[players.ci95[k] for k in ranked], fmt="o", capsize=3, color="tab:blue")
    axes.set_yticks(range(len(ranked)), [players.players[k] for k in ranked])
    axes.invert_yaxis()
    axes.set_xlabel("Elo (error bars: 95% CI)")
    axes.set_title(f"One rating per player; Guerrilla advantage {advantage} Elo", fontsize=9)
    axes.grid(axis="x", alpha=0.3)
    return png_bytes(figure)
