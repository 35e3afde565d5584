"""Strength of players against opponents from both sides, on fresh seeds: the measurements behind the
README's strength tables.

    python benchmarks/strength.py --games 300 --out results/strength \
        cand=net:results/runs/candidate/final.bin -- mcts:2000 mcts:10000

Each player (before `--`) plays each opponent (after `--`) `--games` games as Guerrilla and as COIN,
in ledgers under --out (resumable like every match).  Roster positions start at --roster (default
8), beyond the 0-6 of the published cells and the default config, so the seeds are ones no
training or pipeline cell used (positions end at 15: with more players or opponents than fit, the
match says so).  Prints
the player's wins per side with 95 % Wilson intervals."""
import argparse
import sys
from pathlib import Path

from gcpipe import paths
from gcpipe.config import player_book
from gcpipe.errors import UserError
from gcpipe.match import match
from gcpipe.match.ledger import wilson_interval


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(__doc__)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("players", nargs="+")
    parser.add_argument("--games", type=int, default=300)
    parser.add_argument("--out", type=Path, default=paths.RESULTS / "strength")
    parser.add_argument("--roster", type=int, default=8)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--config", default=None)
    args = parser.parse_args(argv[:split])
    opponents = argv[split + 1:]
    book = player_book(args.config)
    for p, player in enumerate(args.players):
        for o, opponent in enumerate(opponents):
            a, b = args.roster + 2 * p, args.roster + 2 * len(args.players) + o
            cells = {}
            for side, (g, c, rg, rc) in (("guerrilla", (player, opponent, a, b)), ("coin", (opponent, player, b, a))):
                result = match(g, c, args.games, book=book, workers=args.workers, progress=False,
                               out=args.out / f"{side}_{p}_{o}.jsonl", roster_g=rg, roster_c=rc)
                cells[side] = result.summary
            guerrilla, coin = cells["guerrilla"], cells["coin"]
            line = [f"{guerrilla['guerrilla']} vs {coin['guerrilla']}:"]
            for side, wins, games in (("as Guerrilla", guerrilla["guerrilla_wins"], guerrilla["games"]),
                                      ("as COIN", coin["coin_wins"], coin["games"])):
                low, high = wilson_interval(wins, games)
                line.append(f"{side} {wins}/{games} ({100 * wins / games:.1f} %, {100 * low:.1f}-{100 * high:.1f})")
            print(" ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UserError as error:          # a bad config or player: one line, as the gcpipe commands do
        print(f"strength: error: {error}", file=sys.stderr)
        sys.exit(2)
