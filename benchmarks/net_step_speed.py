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


def timed(step, repeats: int) -> tuple[float, float]:
    """Seconds per call: the mean over `repeats` calls after a warm-up one, and the fastest call (the
    figure to compare between builds: this machine's speed drifts between minutes)."""
    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return sum(times) / repeats, min(times)


def report(what: str, rows: int, seconds: tuple[float, float]) -> None:
    mean, best = seconds
    print(f"{what}: {rows / mean:,.0f} rows/s (fastest call {rows / best:,.0f}), "
          f"{FLOPS_PER_ROW * rows / mean / 1e9:.1f} GFLOP/s")


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
            report(f"torch, {threads} thread(s)", rows, timed(lambda: model.step(x, state), args.repeats))
    slots = np.arange(rows, dtype=np.int32)
    out = np.zeros((rows, OUTPUTS), np.float32)
    for name in [p for p in ("scalar", "avx2", "avx512") if SIMD[p] <= SIMD[best_simd()]]:
        net = CompiledNet(model, name)
        states = net.new_states(rows)
        repeats = args.repeats if name != "scalar" else 2
        report(f"C step ({name}), 1 thread", rows, timed(lambda: net.step(states, slots, obs, out), repeats))


if __name__ == "__main__":
    main()
