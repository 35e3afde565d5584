"""OpenSpiel's Python MCTS against gcpipe's MCTS at equal iterations, both with random rollouts
and the same exploration (OpenSpiel's values lie in [-1, 1], gcpipe's in [0, 1], so uct_c = 2c),
GAMES games with each side; and the search speed of each.  Needs the `openspiel` extra.
The unit test plays 20 games each side at 32 iterations; this plays longer matches.

Usage: python benchmarks/openspiel_mcts.py [ITERATIONS [GAMES [WORKERS]]]   (default 200 50 2)
Ledgers go to results/benchmarks/openspiel/ (a rerun continues them).
"""
import sys
import time
from pathlib import Path

import numpy as np

from gcpipe.match import match
from gcpipe.match.ledger import wilson_interval

EXPLORATION = 0.7
OUT = Path("results") / "benchmarks" / "openspiel"


def search_speed(iterations: int) -> tuple[float, float]:
    """Simulations per second of one search at the opening: OpenSpiel's, gcpipe's."""
    import pyspiel
    from open_spiel.python.algorithms import mcts

    import gcpipe.openspiel  # noqa: F401
    from gcpipe.engine import Game
    from gcpipe.engine.bots import Bot, BotSpec

    game = pyspiel.load_game("guerrilla_checkers")
    random_state = np.random.RandomState(1)
    bot = mcts.MCTSBot(game, 2 * EXPLORATION, iterations, mcts.RandomRolloutEvaluator(1, random_state),
                       random_state=random_state)
    start = time.perf_counter()
    bot.step(game.new_initial_state())
    theirs = iterations / (time.perf_counter() - start)
    ours_bot, reps = Bot(BotSpec("mcts", iterations, EXPLORATION, "random")), 20
    start = time.perf_counter()
    for seed in range(1, reps + 1):
        ours_bot.choose(Game(seed))
    ours = reps * iterations / (time.perf_counter() - start)
    return theirs, ours


def main(iterations: int = 200, games: int = 50, workers: int = 2) -> None:
    ours, theirs = f"mcts:{iterations}:{EXPLORATION}:random", f"openspiel:mcts:{iterations}:{2 * EXPLORATION:g}"
    start = time.perf_counter()
    as_guerrilla = match(theirs, ours, games, out=OUT / f"os{iterations}__ours{iterations}.jsonl",
                         workers=workers, progress=False).summary
    as_coin = match(ours, theirs, games, out=OUT / f"ours{iterations}__os{iterations}.jsonl",
                    workers=workers, progress=False).summary
    elapsed = time.perf_counter() - start
    score = as_guerrilla["guerrilla_wins"] + as_coin["coin_wins"]
    low, high = wilson_interval(score, 2 * games)
    speed_theirs, speed_ours = search_speed(iterations)
    print(f"OpenSpiel MCTS vs gcpipe MCTS, {iterations} iterations each, random rollouts, c = {EXPLORATION}:")
    print(f"  OpenSpiel as Guerrilla: {as_guerrilla['guerrilla_wins']}-{as_guerrilla['coin_wins']}")
    print(f"  OpenSpiel as COIN:      {as_coin['coin_wins']}-{as_coin['guerrilla_wins']}")
    print(f"  OpenSpiel's score: {score}/{2 * games} = {score / (2 * games):.1%} (95% CI {low:.1%}-{high:.1%})")
    print(f"  search speed at the opening: OpenSpiel {speed_theirs:,.0f} simulations/s, "
          f"gcpipe {speed_ours:,.0f} iterations/s ({speed_ours / speed_theirs:,.0f}x)")
    print(f"  {2 * games} games in {elapsed:.0f} s with {workers} workers (the ledgers' games that were "
          f"already there are not replayed)")


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:]))
