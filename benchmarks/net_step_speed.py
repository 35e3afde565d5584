"""The network step alone, torch against the C step of play (csrc/gc_net.c): rows per second and
the floating-point rate of the dense products, on batches of real observations.

    python benchmarks/net_step_speed.py [--rows 4096] [--repeats 30]

torch runs MinGRUPolicy.step (what play used before the C step) with 1 and 2 threads; the C step
runs on one thread per code path (play scales it with worker processes).  The FLOP count is that
of the dense products with outputs: 2 * (120 * 128 + 2 * 128 * 384 + 128 * 257) per row; the C
step skips the encoder's zero inputs, so its true work is a little less."""
import argparse
import time

import numpy as np
import torch

from gcpipe.nn.inference import OUTPUTS, SIMD, CompiledNet, best_simd
from gcpipe.nn.model import MinGRUPolicy

FLOPS_PER_ROW = 2 * (120 * 128 + 2 * 128 * 384 + 128 * 257)


def observations(rows: int) -> np.ndarray:
    from gcpipe.engine import NO_SIDE, GameBatch
    from gcpipe.engine.bots import Bot, BotSpec

    batch, bot = GameBatch(rows), Bot(BotSpec("greedy"))
    for i in range(rows):
        batch.reset(i, i + 1)
        for _ in range(i % 40):          # positions from the opening to mid-game
            if batch.winners[i] != NO_SIDE:
                break
            batch.apply([i], [bot.choose(batch.game(i))])
    return batch.observe(np.arange(rows))[0].copy()


def timed(step, repeats: int) -> float:
    step()
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    model = MinGRUPolicy(generator=torch.Generator().manual_seed(1)).eval()
    obs = observations(args.rows)
    rows = args.rows
    for threads in (1, 2):
        torch.set_num_threads(threads)
        state, x = model.initial_state(rows), torch.from_numpy(obs)
        with torch.inference_mode():
            seconds = timed(lambda: model.step(x, state), args.repeats)
        print(f"torch, {threads} thread(s): {rows / seconds:,.0f} rows/s, {FLOPS_PER_ROW * rows / seconds / 1e9:.1f} GFLOP/s")
    slots = np.arange(rows, dtype=np.int32)
    out = np.zeros((rows, OUTPUTS), np.float32)
    for name in [p for p in ("scalar", "avx2", "avx512") if SIMD[p] <= SIMD[best_simd()]]:
        net = CompiledNet(model, name)
        states = net.new_states(rows)
        seconds = timed(lambda: net.step(states, slots, obs, out), args.repeats if name != "scalar" else 2)
        print(f"C step ({name}), 1 thread: {rows / seconds:,.0f} rows/s, {FLOPS_PER_ROW * rows / seconds / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
