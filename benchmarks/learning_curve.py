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

from gcpipe.errors import UserError, run_script
from gcpipe.players import PlayerBook
from strength import both_sides, describe      # benchmarks/strength.py, beside this script

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
    saved = {run: checkpoints(run) for run in args.runs}
    for run, found in saved.items():
        if not found:
            raise UserError(f"{run} holds no checkpoints/<step>.bin and no final.bin")
    rows = []
    for run, found in saved.items():
        for step, file in found:
            name = f"{run.name}-{'final' if step < 0 else step}"
            for o, opponent in enumerate(opponents):
                ledgers = {side: args.out / run.name / f"{name}_{side}_{o}.jsonl" for side in ("guerrilla", "coin")}
                summaries = both_sides(f"{name}=net:{file}", opponent, args.games,
                                       (CHECKPOINT_ROSTER, FIRST_OPPONENT_ROSTER + o), ledgers, book, args.workers)
                print(describe(summaries), flush=True)
                rows.append({"run": run.name, "step": "final" if step < 0 else step, "opponent": opponent,
                             "games_per_side": args.games, "wins_as_guerrilla": summaries["guerrilla"]["guerrilla_wins"],
                             "wins_as_coin": summaries["coin"]["coin_wins"]})
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "curve.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main, sys.argv[1:], "learning_curve"))
