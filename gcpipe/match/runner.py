"""A cell and its ledger: the games of (Guerrilla player, COIN player) that the ledger lacks, played
by the worker pool (pool.py) and appended in game-index order, one line per game, then the
summary.  So the ledger's bytes do not depend on the number of workers, on chunking, or on where
an earlier run was killed, and a rerun plays only the missing games.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gcpipe import paths
from gcpipe.engine import END_REASONS, GUERRILLA, SIDE_NAMES
from gcpipe.errors import UserError, check_int, print_stderr
from gcpipe.fingerprint import engine_fingerprint, other_engine
from gcpipe.match.ledger import (GAME_INDEX_LIMIT, LedgerWriter, cell_name, check_ledger_path, format_ranges,
                                 game_seed, summary_path_for, write_summary)
from gcpipe.match.pool import play_in_tasks, usable_cores
from gcpipe.players import Player
from gcpipe.progress import Meter


# Games planned at a time: memory stays bounded whatever --games is (the pool splits each chunk
# into tasks; results are appended in game order, so the ledger does not depend on it).
CHUNK_GAMES = 1 << 16


@dataclass(frozen=True)
class MatchResult:
    ledger: Path
    summary_path: Path
    summary: dict
    played: int          # games played by this call (0 when the ledger already held them all)


def default_ledger_path(guerrilla: Player, coin: Player, folder=paths.MATCHES) -> Path:
    return paths.ledger(cell_name(guerrilla.name, coin.name), folder)


def run_match(guerrilla: Player, coin: Player, games: int, first_game: int = 0, out=None,
              workers: int | None = None, progress: bool = True, replace_others: bool = False,
              exact: bool = True) -> MatchResult:
    """Plays games first_game .. first_game+games-1 of the cell (guerrilla, coin) that the ledger
    at `out` (default results/matches/G__C.jsonl) does not hold yet, then writes the summary.

    A ledger of other players or roster positions, or of an engine of another behaviour, is
    refused, unless `replace_others`: then it is emptied and the games are played afresh (the
    DAG's shard ledgers, which a retrained network, a changed setting or an engine change
    supersedes).  So is, when `exact`, a ledger holding games outside those asked for: the summary
    is of exactly these games (a line with a valid seed added by hand was counted); `compare`,
    which continues its ledgers in steps and counts the pairs itself, passes exact=False.

    Both players need their roster positions set (PlayerBook.field does that)."""
    if guerrilla.roster is None or coin.roster is None:
        raise ValueError("run_match needs players with roster positions (see PlayerBook.field)")
    for flag, value, low in (("--games", games, 1), ("--first-game", first_game, 0)):
        check_int(flag, value, low)
    if first_game + games > GAME_INDEX_LIMIT:
        raise UserError(f"--first-game + --games must stay within {GAME_INDEX_LIMIT:,} game indices "
                        f"(the seed formula's uint32), got {first_game + games:,}")
    workers = usable_cores() if workers is None else workers
    check_int("--workers", workers, 1)
    path = check_ledger_path(out) if out is not None else default_ledger_path(guerrilla, coin)
    cell = cell_name(guerrilla.name, coin.name)
    played = 0
    with LedgerWriter(path, replace_legacy=replace_others) as writer:
        if writer.replaced:
            print_stderr(f"gcpipe: playing afresh: {writer.replaced}")
        problem = _continuation_problem(writer.records, path, guerrilla, coin, first_game, games, exact)
        if problem and not replace_others:
            raise UserError(f"{problem[0]}; {problem[1]}")
        if problem:
            print_stderr(f"gcpipe: playing afresh: {problem[0]}")
            writer.start_over()
        done = writer.done_games
        end = first_game + games
        to_play = games - sum(first_game <= g < end for g in done)
        if to_play:
            wins = sum(record["winner"] == SIDE_NAMES[GUERRILLA] for record in writer.records)
            before = len(writer.records)
            with Meter(cell, to_play, "games", score=_score(wins, before), enabled=progress) as meter:
                for start in range(first_game, end, CHUNK_GAMES):
                    missing = np.array([g for g in range(start, min(start + CHUNK_GAMES, end)) if g not in done],
                                       np.int64)
                    seeds = np.array([game_seed(guerrilla.roster, coin.roster, int(g)) for g in missing], np.uint32)
                    for task_games, results in play_in_tasks(guerrilla, coin, missing, seeds, workers):
                        writer.extend(_record(cell, guerrilla, coin, int(g), results.winners[k],
                                              int(results.plies[k]), results.end_reasons[k])
                                      for k, g in enumerate(task_games))
                        played += len(task_games)
                        wins += int(np.count_nonzero(results.winners == GUERRILLA))
                        meter.advance(len(task_games), _score(wins, before + played))
    summary_path = summary_path_for(path)
    summary = write_summary(path, summary_path)
    return MatchResult(ledger=path, summary_path=summary_path, summary=summary, played=played)


def _continuation_problem(records: list[dict], path: Path, guerrilla: Player, coin: Player, first_game: int,
                          games: int, exact: bool) -> tuple[str, str] | None:
    """Why this match cannot continue the ledger, and what to do (None: it can)."""
    mismatch = ledger_mismatch(records, path, guerrilla, coin)
    if mismatch:
        return mismatch, _remedy(records)
    outside = _games_outside(records, path, first_game, games) if exact else None
    return (outside, RANGE_REMEDY) if outside else None


def _games_outside(records: list[dict], path: Path, first_game: int, games: int) -> str | None:
    """Why a ledger holds more than games first_game .. first_game+games-1 (None: it does not)."""
    outside = sorted(record["game"] for record in records if not first_game <= record["game"] < first_game + games)
    if not outside:
        return None
    return (f"{path} holds game(s) {format_ranges(outside)}, outside the games {first_game}-{first_game + games - 1} "
            f"asked for (a match's summary is of exactly the games asked for)")


def _score(guerrilla_wins: int, games: int) -> str:
    return f"Guerrilla-COIN {guerrilla_wins}-{games - guerrilla_wins}"


def _record(cell, guerrilla: Player, coin: Player, g: int, winner: int, plies: int, end: int) -> dict:
    return {"cell": cell, "guerrilla": guerrilla.name, "coin": coin.name, "game": g,
            "seed": game_seed(guerrilla.roster, coin.roster, g), "winner": SIDE_NAMES[winner],
            "plies": plies, "end": END_REASONS[end], "guerrilla_id": guerrilla.identity,
            "coin_id": coin.identity, "engine": engine_fingerprint()}


LEDGER_REMEDY = "give another --out, or the players and roster positions it was played with"
ENGINE_REMEDY = "give another --out, or --replace-others to play its games again with this engine"
RANGE_REMEDY = "ask for the games it holds (--first-game, --games), or give another --out"


def _remedy(records: list[dict]) -> str:
    """What to do about a ledger that ledger_mismatch refuses."""
    return ENGINE_REMEDY if other_engine(records[0]["engine"]) else LEDGER_REMEDY


def check_ledger(records: list[dict], path: Path, guerrilla: Player, coin: Player) -> None:
    """A ledger can only be continued by the same players at the same roster positions, with an
    engine of the same behaviour (`compare`, which has no --replace-others, checks its ledgers so)."""
    mismatch = ledger_mismatch(records, path, guerrilla, coin)
    if mismatch:
        raise UserError(f"{mismatch}; " + ("give another --out, or delete it to play its games again with this "
                                           "engine" if other_engine(records[0]["engine"]) else LEDGER_REMEDY))


def ledger_mismatch(records: list[dict], path: Path, guerrilla: Player, coin: Player) -> str | None:
    """Why these players at these roster positions, with this engine, cannot continue the ledger
    (None: they can)."""
    if not records:
        return None
    cell = cell_name(guerrilla.name, coin.name)
    first = records[0]
    if other_engine(first["engine"]):
        return f"{path} was played by {other_engine(first['engine'])}"
    if first["cell"] != cell:
        return f"{path} holds cell {first['cell']}, not {cell}"
    for side, player in (("guerrilla", guerrilla), ("coin", coin)):
        if first[f"{side}_id"] != player.identity:
            return (f"{path} was played by another {side} player {player.name} "
                    f"({first[f'{side}_id']} there, {player.identity} now)")
    for record in records:
        expected = game_seed(guerrilla.roster, coin.roster, record["game"])
        if record["seed"] != expected:
            return (f"{path} game {record['game']} has seed {record['seed']}, but roster positions "
                    f"{guerrilla.roster}/{coin.roster} give {expected}: it was played with other roster positions")
    return None
