"""Replay the published MCTS cells of baselines.md §1 (100 games each, seeds of rules.md §8,
MCTS 2K at roster position 3 and MCTS 10K at 4) and compare with the published scores.
Too slow for the unit tests (MCTS 2K vs Random alone is about a minute on one core).

Usage: python benchmarks/published_mcts_cells.py [CELL ...]   (default: 2k-random; "all" for every cell)
"""
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from gcpipe.engine import GUERRILLA
from gcpipe.match import game_seed
from gcpipe.players import parse_spec, play_games

ROSTER = {"random": 0, "greedy": 1, "mcts:2000": 3, "mcts:10000": 4}
# name: (Guerrilla, COIN, published Guerrilla wins of 100), slowest last.
CELLS = {
    "2k-random": ("mcts:2000", "random", 99),
    "random-2k": ("random", "mcts:2000", 0),
    "2k-greedy": ("mcts:2000", "greedy", 100),
    "greedy-2k": ("greedy", "mcts:2000", 0),
    "10k-random": ("mcts:10000", "random", 100),
    "10k-greedy": ("mcts:10000", "greedy", 100),
    "2k-2k": ("mcts:2000", "mcts:2000", 30),
    "2k-10k": ("mcts:2000", "mcts:10000", 11),
    "10k-2k": ("mcts:10000", "mcts:2000", 81),
    "10k-10k": ("mcts:10000", "mcts:10000", 65),
}
GAMES, CHUNK = 100, 5


def _play(args):
    guerrilla, coin, seeds = args
    return play_games(parse_spec(guerrilla).runtime(), parse_spec(coin).runtime(), seeds).winners


def main(names: list[str]) -> None:
    names = list(CELLS) if names == ["all"] else names or ["2k-random"]
    unknown = [n for n in names if n not in CELLS]
    if unknown:
        sys.exit(f"unknown cell(s) {', '.join(unknown)}; known: {', '.join(CELLS)}, all")
    with ProcessPoolExecutor() as pool:
        for name in names:
            guerrilla, coin, published = CELLS[name]
            seeds = [game_seed(ROSTER[guerrilla], ROSTER[coin], g) for g in range(GAMES)]
            chunks = [(guerrilla, coin, seeds[i:i + CHUNK]) for i in range(0, GAMES, CHUNK)]
            start = time.perf_counter()
            winners = np.concatenate(list(pool.map(_play, chunks)))
            wins = int((winners == GUERRILLA).sum())
            verdict = "matches" if wins == published else f"differs from the published {published}-{GAMES - published}"
            print(f"{name:>10}: {wins}-{GAMES - wins} ({verdict}), {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
