"""The game viewer: games of a cell's ledger replayed (gcpipe.match.replay) and drawn as SVG, one
small board per ply from the start position, so a reader can follow how a side wins.

By default a cell gets two pictures, the first game (lowest index) the Guerrilla won and the first
the COIN won (VIEW_FILES); `games` draws chosen indices instead (game-N.svg).  A game whose replay
does not reproduce its ledger record (the runner and the single-game replay disagreeing on how a
player steps) is never drawn: the default picks the next game of the same outcome and says so in
the picture; a chosen index is an error.  A ledger of an engine of another behaviour fingerprint
is refused: its games would replay as other games.  The SVG text depends on the ledger and the
players only.
"""
from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

from gcpipe.engine import Game
from gcpipe.engine.game import action_to_string
from gcpipe.errors import UserError
from gcpipe.fingerprint import other_engine
from gcpipe.io import atomic_write_text
from gcpipe.match.ledger import SIDES, read_ledger
from gcpipe.match.replay import Replay, plies_of, replay_record

VIEW_FILES = {"guerrilla": "guerrilla_win.svg", "coin": "coin_win.svg"}
SIDE_LABELS = {"guerrilla": "Guerrilla", "coin": "COIN"}
SQUARE = 14                          # pixels per board square
BOARD = 8 * SQUARE
FRAME_WIDTH, FRAME_HEIGHT = BOARD + 10, BOARD + 22
COLUMNS = 8
MARGIN, LINE = 10, 15
LEGEND = ("One board per ply, read left to right. Black dots: Guerrilla stones on the points; gold discs: coins.",
          "Red rings: the stones just placed; blue arrow: the coin's step; red crosses: pieces just captured.")


VIEW_STEMS = {side: Path(name).stem for side, name in VIEW_FILES.items()}
# The review pages of the same games (gcpipe.analysis.review).
REVIEW_FILES = {side: f"{stem}.html" for side, stem in VIEW_STEMS.items()}


def view_ledger(ledger, out_dir, games=None) -> list[Path]:
    """Draw the games of a ledger into out_dir (see the module doc); returns the files written."""
    return draw_views(chosen_games(ledger, games), out_dir)


def draw_views(chosen, out_dir) -> list[Path]:
    """Draws the games `chosen_games` picked into out_dir; returns the files written."""
    pictures = {}
    for stem, record, replay, notes in chosen:
        pictures[f"{stem}.svg"] = (game_svg(record, replay, notes) if record is not None
                                   else _svg(4 * LINE, [_text(MARGIN, LINE + 4, notes[0], bold=True)]))
    out_dir = Path(out_dir)
    for name, text in pictures.items():
        atomic_write_text(out_dir / name, text)
    return [out_dir / name for name in pictures]


def chosen_games(ledger, games=None) -> list[tuple[str, dict | None, Replay | None, list[str]]]:
    """The games a view shows, as (file stem, ledger record, replay, notes): the chosen indices
    (game-N), or the first win of each side whose replay reproduces its record.  Where a side has
    no such win, record and replay are None and the one note says so."""
    records = read_ledger(ledger)
    if not records:
        raise UserError(f"{ledger}: no finished games to draw")
    if other_engine(records[0]["engine"]):   # its games replay as other games here
        raise UserError(f"{ledger} was played by {other_engine(records[0]['engine'])}: this engine cannot replay "
                        f"its games; play them again (gcpipe match --replace-others)")
    by_game = {record["game"]: record for record in records}
    if not games:
        return [(VIEW_STEMS[side], *_first_win(records, side)) for side in SIDES]
    chosen = []
    for g in games:
        if g not in by_game:
            raise UserError(f"{ledger} has no game {g}")
        replay = replay_record(by_game[g])
        if not replay.agrees_with(by_game[g]):
            raise UserError(f"{ledger}: game {g} replays differently from its ledger record "
                            f"({_result(replay.winner, replay.end, replay.plies)} instead of "
                            f"{_result(*(by_game[g][key] for key in ('winner', 'end', 'plies')))}); "
                            f"it is not drawn")
        chosen.append((f"game-{g}", by_game[g], replay, []))
    return chosen


def _first_win(records: list[dict], side: str) -> tuple[dict | None, Replay | None, list[str]]:
    """The first game `side` won whose replay reproduces its record, with a note for those skipped."""
    skipped = []
    for record in sorted(records, key=lambda r: r["game"]):
        if record["winner"] != side:
            continue
        replay = replay_record(record)
        if replay.agrees_with(record):
            notes = [f"Game {g} replayed differently from its ledger record, so the next {SIDE_LABELS[side]} "
                     f"win is shown." for g in skipped]
            return record, replay, notes
        skipped.append(record["game"])
    first = records[0]
    text = (f"{first['cell']}: no {SIDE_LABELS[side]} win among the {len(records)} games of this ledger"
            + (f" whose replay reproduces its record (game(s) {', '.join(map(str, skipped))} did not)"
               if skipped else ""))
    return None, None, [text]


def _result(winner: str, end: str, plies: int) -> str:
    return f"{winner} won ({end}) after {plies} plies"


def describe_player(identity: dict) -> str:
    if identity.get("kind") == "net":
        return f"net {identity['path']}, sha256 {identity['sha256'][:12]}…"
    if identity.get("kind") == "search":
        return (f"{identity['variant']} search, {identity['simulations']} simulations, net {identity['path']}, "
                f"sha256 {identity['sha256'][:12]}…")
    if identity.get("kind") == "mcts":
        return (f"MCTS {identity['iterations']} iterations, c {identity['exploration']:g}, "
                f"{identity['rollout']} rollouts")
    return str(identity.get("kind"))


def game_svg(record: dict, replay: Replay, notes=()) -> str:
    """One game as an SVG: a header, then the start position and the position after every ply."""
    header = [f"{record['cell']}, game {record['game']} (seed {record['seed']}): {SIDE_LABELS[record['winner']]} "
              f"won ({record['end'].replace('_', ' ')}) after {record['plies']} plies",
              f"Guerrilla {record['guerrilla']} ({describe_player(record['guerrilla_id'])}) vs COIN {record['coin']} "
              f"({describe_player(record['coin_id'])})", *LEGEND, *notes]
    top = MARGIN + LINE * len(header) + 6
    frames = _frames(replay)
    rows = -(-len(frames) // COLUMNS)
    parts = [_text(MARGIN, MARGIN + LINE * (k + 1) - 4, line, bold=k == 0) for k, line in enumerate(header)]
    for k, (label, stones, coins, marks) in enumerate(frames):
        x, y = MARGIN + FRAME_WIDTH * (k % COLUMNS), top + FRAME_HEIGHT * (k // COLUMNS)
        parts.append(f'<g transform="translate({x},{y})">{_text(0, 10, label)}'
                     f'<use xlink:href="#board" x="0" y="14"/><g transform="translate(0,14)">'
                     + "".join(_stone(g) for g in stones) + "".join(_coin(c) for c in coins)
                     + "".join(marks) + "</g></g>")
    return _svg(top + FRAME_HEIGHT * rows, parts)


def _frames(replay: Replay) -> list[tuple[str, list[int], list[int], list[str]]]:
    """(label, stones, coins, highlight marks) for the start and after each ply."""
    game = Game(replay.seed)
    frames = [("start", game.stones(), game.coins(), [])]
    for number, ply in enumerate(plies_of(replay.seed, replay.actions), start=1):
        if ply.side == 0:
            marks = [_ring(g) for g in ply.placed] + [_cross(*_square_center(c)) for c in ply.captured]
        else:
            marks = [_arrow(*ply.step)] + [_cross(*_point_center(g)) for g in ply.captured]
        captured = len(ply.captured)
        label = (f"{number}. {'GC'[ply.side]} {action_to_string(ply.action, ply.side)}"
                 + (f" ×{captured}" if captured else ""))
        frames.append((label, list(ply.stones), list(ply.coins), marks))
    return frames


def _square_center(c: int) -> tuple[int, int]:
    return (c % 8) * SQUARE + SQUARE // 2, (c // 8) * SQUARE + SQUARE // 2


def _point_center(g: int) -> tuple[int, int]:
    return (g % 7 + 1) * SQUARE, (g // 7 + 1) * SQUARE


def _stone(g: int) -> str:
    x, y = _point_center(g)
    return f'<circle cx="{x}" cy="{y}" r="4" fill="#222"/>'


def _ring(g: int) -> str:
    x, y = _point_center(g)
    return f'<circle cx="{x}" cy="{y}" r="5" fill="none" stroke="#d62728" stroke-width="2"/>'


def _coin(c: int) -> str:
    x, y = _square_center(c)
    return f'<circle cx="{x}" cy="{y}" r="5" fill="#f2c14e" stroke="#7a5c00"/>'


def _cross(x: int, y: int) -> str:
    return (f'<path d="M{x - 4} {y - 4}L{x + 4} {y + 4}M{x - 4} {y + 4}L{x + 4} {y - 4}" '
            f'stroke="#d62728" stroke-width="2"/>')


def _arrow(source: int, target: int) -> str:
    (x0, y0), (x1, y1) = _square_center(source), _square_center(target)
    return (f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" stroke="#1f77b4" stroke-width="2" '
            f'marker-end="url(#arrow)"/>')


def _text(x: int, y: int, text: str, bold: bool = False) -> str:
    weight = ' font-weight="bold"' if bold else ""
    return f'<text x="{x}" y="{y}"{weight}>{escape(text)}</text>'


def _svg(height: int, parts: list[str]) -> str:
    width = 2 * MARGIN + FRAME_WIDTH * COLUMNS
    squares = "".join(f'<rect x="{x * SQUARE}" y="{y * SQUARE}" width="{SQUARE}" height="{SQUARE}" '
                      f'fill="{"#c8b48a" if (x + y) % 2 else "#f3ecd9"}"/>' for y in range(8) for x in range(8))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" '
            f'font-size="10">\n<defs><g id="board">{squares}<rect width="{BOARD}" height="{BOARD}" fill="none" '
            f'stroke="#555"/></g><marker id="arrow" viewBox="0 0 6 6" refX="5" refY="3" markerWidth="4" '
            f'markerHeight="4" orient="auto"><path d="M0 0L6 3L0 6z" fill="#1f77b4"/></marker></defs>\n'
            f'<rect width="{width}" height="{height}" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n")
