"""CPU time per decision of a player over real games, one game at a time on one core (as a match
against MCTS plays them), for comparing a search player's budget with MCTS 10K's.

    python benchmarks/time_per_move.py --games 20 mcts:10000 search:results/runs/candidate/final.bin:800

Each player plays --games games against greedy from both sides (seeds from roster positions 30+);
reported: decisions, CPU seconds per decision (thread time, forced single-move decisions included
for every player alike)."""
import argparse
import sys
import time

import numpy as np

from gcpipe.engine import GameBatch
from gcpipe.engine.bots import Bot
from gcpipe.match.players import PlayerBook
from gcpipe.match.runner import game_seed


def decision_seconds(spec: str, games: int) -> tuple[int, float]:
    player = PlayerBook().resolve(spec)
    greedy = Bot("greedy")
    if player.kind == "search":
        from gcpipe.search.player import SearchPlayer
        searcher = SearchPlayer(player.path, player.search)
        searcher.start(1)
    else:
        bot = Bot(player.bot)
    decisions, seconds = 0, 0.0
    slot = np.zeros(1, np.int32)
    for g in range(games):
        for side in (1, 2):
            batch = GameBatch(1)
            batch.reset(0, game_seed(30, 31, 2 * g + side))
            if player.kind == "search":
                searcher.new_games(slot)
            while not batch.states["winner"][0]:
                if batch.states["to_move"][0] == side:
                    start = time.thread_time()
                    if player.kind == "search":
                        action = int(searcher.choose(batch, slot)[0])
                    else:
                        game = batch.game(0)
                        action = bot.choose(game)
                        batch.states["rng"][0] = game.rng_state
                    seconds += time.thread_time() - start
                    decisions += 1
                else:
                    if player.kind == "search":
                        searcher.observe(batch, slot)
                    game = batch.game(0)
                    action = greedy.choose(game)
                    batch.states["rng"][0] = game.rng_state
                batch.apply(0, action)
    return decisions, seconds


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("players", nargs="+")
    parser.add_argument("--games", type=int, default=20)
    args = parser.parse_args(argv)
    for spec in args.players:
        decisions, seconds = decision_seconds(spec, args.games)
        print(f"{spec}: {decisions} decisions, {1000 * seconds / decisions:.1f} ms CPU per decision", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
