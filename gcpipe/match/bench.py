"""Match runner speed (`gcpipe bench match`): numbers to report, never asserted in tests.

(a) Network vs network: two randomly initialised standard-5c (H=128, full-turn) checkpoints,
    one cell of `games` games with `workers` worker processes.
(b) MCTS vs Greedy: `mcts:ITERATIONS` as Guerrilla against greedy, at 1 and at `workers` workers.
Figures are the wall and CPU time of run_match (worker start-up, inference, ledger writes and
the summary included), not of the Python start-up and torch import before it.
"""
from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

from gcpipe.errors import UserError
from gcpipe.match.runner import run_match
from gcpipe.players import PlayerBook


def _timed_cell(book: PlayerBook, guerrilla: str, coin: str, games: int, workers: int, folder: Path) -> dict:
    g, c = book.field([guerrilla, coin])
    cpu_before = _cpu_seconds()
    start = time.perf_counter()
    result = run_match(g, c, games, out=folder / f"{g.name}__{c.name}__w{workers}.jsonl", workers=workers,
                       progress=False)
    seconds = time.perf_counter() - start
    cpu = _cpu_seconds() - cpu_before
    return {"games": games, "workers": workers, "seconds": round(seconds, 3),
            "games_per_s": round(games / seconds, 2), "cpu_seconds": round(cpu, 3),
            "games_per_cpu_s": round(games / cpu, 2), "guerrilla_wins": result.summary["guerrilla_wins"]}


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the pool's workers once it closes):
    on a shared machine this, not the wall clock, tells what the runner itself costs."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def bench_match(games: int = 1000, workers: int = 2, mcts_games: int = 8, mcts_iterations: int = 2000,
                seed: int = 0) -> dict:
    if min(games, workers, mcts_iterations) < 1 or mcts_games < 0:
        raise UserError("games, workers and mcts_iterations must be positive, mcts_games >= 0")
    import torch

    from gcpipe.nn.checkpoint import save
    from gcpipe.nn.model import MinGRUPolicy

    report = {}
    with tempfile.TemporaryDirectory(prefix="gcpipe-bench-match-") as tmp:
        folder = Path(tmp)
        for name, offset in (("neta", 0), ("netb", 1)):
            model = MinGRUPolicy(128, 2, generator=torch.Generator().manual_seed(seed + offset))
            save(model, folder / f"{name}.bin", "5c")
        book = PlayerBook()
        report["net_vs_net"] = _timed_cell(book, f"net:{folder / 'neta.bin'}", f"net:{folder / 'netb.bin'}",
                                           games, workers, folder)
        if mcts_games:
            report["mcts_vs_greedy"] = [
                _timed_cell(book, f"mcts:{mcts_iterations}", "greedy", mcts_games, w, folder)
                for w in sorted({1, workers})]
    return report
