"""Pairs of ratings: differences with 95 % intervals from the fit's full covariance, the likelihood
of superiority (LOS), and each played cell beside what the ratings predict for it.

Superiority compares entries of one side (who is the better Guerrilla, who the better COIN): the
difference of a Guerrilla rating and a COIN rating is not a comparison of strength but the
predicted result of a cell, which the head-to-head listing gives for every played cell.

    difference   d = R_a - R_b,   se = sqrt(C_aa + C_bb - 2 C_ab)   (C = EloRatings.covariance)
    ci95         Z95 * se (Wald, like the per-entry ±; unlike it, free of the anchor)
    LOS          Phi(d / se): the probability that a is the stronger, in the normal approximation
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from gcpipe.elo.crosstable import CrossTable
from gcpipe.elo.fit import SIDE_LABELS, EloRatings
from gcpipe.io import csv_text, markdown_table
from gcpipe.match.ledger import SIDES
from gcpipe.plots import png_bytes
from gcpipe.stats.normal import Z95, normal_cdf

SUPERIORITY_FILES = ("superiority.csv", "superiority.json", "superiority.md", "superiority.png")
HEAD_TO_HEAD_FILES = ("headtohead.csv", "headtohead.json", "headtohead.md")
METHOD = ("R_a - R_b with a 95% Wald interval from the fit's covariance, sqrt(C_aa + C_bb - 2 C_ab); "
          "LOS = Phi((R_a - R_b) / se)")


def difference(ratings: EloRatings, a: int, b: int) -> tuple[float, float]:
    """R_a - R_b and its standard error, entities given by index."""
    c = ratings.covariance
    return float(ratings.elo[a] - ratings.elo[b]), math.sqrt(max(c[a, a] + c[b, b] - 2 * c[a, b], 0.0))


def side_comparisons(ratings: EloRatings, side: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The players rated on `side` and [row, column] matrices of R_row - R_column, its ci95 and the
    LOS of row over column (NaN on the diagonal)."""
    indices = [k for k, (_, s) in enumerate(ratings.entities) if s == side]
    n = len(indices)
    diff, ci95, los = (np.full((n, n), np.nan) for _ in range(3))
    for i, a in enumerate(indices):
        for j, b in enumerate(indices):
            if i != j:
                d, se = difference(ratings, a, b)
                diff[i, j], ci95[i, j] = d, Z95 * se
                los[i, j] = normal_cdf(d / se)
    return [ratings.entities[k][0] for k in indices], diff, ci95, los


def head_to_head(ratings: EloRatings, table: CrossTable) -> list[dict]:
    """Every played cell: its games and wins, the Guerrilla win rate, the rate the ratings predict,
    and R_G - R_C with its interval."""
    rows = []
    for g, c, gw, cw in table.cells():
        a, b = ratings.entities.index((g, "guerrilla")), ratings.entities.index((c, "coin"))
        d, se = difference(ratings, a, b)
        rows.append({"guerrilla": g, "coin": c, "games": gw + cw, "guerrilla_wins": gw, "coin_wins": cw,
                     "guerrilla_win_rate": round(gw / (gw + cw), 6),
                     "expected_win_rate": round(1 / (1 + 10 ** (-d / 400)), 6),
                     "elo_diff": round(d, 3), "ci95": round(Z95 * se, 3)})
    return rows


def superiority_outputs(ratings: EloRatings, table: CrossTable) -> dict:
    """The contents of SUPERIORITY_FILES and HEAD_TO_HEAD_FILES by file name."""
    sides = {side: side_comparisons(ratings, side) for side in SIDES}
    csv_rows = [["side", "player", "opponent", "elo_diff", "ci95", "los"]]
    json_sides = {}
    markdown = ["# Likelihood of superiority and rating differences", "",
                f"Within each side. Difference: {METHOD}.", ""]
    for side, (players, diff, ci95, los) in sides.items():
        pairs = [(i, j) for i in range(len(players)) for j in range(len(players)) if i != j]
        csv_rows += [[side, players[i], players[j], f"{diff[i, j]:.3f}", f"{ci95[i, j]:.3f}", f"{los[i, j]:.6f}"]
                     for i, j in pairs]
        json_sides[side] = {"players": players, "elo_diff": _matrix(diff, 3), "ci95": _matrix(ci95, 3),
                            "los": _matrix(los, 6)}
        label = SIDE_LABELS[side]
        markdown += [f"## {label}: likelihood that the row player is stronger than the column player", "",
                     markdown_table([label, *players], [[players[i]] + [
                         "—" if i == j else f"{100 * los[i, j]:.1f}%" for j in range(len(players))]
                         for i in range(len(players))]),
                     f"## {label}: rating difference row − column (± 95 %)", "",
                     markdown_table([label, *players], [[players[i]] + [
                         "—" if i == j else f"{diff[i, j]:+.0f} ± {ci95[i, j]:.0f}" for j in range(len(players))]
                         for i in range(len(players))])]
    cells = head_to_head(ratings, table)
    keys = list(cells[0])
    return {
        "superiority.csv": csv_text(csv_rows),
        "superiority.json": {"method": METHOD, "sides": json_sides},
        "superiority.md": "\n".join(markdown),
        "superiority.png": _superiority_png(sides),
        "headtohead.csv": csv_text([keys] + [[_csv_value(key, cell[key]) for key in keys] for cell in cells]),
        "headtohead.json": {"method": "expected_win_rate = 1/(1+10^(-elo_diff/400)), elo_diff = R_G - R_C; "
                                      + METHOD.split(";")[0], "cells": cells},
        "headtohead.md": _head_to_head_markdown(cells),
    }


def _matrix(values: np.ndarray, decimals: int) -> list[list]:
    return [[None if math.isnan(v) else round(float(v), decimals) for v in row] for row in values]


def _csv_value(key: str, value) -> str:
    """Elo values with 3 decimals, rates with 6, as in ratings.csv and crosstable.csv."""
    if key in ("elo_diff", "ci95"):
        return f"{value:.3f}"
    return f"{value:.6f}" if isinstance(value, float) else str(value)


def _head_to_head_markdown(cells: list[dict]) -> str:
    rows = [[c["guerrilla"], c["coin"], c["games"], c["guerrilla_wins"], c["coin_wins"],
             f"{100 * c['guerrilla_win_rate']:.1f}", f"{100 * c['expected_win_rate']:.1f}",
             f"{c['elo_diff']:+.0f} ± {c['ci95']:.0f}"] for c in cells]
    return ("# Head to head: every played cell and what the ratings predict\n\n"
            "Expected: the Guerrilla win rate the fitted ratings give the cell (half-game priors included); "
            "R_G − R_C: the Guerrilla entry's rating minus the COIN entry's, ± 95 % from the covariance.\n\n"
            + markdown_table(["Guerrilla", "COIN", "Games", "G wins", "C wins", "G win %", "expected %",
                              "R_G − R_C"], rows, right_from=2))


def _superiority_png(sides: dict) -> bytes:
    size = max(len(players) for players, *_ in sides.values())
    figure = Figure(figsize=(2.4 + 2.0 * size, 1.6 + 0.5 * size), layout="constrained")
    for index, (side, (players, _, _, los)) in enumerate(sides.items()):
        axes = figure.add_subplot(1, len(sides), index + 1)
        image = axes.imshow(np.ma.masked_invalid(los), cmap="RdBu_r", vmin=0, vmax=1, aspect="equal")
        for i in range(len(players)):
            for j in range(len(players)):
                if i != j:
                    axes.text(j, i, f"{100 * los[i, j]:.0f}", ha="center", va="center", fontsize=7,
                              color="white" if abs(los[i, j] - 0.5) > 0.35 else "black")
        axes.set_xticks(range(len(players)), players, rotation=30, ha="right", fontsize=8)
        axes.set_yticks(range(len(players)), players, fontsize=8)
        axes.set_title(f"{SIDE_LABELS[side]}: LOS % (row over column)", fontsize=9)
    figure.colorbar(image, ax=figure.axes, label="likelihood of superiority", shrink=0.8)
    return png_bytes(figure)
