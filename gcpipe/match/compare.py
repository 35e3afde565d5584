"""`gcpipe compare`: a candidate against a baseline in game pairs, over a fixed number of pairs or
until a sequential probability ratio test (SPRT) decides.

Pair g is game g of the cell candidate__baseline (the candidate plays Guerrilla) together with game
g of baseline__candidate (the candidate plays COIN): one game on each side, the way the game's
designer scores a contest.  Each game keeps its own cell's rules.md §8 seed, so both cells stay
reproducible on their own and are the very games `gcpipe match` plays for them.  The statistics
of pairs (pentanomial, Elo, SPRT) are in gcpipe.stats.sprt.

An SPRT plays pairs in steps of game indices (each step's games of both cells through run_match),
then runs the test over all pairs in game-index order and stops at the first pair count where it
decides.  The decision therefore depends on the ledgers alone, not on the step size, the worker
count or where a killed run stopped, and a rerun continues from the ledgers to the same decision.
The ledgers hold whole steps, so they can hold games past the decision; those do not count.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gcpipe import paths
from gcpipe.errors import UserError, check_int, is_int
from gcpipe.io import atomic_write_json, check_output_file
from gcpipe.match.ledger import format_ranges, read_ledger, wilson_interval
from gcpipe.match.runner import MatchResult, check_ledger, default_ledger_path, run_match
from gcpipe.players import Player, PlayerBook
from gcpipe.progress import Meter
from gcpipe.stats.sprt import PAIR_OUTCOMES, SPRT, PairElo, SPRTState, pair_elo, pentanomial

NO_DECISION = "no decision"


@dataclass(frozen=True)
class CompareResult:
    candidate: Player
    baseline: Player
    cells: dict                    # (guerrilla name, coin name) -> MatchResult of each cell played
    pair_wins: np.ndarray          # games the candidate won in each counted pair (0, 1, 2)
    elo: PairElo
    sprt: SPRT | None
    state: SPRTState | None        # where the SPRT stopped
    summary_path: Path
    summary: dict


def summary_path_for(candidate: str, baseline: str, out_dir=paths.COMPARE) -> Path:
    """The comparison's summary: a name no cell ledger or summary (G__C.json[l]) can have."""
    return Path(out_dir) / f"{candidate}__vs__{baseline}.json"


def sprt_test(bounds: str | None, alpha: float | None = None, beta: float | None = None,
              model: str | None = None) -> SPRT | None:
    """The SPRT of the command line's --sprt ELO0,ELO1 [--alpha --beta --sprt-model], or None."""
    options = {name: value for name, value in (("alpha", alpha), ("beta", beta), ("model", model))
               if value is not None}
    if bounds is None:
        if options:
            raise UserError("--alpha, --beta and --sprt-model only apply with --sprt ELO0,ELO1")
        return None
    return SPRT.parse(bounds, **options)


def pair_wins(as_guerrilla: list[dict], as_coin: list[dict], pairs: int) -> np.ndarray:
    """Games the candidate won in pairs 0..pairs-1, from the records of its Guerrilla cell and of its
    COIN cell."""
    won_as_guerrilla = {record["game"]: record["winner"] == "guerrilla" for record in as_guerrilla}
    won_as_coin = {record["game"]: record["winner"] == "coin" for record in as_coin}
    missing = [g for g in range(pairs) if g not in won_as_guerrilla or g not in won_as_coin]
    if missing:
        raise UserError(f"game(s) {format_ranges(missing)} are missing from one of the two ledgers of the pairs")
    return np.array([won_as_guerrilla[g] + won_as_coin[g] for g in range(pairs)], dtype=np.int64)


def compare(candidate_spec: str, baseline_spec: str, games: int = 1000, book: PlayerBook | None = None,
            out_dir=paths.COMPARE, workers: int | None = None, progress: bool = True, sprt: SPRT | None = None,
            max_games: int | None = None, pairs_per_step: int | None = None) -> CompareResult:
    """`gcpipe compare`.  Without `sprt`: `games` pairs plus both self cells of `games` games.  With
    it: pairs until the test decides or `max_games` games (default 2 x `games`) are played; no self
    cells.  Players are named by config name or short spec through `book`.  Every bad input is
    refused before a game is played."""
    check_int("--games", games, 1)
    if max_games is not None:
        if sprt is None:
            raise UserError("--max-games only applies with --sprt ELO0,ELO1")
        if not is_int(max_games) or max_games < 2 or max_games % 2:
            raise UserError(f"--max-games must be an even number >= 2 (games come in pairs), got {max_games!r}")
    players = (book or PlayerBook()).field([candidate_spec, baseline_spec])
    if len(players) != 2:
        raise UserError(f"compare needs two different players, got {players[0].name} twice")
    candidate, baseline = players
    pairing = [(candidate, baseline), (baseline, candidate)]
    cells = pairing + ([] if sprt else [(candidate, candidate), (baseline, baseline)])
    ledgers = {(g.name, c.name): default_ledger_path(g, c, out_dir) for g, c in cells}
    for guerrilla, coin in cells:        # a ledger of another pairing stops us before any game
        path = ledgers[(guerrilla.name, coin.name)]
        check_output_file(path)
        if path.is_file():
            check_ledger(read_ledger(path), path, guerrilla, coin)

    state = None
    if sprt is None:
        results = {(g.name, c.name): run_match(g, c, games, out=ledgers[(g.name, c.name)], workers=workers,
                                               progress=progress, exact=False) for g, c in cells}
        pairs = games
    else:
        # Pairs per step, by the slowest player: a step is two run_match calls, whose worker
        # start-up (and network loading) costs about a tenth of a second.
        step = pairs_per_step or min(candidate.pairs_per_step, baseline.pairs_per_step)
        max_pairs = (max_games or 2 * games) // 2
        state, results = _sequential(sprt, pairing, ledgers, max_pairs, step, workers, progress)
        pairs = state.pairs
    as_guerrilla, as_coin = (read_ledger(ledgers[(g.name, c.name)]) for g, c in pairing)
    wins = pair_wins(as_guerrilla, as_coin, pairs)
    elo = pair_elo(pentanomial(wins))
    summary = _summary(candidate, baseline, wins, as_guerrilla, elo, sprt, state, max_games or 2 * games,
                       [ledgers[(g.name, c.name)] for g, c in pairing])
    summary_path = summary_path_for(candidate.name, baseline.name, out_dir)
    atomic_write_json(summary_path, summary)
    return CompareResult(candidate=candidate, baseline=baseline, cells=results, pair_wins=wins, elo=elo,
                         sprt=sprt, state=state, summary_path=summary_path, summary=summary)


def _sequential(test: SPRT, pairing, ledgers, max_pairs: int, step: int, workers, progress
                ) -> tuple[SPRTState, dict[tuple[str, str], MatchResult]]:
    """Plays pairs step by step until the test decides or max_pairs pairs are in (module doc)."""
    keys = [(g.name, c.name) for g, c in pairing]
    state = SPRTState(pairs=0, llr=0.0, decision=None, counts=(0,) * 5)
    results = {}
    lower, upper = test.bounds
    with Meter(f"SPRT {keys[0][0]} vs {keys[0][1]}", max_pairs, "pairs", enabled=progress) as meter:
        for first in range(0, max_pairs, step):
            count = min(step, max_pairs - first)
            for (guerrilla, coin), key in zip(pairing, keys):
                results[key] = run_match(guerrilla, coin, count, first_game=first, out=ledgers[key], workers=workers,
                                         progress=False, exact=False)
            wins = pair_wins(*(read_ledger(ledgers[key]) for key in keys), first + count)
            state = test.scan(wins, start=state.pairs)
            if state.decision:
                meter.stop_early()
            meter.advance(state.pairs - meter.done, f"LLR {state.llr:+.2f} [{lower:.2f}, {upper:.2f}]"
                                                    + (f"  {state.decision}" if state.decision else ""))
            if state.decision:
                break
    return state, results


def _side(won: int, games: int) -> dict:
    low, high = wilson_interval(won, games)
    return {"games": games, "wins": won, "win_rate": round(won / games, 6),
            "win_rate_ci95": [round(low, 6), round(high, 6)]}


def _summary(candidate: Player, baseline: Player, wins: np.ndarray, as_guerrilla: list[dict], elo: PairElo,
             test: SPRT | None, state: SPRTState | None, max_games: int, ledgers: list[Path]) -> dict:
    pairs = len(wins)
    won_as_guerrilla = sum(record["winner"] == "guerrilla" for record in as_guerrilla if record["game"] < pairs)
    counts = pentanomial(wins)
    summary = {
        "candidate": candidate.name,
        "baseline": baseline.name,
        "pairs": pairs,
        "games": 2 * pairs,
        "pairing": f"pair g = game g of {candidate.name}__{baseline.name} (candidate plays Guerrilla) and "
                   f"game g of {baseline.name}__{candidate.name} (candidate plays COIN), g = 0..{pairs - 1}",
        "candidate_as_guerrilla": _side(won_as_guerrilla, pairs),
        "candidate_as_coin": _side(int(wins.sum()) - won_as_guerrilla, pairs),
        "pair_results": {name: int(counts[2 * k]) for k, name in reversed(list(enumerate(PAIR_OUTCOMES)))},
        "pentanomial": [int(c) for c in counts],
        "score": round(elo.score, 6),
        "elo": round(elo.elo, 3),
        "elo_ci95": [round(v, 3) for v in elo.elo_ci95],
        "nelo": round(elo.nelo, 3),
        "nelo_ci95": [round(v, 3) for v in elo.nelo_ci95],
        "los": round(elo.los, 6),
        "sprt": None,
        "ledgers": [str(path) for path in ledgers],
        "candidate_id": candidate.identity,
        "baseline_id": baseline.identity,
    }
    if test is not None:
        summary["sprt"] = {"model": test.model, "elo0": test.elo0, "elo1": test.elo1, "alpha": test.alpha,
                           "beta": test.beta, "bounds": [round(b, 6) for b in test.bounds],
                           "llr": round(state.llr, 6), "decision": state.decision or NO_DECISION,
                           "max_games": max_games}
    return summary
