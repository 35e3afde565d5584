r"""Strength of players against opponents from both sides, on fresh seeds: the measurements behind the
strength tables of docs/results.md.

    python benchmarks/strength.py --games 300 --out results/strength \
        cand=net:results/runs/candidate/final.bin -- mcts:2000 mcts:10000

Each player (before `--`) plays each opponent (after `--`) `--games` games as Guerrilla and as COIN,
in ledgers under --out (resumable like every match).  Players are short specs or the players of
--config (default config/config.yaml: `mcts2k`, `candidate`, ...).  Roster positions start at
--roster (default 8), beyond the 0-6 of the published cells and the default config, so the seeds
are ones no training or pipeline cell used (positions end at 15: with more players or opponents
than fit, the match says so).  Prints the player's wins per side with 95 % Wilson intervals."""
import argparse
import sys
from pathlib import Path

from gcpipe import paths
from gcpipe.config import player_book
from gcpipe.errors import UserError, run_script
from gcpipe.match import match
from gcpipe.match.ledger import wilson_interval
from gcpipe.schema import ROSTER_POSITIONS


def both_sides(player: str, opponent: str, games: int, rosters: tuple[int, int], ledgers: dict[str, Path],
               book, workers: int | None) -> dict[str, dict]:
    """`games` games of `player` as Guerrilla and as COIN against `opponent`, the two on roster
    positions rosters = (player's, opponent's), in ledgers[side]: the two cells' summaries."""
    a, b = rosters
    summaries = {}
    for side, (g, c, rg, rc) in (("guerrilla", (player, opponent, a, b)), ("coin", (opponent, player, b, a))):
        summaries[side] = match(g, c, games, book=book, workers=workers, progress=False, out=ledgers[side],
                                roster_g=rg, roster_c=rc).summary
    return summaries


def describe(summaries: dict[str, dict]) -> str:
    """One line: the player's wins as Guerrilla and as COIN with 95 % Wilson intervals."""
    guerrilla, coin = summaries["guerrilla"], summaries["coin"]
    line = [f"{guerrilla['guerrilla']} vs {coin['guerrilla']}:"]
    for side, wins, games in (("as Guerrilla", guerrilla["guerrilla_wins"], guerrilla["games"]),
                              ("as COIN", coin["coin_wins"], coin["games"])):
        low, high = wilson_interval(wins, games)
        line.append(f"{side} {wins}/{games} ({100 * wins / games:.1f} %, {100 * low:.1f}-{100 * high:.1f})")
    return " ".join(line)


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
    parser.add_argument("--config", default=Path(__file__).resolve().parents[1] / "config" / "config.yaml",
                        help="a config whose players can be named (default: the default config)")
    args = parser.parse_args(argv[:split])
    opponents = argv[split + 1:]
    book = player_book(args.config)
    for name in args.players + opponents:   # an unknown name refused before the first pair plays
        book.resolve(name)

    def rosters(p: int, o: int) -> tuple[int, int]:   # of player p and opponent o
        return args.roster + 2 * p, args.roster + 2 * len(args.players) + o

    last = rosters(len(args.players) - 1, len(opponents) - 1)[1]
    if last >= ROSTER_POSITIONS:
        raise UserError(f"--roster {args.roster} with {len(args.players)} player(s) and {len(opponents)} "
                        f"opponent(s) needs roster positions up to {last}; positions end at {ROSTER_POSITIONS - 1}")
    for p, player in enumerate(args.players):
        for o, opponent in enumerate(opponents):
            ledgers = {side: args.out / f"{side}_{p}_{o}.jsonl" for side in ("guerrilla", "coin")}
            print(describe(both_sides(player, opponent, args.games, rosters(p, o), ledgers, book, args.workers)),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main, sys.argv[1:], "strength"))
