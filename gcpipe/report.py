"""Training curves: one PNG per run from its metrics.csv — win rate by side, PPO losses,
entropy and friends, and environment steps per second, each against the global step.

The PNG depends on the CSV only (no software/version metadata), so the same metrics give the
same bytes. Columns the trainer did not log (e.g. evaluations when they are off) are skipped.
"""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from matplotlib.figure import Figure

from gcpipe.errors import UserError
from gcpipe.io import atomic_write_bytes, read_text
from gcpipe.plots import png_bytes

STEP = "global_step"
# (panel title, y label, [(label, column or (numerator, denominator), style)]).
PANELS = (
    ("Win rate by side (training games)", "win rate", [
        ("as Guerrilla", ("wins_as_guerrilla", "games_as_guerrilla"), "-"),
        ("as COIN", ("wins_as_coin", "games_as_coin"), "-"),
        ("vs greedy as Guerrilla (eval)", "eval_win_rate_as_guerrilla", "o"),
        ("vs greedy as COIN (eval)", "eval_win_rate_as_coin", "o"),
    ]),
    ("PPO losses", "loss", [
        ("policy loss", "policy_loss", "-"),
        ("value loss", "value_loss", "-"),
    ]),
    ("Policy statistics", "value", [
        ("entropy", "entropy", "-"),
        ("clip fraction", "clip_fraction", "-"),
        ("approx. KL", "approx_kl", "-"),
        ("explained variance", "explained_variance", "-"),
    ]),
    ("Throughput", "env steps / s", [
        ("SPS", "sps", "-"),
    ]),
)
_COLORS = ("tab:green", "tab:orange", "tab:blue", "tab:red")


def read_metrics(path) -> dict[str, list[float]]:
    """The numeric columns of a metrics.csv (empty cells become NaN); UserError naming the file
    and line for anything that is not a number."""
    path = Path(path)
    try:
        text = read_text(path)
    except FileNotFoundError:
        raise UserError(f"metrics file {path} does not exist") from None
    except OSError as error:
        raise UserError(f"cannot read metrics file {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise UserError(f"metrics file {path} is not UTF-8 text (byte {error.start})") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or STEP not in rows[0]:
        raise UserError(f"{path} is not a training metrics file: no '{STEP}' column in its header")
    header, body = rows[0], rows[1:]
    if not body:
        raise UserError(f"{path} has no rows: the run logged no epoch yet")
    columns: dict[str, list[float]] = {name: [] for name in header}
    for line, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise UserError(f"{path}:{line}: {len(row)} fields, the header has {len(header)}")
        for name, cell in zip(header, row):
            try:
                columns[name].append(float(cell) if cell else math.nan)
            except ValueError:
                raise UserError(f"{path}:{line}: column {name}: {cell!r} is not a number") from None
    return columns


def _series(columns, source) -> list[float] | None:
    if isinstance(source, tuple):
        numerator, denominator = source
        if numerator not in columns or denominator not in columns:
            return None
        return [n / d if d > 0 else math.nan for n, d in zip(columns[numerator], columns[denominator])]
    return columns.get(source)


def training_png(columns: dict[str, list[float]], title: str = "") -> bytes:
    """The 2x2 training-curve figure as PNG bytes."""
    steps = columns[STEP]
    figure = Figure(figsize=(11, 7.5), layout="constrained")
    if title:
        figure.suptitle(f"Training: {title}")
    for index, (panel_title, ylabel, lines) in enumerate(PANELS):
        axes = figure.add_subplot(2, 2, index + 1)
        drawn = 0
        for (label, source, style), color in zip(lines, _COLORS):
            values = _series(columns, source)
            if values is None or all(math.isnan(v) for v in values):
                continue
            points = [(s, v) for s, v in zip(steps, values) if not math.isnan(v)]
            axes.plot([s for s, _ in points], [v for _, v in points], style, color=color,
                      label=label, markersize=4, linewidth=1.2)
            drawn += 1
        if drawn == 0:
            axes.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axes.transAxes)
        elif drawn > 1:
            axes.legend(loc="best", fontsize=8)
        if index == 0:
            axes.set_ylim(-0.02, 1.02)
        axes.set_title(panel_title, fontsize=10)
        axes.set_xlabel("environment steps")
        axes.set_ylabel(ylabel)
        axes.grid(alpha=0.3)
    return png_bytes(figure)


def reliability_png(reports: dict[str, dict]) -> bytes:
    """Reliability diagrams of `gcpipe values` reports (one line per checkpoint), one panel per side
    to move: observed Guerrilla win frequency against the mean predicted probability per bin."""
    figure = Figure(figsize=(11, 5), layout="constrained")
    for index, (side, title) in enumerate((("guerrilla_to_move", "Guerrilla to move"),
                                           ("coin_to_move", "COIN to move"))):
        axes = figure.add_subplot(1, 2, index + 1)
        axes.plot([0, 1], [0, 1], ":", color="grey", linewidth=1)
        for line, (label, report) in enumerate(reports.items()):
            bins = report[side]["reliability"]
            style = "o-" if line < len(_COLORS) else "s--"      # past the palette: the colours again, dashed
            axes.plot([b["mean_predicted"] for b in bins], [b["observed"] for b in bins], style,
                      color=_COLORS[line % len(_COLORS)], markersize=4, linewidth=1.2,
                      label=f"{label} (Brier {report[side]['brier_net_value']:.3f})")
        axes.set_xlim(0, 1)
        axes.set_ylim(0, 1)
        axes.set_title(title, fontsize=10)
        axes.set_xlabel("predicted P(Guerrilla wins): (value + 1) / 2")
        axes.set_ylabel("observed Guerrilla win frequency")
        axes.grid(alpha=0.3)
        axes.legend(loc="upper left", fontsize=8)
    return png_bytes(figure)


def plot_training(metrics_path, out_path, title: str = "") -> Path:
    """Write the training curves of `metrics_path` to `out_path` (PNG, atomically)."""
    atomic_write_bytes(out_path, training_png(read_metrics(metrics_path), title))
    return Path(out_path)
