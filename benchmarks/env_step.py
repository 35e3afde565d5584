"""The environment step of a PPO run's layout on its own: wall and CPU seconds of the C step with
random actions, and how busy its threads are (CPU time over wall time and threads).  With sparring
bots the step is their searches, so this is where the threads' balance shows.

    python benchmarks/env_step.py --config config/config.yaml --run guerrilla-teacher

The envs are the run's (count, bots, sides, seed) and its bot and historical envs sit where PPO puts
them; random actions stand in for the network's (slot 1 of the self-play envs included)."""
import argparse
import sys
import time

from gcpipe.torch_env import before_torch

before_torch()
from gcpipe.config import run_config  # noqa: E402  (after before_torch: it imports torch)
from gcpipe.errors import run_script  # noqa: E402
from gcpipe.train.ppo import bot_env_range, make_env  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--run", default="guerrilla-teacher")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=150, help="timed steps")
    args = parser.parse_args(argv)
    c = run_config(args.config, args.run)
    env = make_env(c, threads=args.threads)
    env.reset()
    first_bot, first_historical = bot_env_range(c)   # tagged after the reset, as PPO tags them
    env.opponent_tags[first_bot:first_historical] = -1
    env.opponent_tags[first_historical:] = 1
    for _ in range(args.warmup):
        env.random_actions()
        env.step()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(args.steps):
        env.random_actions()
        env.step()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    env.close()
    print(f"{args.run}: {c.num_envs} envs, bot envs {first_bot}-{first_historical - 1}, {env.threads} threads, "
          f"{args.steps} steps: {wall:.2f} s wall, {cpu:.2f} s CPU, threads busy {cpu / wall / env.threads:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main, sys.argv[1:], "env_step"))
