"""Engine speed measurements (`gcpipe bench ...`): numbers to report, never asserted in tests."""
from __future__ import annotations

import time

from gcpipe._engine import lib
from gcpipe.engine.game import check_seed
from gcpipe.engine.vecenv import C_INT_MAX, VecEnv
from gcpipe.errors import check_int


def bench_engine(random_actions: int = 20_000_000, num_envs: int = 4096, steps: int = 300,
                 seed: int = 0) -> dict[str, float]:
    """(a) Random play through the C rules, legal enumeration included (one thread): actions/s.
    (b) Self-play stepping of a VecEnv with `num_envs` envs, observations and masks written:
    env steps/s of `step()` alone, and with the uniform-random legal action choice (in C) added.
    Rates are given per wall-clock second and per CPU second of this thread; on a shared machine
    the CPU-time rate is the one that measures the code."""
    check_int("--random-actions", random_actions, 1, 2**63 - 1)   # C's int64_t
    check_int("--envs", num_envs, 1, C_INT_MAX)
    check_int("--steps", steps, 1)
    check_seed(seed)
    wall, cpu = time.perf_counter(), time.thread_time()
    games = lib.gc_bench_random_play(random_actions, seed)
    play_wall, play_cpu = time.perf_counter() - wall, time.thread_time() - cpu

    env = VecEnv(num_envs, seed=seed)
    env.reset()
    for _ in range(20):                       # warm up: leave the all-openings start behind
        env.random_actions()
        env.step()
    env.pop_log()
    step_wall = step_cpu = choose_wall = choose_cpu = 0.0
    for _ in range(steps):
        w0, c0 = time.perf_counter(), time.thread_time()
        env.random_actions()
        w1, c1 = time.perf_counter(), time.thread_time()
        env.step()
        w2, c2 = time.perf_counter(), time.thread_time()
        choose_wall, choose_cpu = choose_wall + w1 - w0, choose_cpu + c1 - c0
        step_wall, step_cpu = step_wall + w2 - w1, step_cpu + c2 - c1
    log = env.pop_log()
    env.close()
    env_steps = num_envs * steps
    return {
        "random_play_actions": random_actions,
        "random_play_games": games,
        "random_play_actions_per_s": random_actions / play_wall,
        "random_play_actions_per_cpu_s": random_actions / play_cpu,
        "vecenv_envs": num_envs,
        "vecenv_steps": steps,
        "vecenv_env_steps_per_s": env_steps / step_wall,
        "vecenv_env_steps_per_cpu_s": env_steps / step_cpu,
        "vecenv_env_steps_per_s_with_action_choice": env_steps / (step_wall + choose_wall),
        "vecenv_env_steps_per_cpu_s_with_action_choice": env_steps / (step_cpu + choose_cpu),
        "vecenv_games": log["games"],
        "vecenv_mean_episode_length": log["episode_length"],
    }


def bench_mcts(iterations: int = 2000, positions: int = 8, midgame_plies: int = 16, repeats: int = 3,
               seed: int = 1) -> dict[str, float]:
    """MCTS iterations/s on one thread, for random and greedy rollouts, at the opening and at
    mid-game positions (`midgame_plies` random plies from the start).  Each number is the best of
    `repeats` passes over `positions` searches, so a busy machine disturbs it less; each is given per
    wall-clock second and per CPU second of this thread (the one that measures the code when other
    work shares the machine)."""
    from gcpipe._engine import ffi
    from gcpipe.engine.bots import MCTS_MAX_ITERATIONS, ROLLOUTS, Bot, BotSpec
    from gcpipe.engine.game import Game

    check_int("--iterations", iterations, 1, MCTS_MAX_ITERATIONS)
    for flag, value in (("--positions", positions), ("--repeats", repeats)):
        check_int(flag, value, 1)
    check_int("midgame_plies", midgame_plies, 0)
    check_seed(seed)
    starts = {"opening": [Game(seed + i) for i in range(positions)], "midgame": []}
    random_bot, attempt = Bot(BotSpec("random")), 0
    while len(starts["midgame"]) < positions:
        game = Game(seed + 1000 + attempt)
        attempt += 1
        while game.plies < midgame_plies and not game.is_terminal():
            game.apply_action(random_bot.choose(game))
        if not game.is_terminal():
            starts["midgame"].append(game)
    pool = ffi.gc(lib.gc_mcts_new(iterations + 1), lib.gc_mcts_free)
    results: dict[str, float] = {"iterations": iterations, "positions": positions}
    for rollout, code in ROLLOUTS.items():
        for phase, games in starts.items():
            best_wall = best_cpu = 0.0
            for _ in range(repeats):
                wall = cpu = 0.0
                for game in games:
                    state = game.clone()._state
                    w0, c0 = time.perf_counter(), time.thread_time()
                    lib.gc_mcts_choose(state, iterations, 0.7, code, pool)
                    wall, cpu = wall + time.perf_counter() - w0, cpu + time.thread_time() - c0
                best_wall = max(best_wall, iterations * len(games) / wall)
                best_cpu = max(best_cpu, iterations * len(games) / cpu)
            results[f"{phase}_{rollout}_rollouts_iterations_per_s"] = best_wall
            results[f"{phase}_{rollout}_rollouts_iterations_per_cpu_s"] = best_cpu
    return results
