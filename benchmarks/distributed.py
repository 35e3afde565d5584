"""Training over ranks (gcpipe/train/ranks.py): self-play games/s (expert iteration) or agent
steps/s (PPO) and epoch time against the number of ranks, and the cost of gathering an epoch's
games or segments on rank 0.

    python benchmarks/distributed.py [--games 64] [--simulations 16] [--iterations 3] [--repeats 2]
    python benchmarks/distributed.py --ppo [--envs 256] [--iterations 4] [--repeats 2]

With --ppo the run is the Guerrilla teacher's kind (config/config.yaml: two fifths of the envs
against greedy and MCTS 256, a fifth against frozen snapshots), with --envs envs and horizon 64.

Part 1 trains the same small run in each arrangement (ranks x threads each), the arrangements
interleaved and repeated (the machine may be shared), each a fresh `gcpipe train` in a temp
folder; it reports the median over repeats of the per-iteration figures of metrics.csv
(rollout_seconds: the deal, the games and the gather; update_seconds: rank 0's update),
iteration 0 left out (its first games also pay for starting the workers).
Part 2 times the gather alone: rank 1 sends one iteration's games, or with --ppo its share of
one epoch's segments (played once, as the run sends them), to rank 0 over loopback gloo, 5 times,
after a first exchange."""
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


def _gather_rank(rank: int, port: int, records_path: str, out: multiprocessing.Queue, ppo: bool = False) -> None:
    import datetime as dt

    import torch.distributed as dist

    from gcpipe.train.ranks import Launch, Ranks

    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=dt.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    ranks = Ranks(Launch(rank, 2, "127.0.0.1", port, "bench"), store, [("here", 0), ("here", 1)], {}, 600.0)
    records = pickle.loads(Path(records_path).read_bytes())
    if ppo:       # one rank's share of an epoch's segments, sent whole
        theirs = records
        exchange = (lambda: ranks.to_learner(records))
    else:
        mine = [None] * len(records)
        theirs = [record if index % 2 else None for index, record in enumerate(records)]
        exchange = (lambda: ranks.gather(mine if rank == 0 else theirs))
    times = []
    for _ in range(6):
        dist.barrier()
        started = time.perf_counter()
        exchange()
        times.append(time.perf_counter() - started)
    if rank == 0:
        out.put((times[1:], len(pickle.dumps(theirs, protocol=pickle.HIGHEST_PROTOCOL))))
    ranks.close()


def _ppo_share(settings: dict):
    """What rank 1 of 2 sends the learner after an epoch of the run: its segments and games."""
    import numpy as np
    import torch

    from gcpipe.train.config import make_config
    from gcpipe.train.ppo import PPO

    class RankOne:   # Ranks' view for rank 1 of 2, its exchanges caught
        rank, size, learner = 1, 2, False

        def share(self, item):
            return [item, np.zeros(0, np.int64)]

        def to_learner(self, item):
            self.sent = item
            return []

    ranks = RankOne()
    trainer = PPO(make_config(settings), workers=2, ranks=ranks)
    with torch.inference_mode():
        trainer._play_epoch()
    trainer._gather()
    return ranks.sent, len(trainer.trained_rows) * settings["horizon"]


def gather_cost(settings: dict, folder: Path, ppo: bool = False) -> tuple[float, int, int]:
    """Median seconds of one gather of rank 1's half of an iteration's games (or of an epoch's
    segments), their pickled bytes, the plies (agent steps)."""
    from gcpipe.nn.inference import net_arrays
    from gcpipe.train.config import make_config
    from gcpipe.train.expert import ExpertIteration

    if ppo:
        records, plies = _ppo_share(settings)
    else:
        trainer = ExpertIteration(make_config(settings), workers=2)
        records = trainer.play_share(0, net_arrays(trainer.policy))
        plies = sum(r.plies for i, r in enumerate(records) if i % 2)
    path = folder / "records.pkl"
    path.write_bytes(pickle.dumps(records))
    with __import__("socket").socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    queue = multiprocessing.get_context("spawn").Queue()
    processes = [multiprocessing.get_context("spawn").Process(target=_gather_rank,
                                                              args=(rank, port, str(path), queue, ppo))
                 for rank in (0, 1)]
    for process in processes:
        process.start()
    times, size = queue.get(timeout=600)
    for process in processes:
        process.join()
    return statistics.median(times), size, plies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--simulations", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--ppo", action="store_true", help="PPO with the Guerrilla teacher's sparring")
    parser.add_argument("--envs", type=int, default=256, help="PPO's envs (two slots each)")
    parser.add_argument("--arrangements", default=",".join(f"{r}x{w}" for r, w in ARRANGEMENTS),
                        help="RANKSxWORKERS,... (default %(default)s)")
    args = parser.parse_args()
    arrangements = [tuple(int(x) for x in item.split("x")) for item in args.arrangements.split(",")]
    if args.ppo:
        horizon = 64
        settings = {"num_envs": args.envs, "horizon": horizon, "minibatch_size": 8192, "bot_fraction": 0.4,
                    "opponent": {"guerrilla": "greedy", "coin": "mcts"}, "mcts_iterations": 256,
                    "ent_coef": 0.002, "total_timesteps": args.envs * 2 * horizon * args.iterations,
                    "checkpoint_interval": args.iterations}
        what = f"PPO, {args.envs} envs x 2 slots x horizon {horizon} per epoch, MCTS 256 and greedy sparring"
    else:
        settings = {"algorithm": "expert", "selfplay_games": args.games, "replay_games": args.games,
                    "search_simulations": args.simulations, "expert_iterations": args.iterations,
                    "checkpoint_interval": args.iterations, "expert_minibatch_rows": 16}
        what = f"{args.games} games/iteration, {args.simulations} simulations/move"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, commit {commit}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; {what}, {args.iterations} epochs, {args.repeats} repeats")
    results = {arrangement: [] for arrangement in arrangements}
    with tempfile.TemporaryDirectory() as temp:
        for repeat in range(args.repeats):
            for ranks, workers in arrangements:
                folder = Path(temp) / f"{ranks}x{workers}.{repeat}"
                folder.mkdir()
                results[(ranks, workers)].append(run_once(ranks, workers, settings, folder))
        rate, work = (("agent steps/s", args.envs * 2 * 64) if args.ppo else ("self-play games/s", args.games))
        print(f"| ranks | workers per rank | cores used | {rate} | rollout s/epoch | update s/epoch | epoch s |")
        print("|---|---|---|---|---|---|---|")
        for (ranks, workers), runs in results.items():
            rollout = statistics.median(r["rollout"] for r in runs)
            update = statistics.median(r["update"] for r in runs)
            print(f"| {ranks} | {workers} | {ranks * workers} | {work / rollout:,.1f} | {rollout:.2f} | "
                  f"{update:.2f} | {rollout + update:.2f} |")
        seconds, size, plies = gather_cost(settings, Path(temp), ppo=args.ppo)
        what = "share of one epoch's segments" if args.ppo else "half of one iteration's games"
        print(f"\ngather of rank 1's {what} ({plies} agent steps, {size / 1e6:.1f} MB pickled) on rank 0: "
              f"{1000 * seconds:.0f} ms (median of 5)")


if __name__ == "__main__":
    main()
