"""The four Random/Greedy cells of the published field (first 100 games each, seeds of rules.md §8)
played by the pure-Python rules oracle (tests/oracle.py) under three generators: BSD's rand_r, which
the published tables used, and glibc's rand_r with and without one extra draw at reset.  Prints each
generator's four scores (Guerrilla wins - COIN wins) in the order Random-Random, Random-Greedy,
Greedy-Random, Greedy-Greedy, for rules.md §8's figures.  About a minute on one core.

Usage: python benchmarks/glibc_rand_r.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from oracle import COIN_STEPS, GUERRILLA, STONE_STEPS, OracleGame, corners, park_miller  # noqa: E402

from gcpipe.match import game_seed  # noqa: E402

MASK = 0xFFFFFFFF
RANDOM, GREEDY = 0, 1                    # roster positions of rules.md §8
CELLS = ((RANDOM, RANDOM), (RANDOM, GREEDY), (GREEDY, RANDOM), (GREEDY, GREEDY))
PLY_CAP = 600


def bsd(state):
    """BSD rand_r: (new state, draw)."""
    x = park_miller(state)
    return x, x


def glibc(state):
    """glibc's rand_r (stdlib/rand_r.c): three steps of its LCG, 11 + 10 + 10 bits."""
    n = (state * 1103515245 + 12345) & MASK
    r = (n >> 16) % 2048
    n = (n * 1103515245 + 12345) & MASK
    r = (r << 10) ^ ((n >> 16) % 1024)
    n = (n * 1103515245 + 12345) & MASK
    r = (r << 10) ^ ((n >> 16) % 1024)
    return n, r


def greedy_score(game, action):
    """rules.md §7.2: what the action captures at once, the board unchanged."""
    if game.to_move == GUERRILLA:
        first, k = divmod(action, 4)
        p1 = (first % 7, first // 7)
        p2 = (p1[0] + STONE_STEPS[k][0], p1[1] + STONE_STEPS[k][1])
        stones = game.stones | {p1, p2}
        return sum(all(c in stones for c in corners(*sq)) for sq in game.coins)
    src, d = divmod(action, 4)
    dx, dy = COIN_STEPS[d]
    return int(game.crossed(src % 8, src // 8, dx, dy) in game.stones)


def guerrilla_wins(a, b, g, generator, reset_draw):
    state = game_seed(a, b, g)
    if reset_draw:
        state, _ = generator(state)
    game, plies = OracleGame(), 0
    while game.winner is None and plies < PLY_CAP:
        legal = game.legal_actions()
        state, draw = generator(state)
        if (a if game.to_move == GUERRILLA else b) == RANDOM:
            action = legal[draw % len(legal)]
        else:
            scores = [greedy_score(game, x) for x in legal]
            best = [x for x, s in zip(legal, scores) if s == max(scores)]
            action = best[draw % len(best)]
        game.apply(action)
        plies += 1
    return game.winner == GUERRILLA


def main():
    for name, generator, reset_draw in (("BSD rand_r", bsd, False), ("glibc rand_r, one draw at reset", glibc, True),
                                        ("glibc rand_r, no draw at reset", glibc, False)):
        scores = []
        for a, b in CELLS:
            wins = sum(guerrilla_wins(a, b, g, generator, reset_draw) for g in range(100))
            scores.append(f"{wins}-{100 - wins}")
        print(f"{name}: {', '.join(scores)}", flush=True)


if __name__ == "__main__":
    main()
