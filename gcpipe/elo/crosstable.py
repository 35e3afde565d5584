"""The cross table: per-cell win counts, rows playing Guerrilla and columns playing COIN.

Built from match ledgers (the normal path), from a published Markdown table ("Gwins-Cwins"
cells under a "Guerrilla / COIN" header, as in baselines.md §1), or from crosstable.json.
"""
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from gcpipe.errors import UserError, is_int
from gcpipe.io import read_text
from gcpipe.match.ledger import format_ranges, read_ledger

# Cell text of the published format; an en dash is accepted too since prose often uses one.
_CELL = re.compile(r"^\s*(\d+)\s*[-–]\s*(\d+)\s*$")
_UNPLAYED = ("", "—", "-", "–", "·")
UNPLAYED_TEXT = "—"
HEADER_CORNER = "Guerrilla / COIN"
# More games than any cell could hold (10^12 is years of the fastest cell); beyond it the fit's
# float sums lose integer precision.
COUNT_LIMIT = 10**12


@dataclass(frozen=True)
class CrossTable:
    """Win counts per played cell.

    players: every player once, in display order (rows and columns follow it).
    results: {(guerrilla, coin): (guerrilla_wins, coin_wins)} for played cells only.
    player_ids: identity dict of each player as recorded in the ledgers (empty when unknown).
    """
    players: tuple[str, ...]
    results: dict
    player_ids: dict = field(default_factory=dict)

    @classmethod
    def from_cells(cls, cells, order=None, player_ids=None) -> "CrossTable":
        """Build from (guerrilla, coin, guerrilla_wins, coin_wins) tuples.

        Players are listed in order of first appearance unless `order` (every player, once) is
        given. A cell listed twice or with no games is an error.
        """
        results = {}
        appearance: dict[str, None] = {}  # an ordered set
        for guerrilla, coin, guerrilla_wins, coin_wins in cells:
            for name in (guerrilla, coin):
                if not isinstance(name, str) or not name:
                    raise UserError(f"cell {guerrilla!r} vs {coin!r}: player names must be non-empty text")
            if (guerrilla, coin) in results:
                raise UserError(f"cell {guerrilla} vs {coin} is given twice")
            for count in (guerrilla_wins, coin_wins):
                if not is_int(count) or not 0 <= count <= COUNT_LIMIT:
                    raise UserError(f"cell {guerrilla} vs {coin}: win counts must be whole numbers 0..{COUNT_LIMIT:,}, "
                                    f"got {count!r}")
            if guerrilla_wins + coin_wins == 0:
                raise UserError(f"cell {guerrilla} vs {coin}: win counts must be >= 0 and "
                                f"not both 0 (got {guerrilla_wins}-{coin_wins})")
            results[(guerrilla, coin)] = (int(guerrilla_wins), int(coin_wins))
            appearance.update(dict.fromkeys((guerrilla, coin)))
        if not results:
            raise UserError("the cross table has no played cells")
        return cls(players=tuple(_apply_order(list(appearance), order)), results=results,
                   player_ids=dict(player_ids or {}))

    @property
    def guerrillas(self) -> tuple[str, ...]:
        """Row players: those that played Guerrilla, in display order."""
        return tuple(p for p in self.players if any(g == p for g, _ in self.results))

    @property
    def coins(self) -> tuple[str, ...]:
        """Column players: those that played COIN, in display order."""
        return tuple(p for p in self.players if any(c == p for _, c in self.results))

    def cells(self):
        """Played cells as (guerrilla, coin, guerrilla_wins, coin_wins), row-major display order."""
        return [(g, c, *self.results[(g, c)])
                for g in self.guerrillas for c in self.coins if (g, c) in self.results]

    def to_json(self) -> dict:
        return {
            "players": list(self.players),
            "guerrillas": list(self.guerrillas),
            "coins": list(self.coins),
            "cells": [{"guerrilla": g, "coin": c, "games": gw + cw, "guerrilla_wins": gw,
                       "coin_wins": cw, "guerrilla_win_rate": round(gw / (gw + cw), 6)}
                      for g, c, gw, cw in self.cells()],
            "player_ids": {p: self.player_ids[p] for p in self.players if p in self.player_ids},
        }

    @classmethod
    def from_json(cls, obj, order=None) -> "CrossTable":
        try:
            cells = [(c["guerrilla"], c["coin"], c["guerrilla_wins"], c["coin_wins"])
                     for c in obj["cells"]]
            players = list(obj["players"])
        except (KeyError, TypeError) as error:
            raise UserError(f"not a gcpipe cross table (missing {error})") from None
        for guerrilla, coin, *_ in cells:
            for name in (guerrilla, coin):
                if name not in players:
                    raise UserError(f"cell {guerrilla} vs {coin}: player {name!r} is not in the table's "
                                    f"players ({', '.join(map(str, players))})")
        player_ids = obj.get("player_ids")
        if player_ids is not None and not isinstance(player_ids, dict):
            raise UserError("player_ids must be a mapping of player names to identities")
        return cls.from_cells(cells, order=order or players, player_ids=player_ids)

    def markdown(self) -> str:
        """The published format: rows Guerrilla, columns COIN, cells "Gwins-Cwins"."""
        lines = ["| " + " | ".join((HEADER_CORNER,) + self.coins) + " |",
                 "| --- |" + " ---: |" * len(self.coins)]
        for g in self.guerrillas:
            row = [f"{self.results[(g, c)][0]}-{self.results[(g, c)][1]}"
                   if (g, c) in self.results else UNPLAYED_TEXT for c in self.coins]
            lines.append("| " + " | ".join([g] + row) + " |")
        return "\n".join(lines) + "\n"


def _apply_order(players: list[str], order) -> list[str]:
    if order is None:
        return players
    order = list(order)
    repeated = sorted({p for p in order if order.count(p) > 1})
    unknown = [p for p in order if p not in players]
    missing = [p for p in players if p not in order]
    if repeated or unknown or missing:
        problems = [f"{what}: {', '.join(names)}" for what, names in
                    (("repeated", repeated), ("not in the results", unknown), ("missing", missing))
                    if names]
        raise UserError(f"bad player order ({'; '.join(problems)})")
    return order


def parse_crosstable_markdown(text: str, source: str = "<text>", order=None) -> CrossTable:
    """Read the first Markdown table whose corner cell is "Guerrilla / COIN"."""
    lines = text.splitlines()

    def split_row(line):
        return [cell.strip() for cell in line.strip().strip("|").split("|")]

    for start, line in enumerate(lines):
        if line.lstrip().startswith("|") and \
                split_row(line)[0].lower().replace(" ", "") == HEADER_CORNER.lower().replace(" ", ""):
            break
    else:
        raise UserError(f"{source}: no table with a '{HEADER_CORNER}' header")
    coins = split_row(lines[start])[1:]
    cells = []
    for number in range(start + 2, len(lines)):
        if not lines[number].lstrip().startswith("|"):
            break
        guerrilla, *row = split_row(lines[number])
        if len(row) != len(coins):
            raise UserError(f"{source}:{number + 1}: {len(row)} cells, the header has {len(coins)}")
        for coin, text_cell in zip(coins, row):
            if text_cell in _UNPLAYED:
                continue
            match = _CELL.match(text_cell)
            if not match:
                raise UserError(f"{source}:{number + 1}: cell {text_cell!r} is not 'Gwins-Cwins'")
            cells.append((guerrilla, coin, int(match[1]), int(match[2])))
    return CrossTable.from_cells(cells, order=order)


def read_crosstable(path, order=None) -> CrossTable:
    """A cross table from a .json (as written by gcpipe) or a Markdown file."""
    path = Path(path)
    try:
        text = read_text(path)
    except OSError as error:
        raise UserError(f"{path}: cannot read cross table ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise UserError(f"{path}: not UTF-8 text (byte {error.start})") from None
    if path.suffix == ".json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as error:
            raise UserError(f"{path}:{error.lineno}: not valid JSON") from None
        if not isinstance(obj, dict):
            raise UserError(f"{path}: not a gcpipe cross table (a JSON object with players and cells)")
        try:
            return CrossTable.from_json(obj, order=order)
        except UserError as error:
            raise UserError(f"{path}: {error}") from None
    return parse_crosstable_markdown(text, source=str(path), order=order)


def _check_planned(path: Path, records: list[dict], plan: dict) -> None:
    """A pipeline's ledger is of a cell of its plan, played by the plan's players at their roster
    positions; anything else was written beside the pipeline and would enter its table silently
    (Snakemake keeps an output it finds in place)."""
    from gcpipe.match.runner import ledger_mismatch   # (the players' module: `gcpipe elo` alone stays light)

    cell = records[0]["cell"]
    if cell not in plan:
        raise UserError(f"{path}: cell {cell} is not in the config's match plan; move the ledger away")
    mismatch = ledger_mismatch(records, path, *plan[cell][:2])
    if mismatch:
        raise UserError(f"{mismatch}: not this pipeline's ledger{_HAND_RUN}")


def _check_planned_games(cell: str, games: dict[int, Path], plan: dict) -> None:
    if sorted(games) != list(range(plan[cell][2])):
        path = next(iter(games.values()))
        raise UserError(f"{path}: cell {cell} holds games {format_ranges(sorted(games))} where the config plans "
                        f"0-{plan[cell][2] - 1}: not this pipeline's ledger{_HAND_RUN}")


_HAND_RUN = " (a match or tournament run by hand into its folder?); move it away and rerun"


def crosstable_from_ledgers(ledger_paths, order=None, plan: dict | None = None) -> CrossTable:
    """Count wins per cell over match ledgers.

    Several ledgers of one cell (e.g. unmerged shards) are added up; a game index seen twice
    in a cell, a cell whose ledgers disagree on the players, or a player name that stands for
    different players (different ids) in different ledgers is an error.  With a pipeline's `plan`
    (gcpipe.workflow.planned_cells) every ledger must be of a planned cell, played by its players
    at their roster positions, and each cell must hold exactly its games 0..N-1.
    """
    if not ledger_paths:
        raise UserError("no ledgers given")
    counts: dict[tuple[str, str], list[int]] = {}
    seen_games: dict[tuple[str, str], dict[int, Path]] = {}
    player_ids: dict[str, dict] = {}
    id_source: dict[str, Path] = {}
    engine = engine_source = None
    for path in map(Path, ledger_paths):
        records = read_ledger(path)
        if not records:
            raise UserError(f"{path}: no finished games")
        if engine is not None and records[0]["engine"] != engine:
            raise UserError(f"{path} was played by engine fingerprint {records[0]['engine']} and {engine_source} by "
                            f"{engine}: one table holds the games of one engine; play them again with one engine")
        engine, engine_source = records[0]["engine"], path
        if plan is not None:
            _check_planned(path, records, plan)
        first = records[0]
        key = (first["guerrilla"], first["coin"])
        for player, player_id in ((first["guerrilla"], first["guerrilla_id"]),
                                  (first["coin"], first["coin_id"])):
            if player in player_ids and player_ids[player] != player_id:
                raise UserError(f"player {player!r} is {player_ids[player]} in "
                                f"{id_source[player]} but {player_id} in {path}")
            player_ids.setdefault(player, player_id)
            id_source.setdefault(player, path)
        games = seen_games.setdefault(key, {})
        tally = counts.setdefault(key, [0, 0])
        for record in records:
            if record["game"] in games:
                raise UserError(f"cell {record['cell']}: game {record['game']} is in both "
                                f"{games[record['game']]} and {path}")
            games[record["game"]] = path
            tally[0 if record["winner"] == "guerrilla" else 1] += 1
    if plan is not None:
        for (guerrilla, coin), games in seen_games.items():
            _check_planned_games(f"{guerrilla}__{coin}", games, plan)
    return CrossTable.from_cells([(g, c, gw, cw) for (g, c), (gw, cw) in counts.items()],
                                 order=order, player_ids=player_ids)
