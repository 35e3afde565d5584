"""End-to-end training throughput: agent steps per second of whole PPO epochs (rollout + update),
with the rollout and update shares, for `gcpipe bench train`."""
from __future__ import annotations

import time

import torch

from gcpipe.errors import UserError, is_int
from gcpipe.train.config import make_config
from gcpipe.train.ppo import PPO


def bench_train(num_envs: int = 2048, horizon: int = 64, epochs: int = 4, threads: int = 2,
                selfplay: bool = True, train_slot_1: bool = False, warmup: int = 1, seed: int = 42) -> dict:
    """Runs `warmup` untimed then `epochs` timed epochs of the default model (H=128, L=2) and
    returns steps/s overall and per phase (a step is one slot's decision, as in training)."""
    for flag, value in (("--horizon", horizon), ("--envs", num_envs), ("--epochs", epochs), ("--threads", threads)):
        if not is_int(value) or value < 1:
            raise UserError(f"{flag} must be an integer >= 1, got {value!r}")
    torch.set_num_threads(threads)
    config = make_config(dict(num_envs=num_envs, horizon=horizon, selfplay=selfplay, train_slot_1=train_slot_1,
                              minibatch_size=min(8192, num_envs * horizon) // horizon * horizon,
                              total_timesteps=10**12, seed=seed))
    ppo = PPO(config)
    try:
        for _ in range(warmup):
            ppo.collect()
            ppo.update()
        rollout = update = 0.0
        for _ in range(epochs):
            t0 = time.perf_counter()
            ppo.collect()
            t1 = time.perf_counter()
            ppo.update()
            t2 = time.perf_counter()
            rollout, update = rollout + t1 - t0, update + t2 - t1
    finally:
        ppo.env.close()
    steps = epochs * config.steps_per_epoch
    return {"agent_steps_per_s": steps / (rollout + update), "rollout_steps_per_s": steps / rollout,
            "update_steps_per_s": steps / update, "rollout_share": rollout / (rollout + update),
            "steps_per_epoch": config.steps_per_epoch, "threads": threads}
