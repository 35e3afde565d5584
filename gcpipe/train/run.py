"""A training run on disk: results/runs/RUN/ holds config.json (the resolved settings),
metrics.csv (one row per epoch), checkpoints/<global step, 16 digits>.bin, state.pt (everything
needed to resume exactly) and, once the run is complete, final.bin.

Resume: state.pt is written (atomically) at every checkpoint.  Training a run whose folder holds
a state of the same settings reloads it, cuts metrics.csv back to the rows written before it and
replays the epochs since, which — with the same config, seeds and thread count — gives the same
bytes as a run that was never stopped; so rerunning a killed `gcpipe train` (or its Snakemake
job) continues it.  Changed settings or another init checkpoint, or `restart=True`, start the run
over.
"""
from __future__ import annotations

import csv
import io
import json
import math
import shutil
import sys
import time
import warnings
from pathlib import Path

import torch

from gcpipe.errors import UserError
from gcpipe.io import atomic_write_bytes, atomic_write_json
from gcpipe.nn import checkpoint
from gcpipe.train.config import TrainConfig
from gcpipe.train.evaluate import COIN_SIDE, GUERRILLA_SIDE, win_rate
from gcpipe.train.ppo import PPO

STATE_FILE = "state.pt"
LOG_FIELDS = (["games", "perf", "score", "episode_return", "episode_length", "invalid_rate",
               "games_as_guerrilla", "wins_as_guerrilla", "games_as_coin", "wins_as_coin",
               "slot_0_score", "slot_1_score", "slot_0_score_as_guerrilla", "slot_0_score_as_coin",
               "hist_score", "hist_n"]
              + [f"hist_{kind}_bank_{i}" for i in range(8) for kind in ("score", "n")]
              + ["bot_score", "bot_n"]
              # expert iteration (gcpipe/train/expert.py): self-play results and value accuracy
              + ["selfplay_guerrilla_wins"]
              + [f"{value}_brier_{side}" for value in ("root_value", "search_value") for side in ("guerrilla", "coin")])
METRIC_FIELDS = (["epoch", "global_step", "wall_time", "sps", "rollout_seconds", "update_seconds",
                  "learning_rate", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction",
                  "explained_variance", "target_entropy"]
                 + LOG_FIELDS + ["eval_win_rate_as_guerrilla", "eval_win_rate_as_coin"])
# Settings that change when a run stops, not what it computes: a resumed run may differ in them.
_STOP_SETTINGS = ("max_epochs",)


def checkpoint_name(global_step: int) -> str:
    return f"{global_step:016d}.bin"


def default_run_dir(run: str) -> Path:
    return Path("results") / "runs" / run


def init_checkpoint_path(config: TrainConfig) -> Path | None:
    """The checkpoint a run starts from: results/runs/INIT_RUN/final.bin, or None for a fresh init."""
    return default_run_dir(config.init_run) / "final.bin" if config.init_run else None


def train(run: str, config: TrainConfig, out_dir=None, *, restart: bool = False, threads: int | None = None,
          echo=None, init=None) -> Path:
    """Trains `run` into `out_dir` (default results/runs/RUN) and returns the directory.  A no-op when
    final.bin exists for the same config, unless `restart`.  `init` (a checkpoint path) overrides
    the config's init_run.  `echo(line)` receives progress lines (default stderr)."""
    out = Path(out_dir) if out_dir is not None else default_run_dir(run)
    if threads is not None:
        if threads <= 0:
            raise UserError(f"--threads must be positive, got {threads}")
        torch.set_num_threads(threads)
    init_path = Path(init) if init is not None else init_checkpoint_path(config)
    init_checkpoint = checkpoint.load(init_path) if init_path is not None else None
    if init_checkpoint is not None and init_checkpoint.model.bias != config.bias:
        what = (f"has bias vectors, which layout {config.layout} would drop" if init_checkpoint.model.bias else
                f"has no bias vectors for layout {config.layout} to train; convert it first (gcpipe ckpt convert "
                f"IN OUT --layout {config.layout})")
        raise UserError(f"init checkpoint {init_path} (layout {init_checkpoint.layout}) {what}")
    record = {"run": run, "config": config.to_dict(),
              "derived": {"num_agents": config.num_agents, "steps_per_epoch": config.steps_per_epoch,
                          "total_epochs": config.total_epochs,
                          "init_sha256": init_checkpoint.sha256 if init_checkpoint else None}}
    previous = _read_json(out / "config.json")
    same_config = previous is not None and _comparable(previous) == _comparable(record)
    if (out / "final.bin").exists() and same_config and not restart:
        (echo or _stderr)(f"{run}: already trained ({out / 'final.bin'}), nothing to do")
        return out

    ppo = _trainer(config, init_checkpoint)
    metrics_path = out / "metrics.csv"
    elapsed_before = 0.0
    saved = (out / STATE_FILE).exists() and metrics_path.exists()
    if saved and same_config and not restart:
        state = torch.load(out / STATE_FILE, weights_only=False)
        ppo.load_state_dict(state["ppo"])
        elapsed_before = state["wall_time"]
        with open(metrics_path, "r+b") as handle:
            handle.truncate(state["metrics_bytes"])
        (echo or _stderr)(f"{run}: continuing from its saved state at step {ppo.global_step:,}")
    else:
        for stale in [out / "final.bin", out / STATE_FILE, metrics_path]:
            stale.unlink(missing_ok=True)
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        with open(metrics_path, "w", newline="") as handle:
            csv.writer(handle).writerow(METRIC_FIELDS)
    atomic_write_json(out / "config.json", record)
    (out / "checkpoints").mkdir(exist_ok=True)

    progress = _Progress(run, config, ppo.epoch, echo)
    started = time.perf_counter()
    last_epoch = config.total_epochs if not config.max_epochs else min(config.total_epochs, config.max_epochs)
    try:
        while ppo.epoch < last_epoch:
            t0, step_before = time.perf_counter(), ppo.global_step
            ppo.collect()
            t1 = time.perf_counter()
            losses = ppo.update()
            t2 = time.perf_counter()
            log = ppo.pop_log()
            row = {"epoch": ppo.epoch, "global_step": ppo.global_step,
                   "wall_time": elapsed_before + t2 - started, "sps": (ppo.global_step - step_before) / (t2 - t0),
                   "rollout_seconds": t1 - t0, "update_seconds": t2 - t1, **losses,
                   **{k: log.get(k, math.nan) for k in LOG_FIELDS}}
            finished = ppo.epoch == config.total_epochs
            if config.eval_interval and (ppo.epoch % config.eval_interval == 0 or finished):
                row.update(_evaluate(ppo, config))
            _append_row(metrics_path, row)
            progress.update(row)
            if ppo.epoch % config.checkpoint_interval == 0 or finished:
                _save_checkpoint(ppo, out)
                ppo.on_checkpoint()
                state = {"ppo": ppo.state_dict(), "wall_time": elapsed_before + time.perf_counter() - started,
                         "metrics_bytes": metrics_path.stat().st_size}
                buffer = io.BytesIO()
                torch.save(state, buffer)
                atomic_write_bytes(out / STATE_FILE, buffer.getvalue())
        if ppo.epoch == config.total_epochs:
            _write_model(ppo, out / "final.bin")
        progress.done()
    finally:
        ppo.close()
    return out


def _trainer(config: TrainConfig, init: checkpoint.Checkpoint | None):
    if config.algorithm == "expert":
        from gcpipe.train.expert import ExpertIteration

        return ExpertIteration(config, None if init is None else init.model, workers=torch.get_num_threads())
    return PPO(config, None if init is None else init.model)


def _evaluate(ppo: PPO, config: TrainConfig) -> dict[str, float]:
    # Own seed per epoch, own generator: evaluation leaves the training streams untouched.
    seed = (config.seed * 1_000_003 + ppo.epoch) % 2**32
    kwargs = dict(games=config.eval_games, seed=seed, opponent="greedy",
                  max_episode_length=config.max_episode_length)
    return {"eval_win_rate_as_guerrilla": win_rate(ppo.policy, side=GUERRILLA_SIDE, **kwargs),
            "eval_win_rate_as_coin": win_rate(ppo.policy, side=COIN_SIDE, **kwargs)}


def _save_checkpoint(ppo: PPO, out: Path) -> None:
    _write_model(ppo, out / "checkpoints" / checkpoint_name(ppo.global_step))


def _write_model(ppo: PPO, path: Path) -> None:
    with warnings.catch_warnings():
        # The legacy layout has no value head; dropping the trained one is the point of it.
        warnings.simplefilter("ignore", checkpoint.CheckpointWarning)
        checkpoint.save(ppo.policy, path, ppo.config.layout)


def _append_row(path: Path, row: dict) -> None:
    def text(value):
        if isinstance(value, float):
            return "" if math.isnan(value) else repr(value)
        return str(value)
    with open(path, "a", newline="") as handle:
        csv.writer(handle).writerow([text(row.get(k, math.nan)) for k in METRIC_FIELDS])


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _comparable(record: dict) -> dict:
    settings = {k: v for k, v in record.get("config", {}).items() if k not in _STOP_SETTINGS}
    return {"run": record.get("run"), "config": settings, "init": record.get("derived", {}).get("init_sha256")}


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Progress:
    """Steps, steps/s, slot 0's win rates by side and the ETA: one rewritten line on a terminal,
    a plain line every 30 seconds otherwise."""

    def __init__(self, run: str, config: TrainConfig, start_epoch: int, echo):
        self.run, self.total = run, config.total_epochs
        self.start_epoch, self.started = start_epoch, time.perf_counter()
        self.tty = echo is None and sys.stderr.isatty()
        self.echo = echo or _stderr
        self.last_plain = -math.inf
        self.line = ""

    def update(self, row: dict) -> None:
        now = time.perf_counter()
        epochs_per_s = (row["epoch"] - self.start_epoch) / max(now - self.started, 1e-9)
        eta = (self.total - row["epoch"]) / max(epochs_per_s, 1e-9)
        wins = [f"{side} {100 * row[key]:.0f}%" for side, key in (("G", "slot_0_score_as_guerrilla"),
                                                                  ("C", "slot_0_score_as_coin"))
                if not math.isnan(row[key])]
        self.line = (f"{self.run}: epoch {row['epoch']}/{self.total} ({100 * row['epoch'] / self.total:.1f}%)  "
                     f"{row['global_step']:,} steps  {row['sps']:,.0f} steps/s  "
                     f"win {' '.join(wins) or '-'}  ETA {_duration(eta)}")
        if self.tty:
            sys.stderr.write("\r" + self.line + "\033[K")
            sys.stderr.flush()
        elif now - self.last_plain >= 30:
            self.echo(self.line)
            self.last_plain = now

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\n")
        elif self.line:
            self.echo(self.line)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
