"""CPU time per decision of a player over real games, one game at a time on one core (as a match
against MCTS plays them), for comparing a search player's budget with MCTS 10K's.

    python benchmarks/time_per_move.py --games 20 mcts:10000 search:results/runs/candidate/final.bin:800
    python benchmarks/time_per_move.py --config config/reference.yaml mcts10k expert-search

Each player plays --games games against greedy from both sides (seeds of roster positions 14 and
15, which no pipeline cell uses);
reported: decisions, CPU seconds per decision (thread time, forced single-move decisions included
for every player alike).  Players are short specs or, with --config, that config's players."""
import argparse
import sys
import time

import numpy as np

from gcpipe.config import player_book
from gcpipe.engine import COIN, GUERRILLA, NO_SIDE, GameBatch
from gcpipe.errors import run_script
from gcpipe.match import game_seed
from gcpipe.players import PlayerBook, parse_spec


def decision_seconds(spec: str, games: int, book: PlayerBook) -> tuple[int, float]:
    """Decisions of `spec` and their CPU seconds over 2 * games games against greedy, through the
    player protocol (gcpipe.protocol) on one-game batches."""
    timed, greedy = book.resolve(spec).runtime(), parse_spec("greedy").runtime()
    for player in (timed, greedy):
        player.start(1)
    decisions, seconds = 0, 0.0
    slot = np.zeros(1, np.int32)
    for g in range(games):
        for side in (GUERRILLA, COIN):
            batch = GameBatch(1)
            batch.reset(0, game_seed(14, 15, 2 * g + 1 + side))
            for player in (timed, greedy):
                player.new_games(slot)
            while batch.winners[0] == NO_SIDE:
                if batch.to_move[0] == side:
                    greedy.observe(batch, slot)
                    start = time.thread_time()
                    action = timed.choose(batch, slot)
                    seconds += time.thread_time() - start
                    decisions += 1
                else:
                    timed.observe(batch, slot)
                    action = greedy.choose(batch, slot)
                batch.apply(slot, action)
    return decisions, seconds


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("players", nargs="+")
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--config", default=None)
    args = parser.parse_args(argv)
    book = player_book(args.config)
    for spec in args.players:
        decisions, seconds = decision_seconds(spec, args.games, book)
        print(f"{spec}: {decisions} decisions, {1000 * seconds / decisions:.1f} ms CPU per decision", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main, sys.argv[1:], "time_per_move"))
