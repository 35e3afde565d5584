"""Two training settings compared over their runs (seeds): is B stronger than A, given how much
runs of one setting vary?

    python benchmarks/runs_ab.py --a ev_42 ev_43 ev_44 --b ev_ent_42 ev_ent_43 ev_ent_44

Each folder is one run's strength ledgers against one opponent, as benchmarks/strength.py writes
them (--out; `--cell P_O` picks player P against opponent O, default 0_0).  Per side (as Guerrilla,
as COIN, both sides' games together, and each run's weaker side) prints each arm's mean win rate
over its runs with the spread of its runs and the spread its games alone would give (for the weaker
side: the games of the side that was weaker), and B - A with a 95 % Welch interval over runs
(gcpipe/stats/runs.py).  Every folder must hold games against the same opponent."""
import argparse
import sys
from pathlib import Path

from gcpipe.errors import UserError, run_script
from gcpipe.match.ledger import read_ledger, summarize
from gcpipe.stats.runs import arm, welch

SIDES = ("as Guerrilla", "as COIN", "both sides", "weaker side")


def run_record(folder: Path, cell: str) -> dict:
    """One run's player, opponent and (wins, games) per row of SIDES, from its two ledgers."""
    summaries = {}
    for side in ("guerrilla", "coin"):
        path = folder / f"{side}_{cell}.jsonl"
        if not path.exists():
            raise UserError(f"{folder}: no {path.name} (a benchmarks/strength.py --out folder?)")
        records = read_ledger(path)
        if not records:
            raise UserError(f"{path}: no finished games yet")
        summaries[side] = summarize(records)
    guerrilla, coin = summaries["guerrilla"], summaries["coin"]
    if guerrilla["guerrilla"] != coin["coin"]:
        raise UserError(f"{folder}: its ledgers hold two players, {guerrilla['guerrilla']!r} and {coin['coin']!r}")
    as_guerrilla = (guerrilla["guerrilla_wins"], guerrilla["games"])
    as_coin = (coin["coin_wins"], coin["games"])
    weaker = min(as_guerrilla, as_coin, key=lambda wins_games: wins_games[0] / wins_games[1])
    return {"player": guerrilla["guerrilla"], "opponent": guerrilla["coin_id"], "opponent_name": guerrilla["coin"],
            "counts": (as_guerrilla, as_coin, (as_guerrilla[0] + as_coin[0], as_guerrilla[1] + as_coin[1]), weaker)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", nargs="+", type=Path, required=True, help="setting A's runs' ledger folders")
    parser.add_argument("--b", nargs="+", type=Path, required=True, help="setting B's runs' ledger folders")
    parser.add_argument("--cell", default="0_0", help="P_O: player P against opponent O (default 0_0)")
    args = parser.parse_args(argv)
    seen = set()
    for folder in args.a + args.b:
        if folder.resolve() in seen:
            raise UserError(f"{folder}: given twice; each run counts once, in one arm")
        seen.add(folder.resolve())
    runs = {name: [run_record(folder, args.cell) for folder in folders] for name, folders in (("A", args.a), ("B", args.b))}
    first = runs["A"][0]
    for folder, record in zip(args.a + args.b, runs["A"] + runs["B"]):
        if record["opponent"] != first["opponent"]:
            raise UserError(f"{folder}: its opponent {record['opponent_name']!r} is not the other folders' "
                            f"{first['opponent_name']!r} ({args.a[0]}); compare runs against one opponent")
    for name, records in runs.items():
        print(f"{name}: {len(records)} runs: {', '.join(record['player'] for record in records)}")
    print(f"opponent: {first['opponent_name']}")
    print(f"{'':14}{'A mean (run sd, games sd)':>28}{'B mean (run sd, games sd)':>28}   B - A [95 % Welch]  df")
    for row, side in enumerate(SIDES):
        a, b = (arm(*zip(*(record["counts"][row] for record in runs[name]))) for name in ("A", "B"))
        d = welch(a, b)
        cells = [f"{100 * x.mean:5.1f} % ({100 * x.run_sd:4.1f}, {100 * x.sampling_sd:3.1f})" for x in (a, b)]
        print(f"{side:14}{cells[0]:>28}{cells[1]:>28}   {100 * d.difference:+5.1f} "
              f"[{100 * d.low:+5.1f}, {100 * d.high:+5.1f}]  {d.df:4.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main, sys.argv[1:], "runs_ab"))
