"""Expert iteration over ranks (gcpipe/train/ranks.py): self-play games/s and iteration time
against the number of ranks, and the cost of gathering an iteration's games on rank 0.

    python benchmarks/distributed.py [--games 64] [--simulations 16] [--iterations 3] [--repeats 2]

Part 1 trains the same small run in each arrangement (ranks x threads each), the arrangements
interleaved and repeated (the machine may be shared), each a fresh `gcpipe train` in a temp
folder; it reports the median over repeats of the per-iteration figures of metrics.csv
(rollout_seconds: the deal, the games and the gather; update_seconds: rank 0's update),
iteration 0 left out (its first games also pay for starting the workers).
Part 2 times Ranks.gather alone: rank 1 sends one iteration's games (played once, pickled as
the run sends them) to rank 0 over loopback gloo, 5 times, after a first exchange."""
from __future__ import annotations

import argparse
import csv
import datetime
import multiprocessing
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ARRANGEMENTS = [(1, 1), (2, 1), (1, 2)]   # (ranks, game workers per rank)


def run_once(ranks: int, workers: int, settings: dict, folder: Path) -> dict:
    config = folder / "config.yaml"
    runs = {"b": {**settings, "ranks": ranks}}
    config.write_text(yaml.safe_dump({"players": {"g": {"kind": "greedy"}}, "runs": runs}))
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gcpipe", "train", "b", "--config", str(config), "--out", str(folder / "run"),
                    "--threads", str(ranks * workers)], check=True, capture_output=True)
    wall = time.perf_counter() - started
    rows = list(csv.DictReader((folder / "run" / "metrics.csv").read_text().splitlines()))[1:]
    rollout = statistics.median(float(row["rollout_seconds"]) for row in rows)
    update = statistics.median(float(row["update_seconds"]) for row in rows)
    return {"rollout": rollout, "update": update, "wall": wall}


def _gather_rank(rank: int, port: int, records_path: str, out: multiprocessing.Queue) -> None:
    import datetime as dt

    import torch.distributed as dist

    from gcpipe.train.ranks import Launch, Ranks

    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=dt.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    ranks = Ranks(Launch(rank, 2, "127.0.0.1", port, "bench"), store, [("here", 0), ("here", 1)], {}, 600.0)
    records = pickle.loads(Path(records_path).read_bytes())
    mine = [None] * len(records)
    theirs = [record if index % 2 else None for index, record in enumerate(records)]
    times = []
    for _ in range(6):
        dist.barrier()
        started = time.perf_counter()
        ranks.gather(mine if rank == 0 else theirs)
        times.append(time.perf_counter() - started)
    if rank == 0:
        out.put((times[1:], len(pickle.dumps(theirs, protocol=pickle.HIGHEST_PROTOCOL))))
    ranks.close()


def gather_cost(settings: dict, folder: Path) -> tuple[float, int, int]:
    """Median seconds of one gather of half an iteration's games, their pickled bytes, the plies."""
    from gcpipe.nn.inference import net_arrays
    from gcpipe.train.config import make_config
    from gcpipe.train.expert import ExpertIteration

    trainer = ExpertIteration(make_config(settings), workers=2)
    records = trainer.play_share(0, net_arrays(trainer.policy))
    path = folder / "records.pkl"
    path.write_bytes(pickle.dumps(records))
    with __import__("socket").socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    queue = multiprocessing.get_context("spawn").Queue()
    processes = [multiprocessing.get_context("spawn").Process(target=_gather_rank, args=(rank, port, str(path), queue))
                 for rank in (0, 1)]
    for process in processes:
        process.start()
    times, size = queue.get(timeout=600)
    for process in processes:
        process.join()
    return statistics.median(times), size, sum(r.plies for i, r in enumerate(records) if i % 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--simulations", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    settings = {"algorithm": "expert", "selfplay_games": args.games, "replay_games": args.games,
                "search_simulations": args.simulations, "expert_iterations": args.iterations,
                "checkpoint_interval": args.iterations, "expert_minibatch_rows": 16}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, commit {commit}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; {args.games} games/iteration, {args.simulations} simulations/move, "
          f"{args.iterations} iterations, {args.repeats} repeats")
    results = {arrangement: [] for arrangement in ARRANGEMENTS}
    with tempfile.TemporaryDirectory() as temp:
        for repeat in range(args.repeats):
            for ranks, workers in ARRANGEMENTS:
                folder = Path(temp) / f"{ranks}x{workers}.{repeat}"
                folder.mkdir()
                results[(ranks, workers)].append(run_once(ranks, workers, settings, folder))
        print("| ranks | game workers per rank | cores used | self-play games/s | rollout s/iteration | "
              "update s/iteration | iteration s |")
        print("|---|---|---|---|---|---|---|")
        for (ranks, workers), runs in results.items():
            rollout = statistics.median(r["rollout"] for r in runs)
            update = statistics.median(r["update"] for r in runs)
            print(f"| {ranks} | {workers} | {ranks * workers} | {args.games / rollout:.1f} | {rollout:.2f} | "
                  f"{update:.2f} | {rollout + update:.2f} |")
        seconds, size, plies = gather_cost(settings, Path(temp))
        print(f"\ngather of rank 1's half of one iteration ({plies} plies, {size / 1e6:.1f} MB pickled) on rank 0: "
              f"{1000 * seconds:.0f} ms (median of 5)")


if __name__ == "__main__":
    main()
