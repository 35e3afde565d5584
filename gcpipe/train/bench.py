"""End-to-end training throughput: agent steps per second of whole PPO epochs (rollout + update),
with the rollout and update shares, for `gcpipe bench train`; and the same against this machine's
roofline — the floating-point work of a step (counted from the network's shapes) at the rate the
training's matrix products run here."""
from __future__ import annotations

import time

import torch

from gcpipe.engine import PASS_ACTION
from gcpipe.errors import UserError, check_int
from gcpipe.torch_env import set_threads
from gcpipe.train.heap import keep_freed_blocks
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.train.config import TrainConfig, make_config
from gcpipe.train.matmul import BF16_HARDWARE, matmul
from gcpipe.train.ppo import PPO


def forward_flops(policy: MinGRUPolicy) -> int:
    """Multiply-add work of one row's step, 2 per weight (the elementwise gates are not counted)."""
    return sum(2 * inputs * outputs for inputs, outputs in policy.matrix_shapes())


def flops_per_step(ppo: PPO, waiting: float = 0.0) -> dict[str, float]:
    """Matrix work per agent step (one row's decision, the unit of steps/s) of each phase of `ppo`,
    `waiting` the share of the rows that are a waiting slot's (whose one legal move is the pass).
    Rollout: every row a network plays (current policy and frozen snapshots; not the bot's) steps
    once per tick, plus the bootstrap step of the trained rows; the C step gives a waiting row and a
    bootstrap row only the decoder's pass logit and value.  Update: replay_ratio passes over the
    trained steps, each a forward, the weights' gradients (as much work again) and the inputs'
    gradients of every layer but the encoder (whose input is the observation); on the CPU a waiting
    row skips the decoder's other columns in all three, and the others compute the pass logit twice
    (with the logits and with the value)."""
    c, policy = ppo.config, ppo.policy
    forward = forward_flops(policy)
    (encoder_in, encoder_out), *_, (hidden, outputs) = policy.matrix_shapes()
    skipped, pass_column = 2 * hidden * (outputs - 2), 2 * hidden     # all columns but the pass and value
    rows_per_tick = len(ppo.current_rows) + len(ppo.historical_rows)
    trained_rows = len(ppo.trained_rows)
    rollout = forward * (rows_per_tick * c.horizon + trained_rows)
    if ppo.rollout_net is not None:
        rollout -= skipped * (waiting * rows_per_tick * c.horizon + trained_rows)
    update = 3 * forward - 2 * encoder_in * encoder_out
    if ppo.device.type == "cpu":
        update += (1 - waiting) * pass_column - 3 * waiting * skipped
    return {"rollout": rollout / c.steps_per_epoch,
            "update": c.replay_ratio * trained_rows * c.horizon * update / c.steps_per_epoch}


def waiting_share(ppo: PPO) -> float:
    """The share of the last epoch's trained rows that are a waiting slot's."""
    return float(ppo.buf_masks[..., PASS_ACTION].float().mean())


def matmul_gflops(policy: MinGRUPolicy, rows: int, seconds: float = 0.5) -> float:
    """GFLOP/s of the training's float32 matrix products (gcpipe/train/matmul.py) at one step's
    shapes over `rows` rows, on the current thread count: the rate a perfectly fused
    implementation's matrix work would run at."""
    weights = [torch.randn(inputs, outputs) for inputs, outputs in policy.matrix_shapes()]
    inputs = [torch.randn(rows, w.shape[0]) for w in weights]
    work = 2 * rows * sum(w.numel() for w in weights)

    def once():
        for x, w in zip(inputs, weights):
            matmul(x, w)

    once()
    repeats, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        once()
        repeats += 1
    return repeats * work / elapsed / 1e9


def bench_train(num_envs: int = 2048, horizon: int = 64, epochs: int = 4, threads: int = 2,
                selfplay: bool = True, train_slot_1: bool = False, warmup: int = 1, seed: int = 42,
                device: str = "cpu", rollout_net: str | None = None, update_precision: str | None = None,
                run: TrainConfig | None = None) -> dict:
    """Runs `warmup` untimed then `epochs` timed epochs of the default model (H=128, L=2) and
    returns steps/s overall and per phase (a step is one slot's decision, as in training), the
    GFLOP/s each phase reaches, the products' rate at the rollout's shapes, and the steps/s that
    rate would allow if the whole epoch were its matrix work (the roofline).  With `run` (a PPO
    run's settings, e.g. the candidate's with its sparring bots) those settings replace the others
    but `epochs`, `warmup` and `threads`.  `rollout_net` (the run setting, auto, torch or c) and
    `update_precision` (float32 or bfloat16) apply to either; None keeps the run's (the default
    without a run)."""
    for flag, value in (("--horizon", horizon), ("--envs", num_envs), ("--epochs", epochs)):
        check_int(flag, value, 1)
    if run is not None and run.algorithm != "ppo":
        raise UserError(f"bench train measures PPO; this run's algorithm is {run.algorithm!r}")
    set_threads(threads)
    keep_freed_blocks()          # as `gcpipe train` does
    if run is not None:
        settings = {**run.to_dict(), "total_timesteps": 10**12}
    else:
        settings = dict(num_envs=num_envs, horizon=horizon, selfplay=selfplay, train_slot_1=train_slot_1,
                        minibatch_size=min(8192, num_envs * horizon) // horizon * horizon,
                        total_timesteps=10**12, seed=seed, device=device)
    chosen = {"rollout_net": rollout_net, "update_precision": update_precision}
    config = make_config({**settings, **{key: value for key, value in chosen.items() if value is not None}},
                         where="bench train")
    ppo = PPO(config)
    # CUDA work is asynchronous: each phase is timed to its end.
    finish = torch.cuda.synchronize if ppo.device.type == "cuda" else (lambda: None)
    try:
        for _ in range(warmup):
            ppo.collect()
            ppo.update()
        rollout = update = 0.0
        for _ in range(epochs):
            t0 = time.perf_counter()
            ppo.collect()
            finish()
            t1 = time.perf_counter()
            ppo.update()
            finish()
            t2 = time.perf_counter()
            rollout, update = rollout + t1 - t0, update + t2 - t1
    finally:
        ppo.env.close()
    steps = epochs * config.steps_per_epoch
    flops = flops_per_step(ppo, waiting_share(ppo))
    peak = matmul_gflops(ppo.policy, rows=config.num_agents) if ppo.device.type == "cpu" else float("nan")
    return {"agent_steps_per_s": steps / (rollout + update), "rollout_steps_per_s": steps / rollout,
            "update_steps_per_s": steps / update, "rollout_share": rollout / (rollout + update),
            "rollout_gflops": steps * flops["rollout"] / rollout / 1e9,
            "update_gflops": steps * flops["update"] / update / 1e9,
            "matmul_gflops": peak,
            "roofline_agent_steps_per_s": peak * 1e9 / (flops["rollout"] + flops["update"]),
            "steps_per_epoch": config.steps_per_epoch, "threads": threads, "device": ppo.device.type,
            "rollout_net": "torch" if ppo.rollout_net is None else "c", "update_precision": config.update_precision + (
                "" if config.update_precision == "float32" else " (AVX512_BF16)" if BF16_HARDWARE else " (emulated)")}
