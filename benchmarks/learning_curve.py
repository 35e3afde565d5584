"""A learning curve: every saved checkpoint of one or more training runs against fixed opponents,
from both sides, on fresh seeds — how the raw network's strength grows with training.

    python benchmarks/learning_curve.py results/runs/candidate results/runs/expert \
        --games 100 --out results/curve -- greedy mcts:2000

Each run folder's checkpoints/<step>.bin (and final.bin) plays each opponent `--games` games as
Guerrilla and as COIN, as a `net` player (sampling its policy, like every network player), with
the seeds of roster positions 12 (checkpoint) and 13 + k (opponent k), which no pipeline cell or
training uses; the seeds are the same for every checkpoint, so neighbouring points differ by the
network alone.  Ledgers go under --out (a rerun resumes them); prints one line per checkpoint and
opponent and writes --out/curve.csv (run, step, opponent, games per side, wins as each side)."""
import argparse
import csv
import sys
from pathlib import Path

from gcpipe.errors import UserError
from gcpipe.match import match
from gcpipe.match.ledger import wilson_interval
from gcpipe.players import PlayerBook

CHECKPOINT_ROSTER, FIRST_OPPONENT_ROSTER = 12, 13


def checkpoints(run: Path) -> list[tuple[int, Path]]:
    """(step, file) of the run's saved checkpoints in step order; final.bin counts as the last step
    when it is not a copy of the last checkpoint's step (its name carries no step: -1)."""
    found = sorted((int(f.stem), f) for f in (run / "checkpoints").glob("*.bin") if f.stem.isdigit())
    final = run / "final.bin"
    if final.exists() and (not found or final.read_bytes() != found[-1][1].read_bytes()):
        found.append((-1, final))
    return found


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(__doc__)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args(argv[:split])
    opponents = argv[split + 1:]
    if not opponents or len(opponents) > 16 - FIRST_OPPONENT_ROSTER:
        print(f"give 1 to {16 - FIRST_OPPONENT_ROSTER} opponents after --")
        return 2
    book = PlayerBook()
    rows = []
    for run in args.runs:
        if not checkpoints(run):
            raise UserError(f"{run} holds no checkpoints/<step>.bin and no final.bin")
    for run in args.runs:
        for step, file in checkpoints(run):
            name = f"{run.name}-{'final' if step < 0 else step}"
            for o, opponent in enumerate(opponents):
                wins = {}
                for side in ("guerrilla", "coin"):
                    me, them = f"{name}=net:{file}", opponent
                    g, c = (me, them) if side == "guerrilla" else (them, me)
                    rg, rc = ((CHECKPOINT_ROSTER, FIRST_OPPONENT_ROSTER + o) if side == "guerrilla"
                              else (FIRST_OPPONENT_ROSTER + o, CHECKPOINT_ROSTER))
                    result = match(g, c, args.games, book=book, workers=args.workers, progress=False,
                                   out=args.out / run.name / f"{name}_{side}_{o}.jsonl", roster_g=rg, roster_c=rc)
                    wins[side] = result.summary[f"{side}_wins"]
                line = [f"{name} vs {opponent}:"]
                for side in ("guerrilla", "coin"):
                    low, high = wilson_interval(wins[side], args.games)
                    line.append(f"as {side} {wins[side]}/{args.games} ({100 * low:.0f}-{100 * high:.0f} %)")
                print(" ".join(line), flush=True)
                rows.append({"run": run.name, "step": "final" if step < 0 else step, "opponent": opponent,
                             "games_per_side": args.games, "wins_as_guerrilla": wins["guerrilla"],
                             "wins_as_coin": wins["coin"]})
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "curve.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UserError as error:          # a bad config or player: one line, as the gcpipe commands do
        print(f"learning_curve: error: {error}", file=sys.stderr)
        sys.exit(2)
