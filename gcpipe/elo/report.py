"""Elo outputs: ratings and cross table as CSV, JSON and Markdown, plus two PNG plots; rating
differences with the likelihood of superiority and the head-to-head listing (superiority.py); and,
when asked, the one-rating-per-player summary (ordo.py).

Everything is written atomically and is byte-identical for the same inputs: numbers are
rounded before formatting, row order follows the cross table's player order, and the PNGs
carry no software/version metadata.
"""
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from gcpipe import paths
from gcpipe.elo.crosstable import CrossTable, crosstable_from_ledgers, read_crosstable
from gcpipe.elo.fit import CI_METHOD, SIDE_LABELS, Anchor, EloRatings, fit_elo
from gcpipe.elo.ordo import PlayerRatings, fit_players, ordo_outputs
from gcpipe.elo.superiority import HEAD_TO_HEAD_FILES, SUPERIORITY_FILES, superiority_outputs
from gcpipe.errors import UserError
from gcpipe.io import atomic_write_bytes, atomic_write_json, atomic_write_text, csv_text
from gcpipe.plots import png_bytes

OUTPUT_FILES = ("ratings.csv", "ratings.json", "ratings.md", "crosstable.csv", "crosstable.json",
                "crosstable.md", "ratings.png", "crosstable.png") + SUPERIORITY_FILES + HEAD_TO_HEAD_FILES
_DECIMALS = 3  # Elo values in CSV/JSON; far below the statistical resolution


def _entries(ratings: EloRatings) -> list[dict]:
    """One dict per entity, ranked best first."""
    return [{"rank": rank, "player": ratings.entities[k][0], "side": ratings.entities[k][1],
             "elo": round(float(ratings.elo[k]), _DECIMALS),
             "ci95": round(float(ratings.ci95[k]), _DECIMALS),
             "games": int(ratings.games[k]), "wins": int(ratings.wins[k]),
             "score": round(ratings.wins[k] / ratings.games[k], 6)}
            for rank, k in enumerate(ratings.ranked(), start=1)]


def ratings_table_markdown(ratings: EloRatings) -> str:
    """Ranked ratings: rank, player, side, Elo, ±, games, score %."""
    lines = ["| Rank | Player | Side | Elo | ± | Games | Score % |",
             "| ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for entry in _entries(ratings):
        lines.append(f"| {entry['rank']} | {entry['player']} | {SIDE_LABELS[entry['side']]} | "
                     f"{entry['elo']:.0f} | {entry['ci95']:.0f} | {entry['games']} | "
                     f"{100 * entry['score']:.1f} |")
    return "\n".join(lines) + "\n"


def _ratings_markdown(ratings: EloRatings, table: CrossTable) -> str:
    by_player = [f"| {player} | " + " | ".join(
        f"{ratings.rating(player, side):.0f}" if (player, side) in ratings.entities else "—"
        for side in SIDE_LABELS) + " |" for player in table.players]
    return "\n".join([
        "# Side-specific Bradley–Terry Elo",
        "",
        f"Anchor: {ratings.anchor.describe()}. Each (player, side) is rated separately; every "
        "played cell carries a half-game prior (+0.5 win, +0.5 loss).",
        f"± is the half-width of the {CI_METHOD}.",
        "",
        ratings_table_markdown(ratings),
        "| Player | Guerrilla Elo | COIN Elo |",
        "| --- | ---: | ---: |",
        *by_player,
        "",
    ])


def _ratings_csv(ratings: EloRatings) -> str:
    return csv_text([["rank", "player", "side", "elo", "ci95", "games", "wins", "score"]] + [
        [entry["rank"], entry["player"], entry["side"], f"{entry['elo']:.3f}", f"{entry['ci95']:.3f}",
         entry["games"], entry["wins"], f"{entry['score']:.6f}"] for entry in _entries(ratings)])


def _crosstable_csv(table: CrossTable) -> str:
    return csv_text([["guerrilla", "coin", "games", "guerrilla_wins", "coin_wins", "guerrilla_win_rate"]] + [
        [cell["guerrilla"], cell["coin"], cell["games"], cell["guerrilla_wins"], cell["coin_wins"],
         f"{cell['guerrilla_win_rate']:.6f}"] for cell in table.to_json()["cells"]])


def _ratings_png(ratings: EloRatings, table: CrossTable) -> bytes:
    players = table.players
    figure = Figure(figsize=(7, 1.2 + 0.45 * len(players)), layout="constrained")
    axes = figure.add_subplot()
    for offset, side, color in ((-0.15, "guerrilla", "tab:green"), (0.15, "coin", "tab:orange")):
        rows = [(y, ratings.entities.index((p, side))) for y, p in enumerate(players)
                if (p, side) in ratings.entities]
        axes.errorbar([ratings.elo[k] for _, k in rows], [y + offset for y, _ in rows],
                      xerr=[ratings.ci95[k] for _, k in rows], fmt="o", capsize=3, color=color,
                      label=SIDE_LABELS[side])
    axes.set_yticks(range(len(players)), players)
    axes.invert_yaxis()
    axes.set_xlabel("Elo (error bars: 95% CI)")
    axes.set_title(f"Side-specific Bradley–Terry Elo ({ratings.anchor.describe()})", fontsize=9)
    axes.grid(axis="x", alpha=0.3)
    axes.legend(loc="best", fontsize=8)
    return png_bytes(figure)


def _crosstable_png(table: CrossTable) -> bytes:
    rate = np.full((len(table.guerrillas), len(table.coins)), np.nan)
    for g, c, gw, cw in table.cells():
        rate[table.guerrillas.index(g), table.coins.index(c)] = gw / (gw + cw)
    figure = Figure(figsize=(1.6 + 1.1 * len(table.coins), 1.2 + 0.6 * len(table.guerrillas)),
                    layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(np.ma.masked_invalid(rate), cmap="RdBu_r", vmin=0, vmax=1, aspect="auto")
    for g, c, gw, cw in table.cells():
        row, column = table.guerrillas.index(g), table.coins.index(c)
        shade = abs(rate[row, column] - 0.5) > 0.3
        axes.text(column, row, f"{gw}-{cw}", ha="center", va="center", fontsize=8,
                  color="white" if shade else "black")
    axes.set_xticks(range(len(table.coins)), table.coins, rotation=30, ha="right")
    axes.set_yticks(range(len(table.guerrillas)), table.guerrillas)
    axes.set_xlabel("COIN")
    axes.set_ylabel("Guerrilla")
    figure.colorbar(image, ax=axes, label="Guerrilla win rate")
    return png_bytes(figure)


def write_elo_outputs(ratings: EloRatings, table: CrossTable, out_dir,
                      players: PlayerRatings | None = None) -> list[Path]:
    """Write OUTPUT_FILES into out_dir, and ORDO_FILES when `players` (the Ordo-style fit of the
    same table) is given; returns their paths."""
    out_dir = Path(out_dir)
    ratings_json = {
        "model": "side-specific Bradley-Terry, P(G beats C) = 1/(1+10^((R_C-R_G)/400)), "
                 "half-game prior per played cell",
        "anchor": {"entity": None if ratings.anchor.entity is None else
                   {"player": ratings.anchor.entity[0], "side": ratings.anchor.entity[1]},
                   "value": ratings.anchor.value},
        "ci95": CI_METHOD,
        "log_likelihood": round(ratings.log_likelihood, 6),
        "ratings": _entries(ratings),
        "player_ids": table.to_json()["player_ids"],
    }
    contents = {
        "ratings.csv": _ratings_csv(ratings),
        "ratings.json": ratings_json,
        "ratings.md": _ratings_markdown(ratings, table),
        "crosstable.csv": _crosstable_csv(table),
        "crosstable.json": table.to_json(),
        "crosstable.md": "# Cross table (Guerrilla wins - COIN wins)\n\n" + table.markdown(),
        "ratings.png": _ratings_png(ratings, table),
        "crosstable.png": _crosstable_png(table),
        **superiority_outputs(ratings, table),
        **(ordo_outputs(players, ratings) if players is not None else {}),
    }
    for name in contents:
        value = contents[name]
        if isinstance(value, bytes):
            atomic_write_bytes(out_dir / name, value)
        elif isinstance(value, str):
            atomic_write_text(out_dir / name, value)
        else:
            atomic_write_json(out_dir / name, value)
    return [out_dir / name for name in contents]


def elo_table(ledgers=(), out_dir=paths.ELO, anchor="mean:1500", order=None,
              crosstable=None, ordo: bool = False, plan: dict | None = None) -> EloRatings:
    """The `gcpipe elo` stage: fit ledgers (or a cross-table file) and write all outputs, the
    Ordo-style summary too when `ordo`; with a pipeline's `plan` the ledgers must be exactly that
    plan's (crosstable_from_ledgers)."""
    if bool(ledgers) == bool(crosstable):
        raise UserError("give either ledgers or a cross table file, not both or neither")
    if crosstable and plan is not None:
        raise UserError("a match plan (--config) checks ledgers, not a cross table file")
    table = (read_crosstable(crosstable, order=order) if crosstable
             else crosstable_from_ledgers(ledgers, order=order, plan=plan))
    anchor = Anchor.parse(anchor) if isinstance(anchor, str) else anchor
    ratings = fit_elo(table, anchor)
    write_elo_outputs(ratings, table, out_dir, fit_players(table, anchor) if ordo else None)
    return ratings
