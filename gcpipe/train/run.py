"""A training run on disk (PPO, gcpipe/train/ppo.py, expert iteration, gcpipe/train/expert.py, or
distillation, gcpipe/train/distill.py: all drive the same loop through collect, update, pop_log,
on_checkpoint, state_dict and close):
results/runs/RUN/ holds config.json (the resolved settings),
metrics.csv (one row per epoch), checkpoints/<global step, 16 digits>.bin, state.pt (everything
needed to resume exactly) and, once the run is complete, final.bin.

Resume: state.pt is written (atomically) at every checkpoint.  Training a run whose folder holds
a state of the same settings reloads it, cuts metrics.csv back to the rows written before it and
replays the epochs since, which — with the same config, seeds and thread count — gives the same
bytes as a run that was never stopped; so rerunning a killed `gcpipe train` (or its Snakemake
job) continues it.  Changed settings (other than RESULT_NEUTRAL_SETTINGS) or another init or
teacher checkpoint, or `restart=True`, start the run over; so does continuing on another torch device (a
saved state holds its device's random streams; a finished run is kept), and so does an engine of
another behaviour (config.json and state.pt record the engine fingerprint, gcpipe/fingerprint.py:
the rollouts, the opponents and the evaluation are the engine's games), finished run included.

Safety: the trainer holds an exclusive lock on the run folder (a second trainer of the same
folder is refused with the holder's PID) and removes temp files of killed writes.  state.pt,
every checkpoint and final.bin get a SHA-256 sidecar (FILE.sha256) and are verified when read;
the state before the newest is kept as state.prev.pt, so a damaged state.pt falls back to it.
A folder whose state cannot be trusted (no good state, a missing config.json or metrics.csv,
metrics.csv other than the state recorded) stops with one line saying what `--restart` would
discard: checkpoints are never deleted without being asked.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import shutil
import time
import warnings
from pathlib import Path

import torch

import gcpipe
from gcpipe import paths
from gcpipe.engine import COIN, GUERRILLA, SIDE_NAMES
from gcpipe.engine.vecenv import LOG_FIELDS
from gcpipe.errors import UserError, print_stderr
from gcpipe.fingerprint import engine_fingerprint
from gcpipe.torch_env import set_threads
from gcpipe.train.heap import keep_freed_blocks
from gcpipe.io import (atomic_write_json, checksum_path, checksum_problem, keep_previous, locked_folder, read_bytes,
                       naming, read_text, remove_stale_temps, write_checked)
from gcpipe.nn import checkpoint
from gcpipe.progress import Meter
from gcpipe.train.config import TrainConfig, result_settings, run_schema, torch_device
from gcpipe.train.evaluate import win_rate
from gcpipe.train.expert import LOG_FIELDS as EXPERT_LOG_FIELDS
from gcpipe.train.ppo import PPO
from gcpipe.train.ranks import connect, digest, engine_digest, launch_from, srun_allocation, start_with_srun

STATE_FILE = "state.pt"
PREVIOUS_STATE_FILE = "state.prev.pt"
METRIC_FIELDS = (["epoch", "global_step", "wall_time", "sps", "rollout_seconds", "update_seconds",
                  "learning_rate", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction",
                  "explained_variance", "target_entropy"]
                 + list(LOG_FIELDS) + list(EXPERT_LOG_FIELDS) + ["eval_win_rate_as_guerrilla", "eval_win_rate_as_coin"])


def checkpoint_name(global_step: int) -> str:
    return f"{global_step:016d}.bin"


def train(run: str, config: TrainConfig, out_dir=None, *, restart: bool = False, threads: int | None = None,
          echo=None, init=None) -> Path | None:
    """Trains `run` into `out_dir` (default results/runs/RUN) and returns the directory.  A no-op when
    final.bin exists for the same config, unless `restart`.  `init` (a checkpoint path) overrides
    the config's init_run.  `echo(line)` receives the messages and progress lines (default:
    stderr, with a progress bar on a terminal).  With `ranks` above 1 (gcpipe/train/ranks.py) the
    learner, rank 0, does all this; another rank plays the games it is dealt and returns None.
    `threads` are each rank's torch threads and game workers, except where this process starts
    the run's other ranks itself: then each rank plays with threads / ranks workers, and the
    learner updates with all `threads` (the others wait meanwhile), as one process would."""
    out = Path(out_dir) if out_dir is not None else paths.run_dir(run)
    arguments = {"run": run, "config": config, "out_dir": out_dir, "restart": restart, "threads": threads,
                 "init": init}
    if threads is not None:
        set_threads(threads)
    workers = torch.get_num_threads()
    if config.ranks > 1 and launch_from(os.environ) is None:   # this process starts the ranks
        if srun_allocation(os.environ, config.ranks):
            start_with_srun(run, arguments, config.ranks, os.environ)
            return out
        workers = arguments["threads"] = max(1, workers // config.ranks)
    say = echo or print_stderr
    keep_freed_blocks()
    device = torch_device(config, where=f"run {run}")
    init_path = Path(init) if init is not None else paths.final_checkpoint(config.init_run) if config.init_run else None
    init_checkpoint = checkpoint.load(init_path) if init_path is not None else None
    if init_checkpoint is not None and init_checkpoint.model.bias != config.bias:
        what = (f"has bias vectors, which layout {config.layout} would drop" if init_checkpoint.model.bias else
                f"has no bias vectors for layout {config.layout} to train; convert it first (gcpipe ckpt convert "
                f"IN OUT --layout {config.layout})")
        raise UserError(f"init checkpoint {init_path} (layout {init_checkpoint.layout}) {what}")
    teachers = tuple(_teacher(run, config, side) for side in SIDE_NAMES) if config.algorithm == "distill" else None
    record = {"run": run, "config": config.to_dict(),
              "derived": {"num_agents": config.num_agents, "steps_per_epoch": config.steps_per_epoch,
                          "total_epochs": config.total_epochs, "device": device.type,
                          "engine": engine_fingerprint(),
                          "init_sha256": init_checkpoint.sha256 if init_checkpoint else None,
                          **({"teacher_sha256": {side: teacher.sha256 for side, teacher in zip(SIDE_NAMES, teachers)}}
                             if teachers else {})}}
    # What every rank must share (a GPU learner's device may differ from the players'; the games
    # run on the CPU in C wherever they are).
    shared = {**record, "derived": {key: value for key, value in record["derived"].items() if key != "device"}}
    agreed = {} if config.ranks == 1 else {
        "gcpipe version": gcpipe.__version__, "engine build": engine_digest(),
        "run record (resolved settings, init and teacher checkpoints)": digest(shared)}
    with connect(run, config.ranks, agreed, arguments) as ranks:
        if not ranks.learner:
            trainer = _trainer(config, init_checkpoint, teachers, ranks, workers)
            try:
                trainer.follow()
            finally:
                trainer.close()
            return None
        return _learn(run, config, out, record, init_checkpoint, teachers, ranks, workers, restart, say,
                      echo)


def _learn(run: str, config: TrainConfig, out: Path, record: dict, init_checkpoint, teachers, ranks, workers: int,
           restart: bool, say, echo) -> Path:
    """The learner's part of train: the run folder, under its lock."""
    device = torch_device(config, where=f"run {run}")
    with locked_folder(out, "run folder"):
        for folder in (out, out / "checkpoints"):
            remove_stale_temps(folder)
        previous = _read_json(out / "config.json")
        if previous is None and _saved_files(out) and not restart:
            raise UserError(f"run folder {out} holds {_describe(_saved_files(out))} but no readable config.json, so "
                            f"they cannot be matched to these settings; `gcpipe train {run} --restart` would discard "
                            f"them and start over")
        same_config = previous is not None and _comparable(previous) == _comparable(record)
        final = out / "final.bin"
        if final.exists() and same_config and not restart:
            problem = _checkpoint_problem(final)
            if problem is None:
                say(f"{run}: already trained ({final}), nothing to do")
                _report_bad_checkpoints(run, out, config, say)
                return out
            say(f"{run}: {final} is unusable ({problem}); writing it again from the saved state")
        if previous is not None and not same_config and not restart and _saved_files(out):
            say(f"{run}: {_differences(previous, record, out)}; starting over, which discards "
                f"{_describe(_saved_files(out))}")

        resume = same_config and not restart
        saved_on = previous.get("derived", {}).get("device", "cpu") if previous is not None else device.type
        if resume and saved_on != device.type and _saved_files(out):
            # Its saved state holds that device's random streams: another device would be another run.
            say(f"{run}: the run in {out} was saved on {saved_on} and continues only there; starting over on "
                f"{device.type}, which discards {_describe(_saved_files(out))}")
            resume = False
        trainer = _trainer(config, init_checkpoint, teachers, ranks, workers)
        try:
            elapsed_before = _open_run(run, out, trainer, resume=resume, say=say)
            atomic_write_json(out / "config.json", record)
            _epochs(run, trainer, out, elapsed_before, echo)
        finally:
            trainer.close()
    return out


def _teacher(run: str, config: TrainConfig, side: str) -> checkpoint.Checkpoint:
    """The final.bin of the run that teaches `side`; UserError naming the setting when it cannot be read."""
    try:
        teacher = checkpoint.load(paths.final_checkpoint(config.teacher_runs[side]))
    except UserError as problem:
        raise UserError(f"run {run}, teacher_runs.{side}: {problem}") from None
    if config.teacher_search[side] and not (teacher.full_turn and teacher.has_value_head):
        raise UserError(f"run {run}, teacher_search.{side}: a search needs a standard 5c teacher with value rows; "
                        f"run {config.teacher_runs[side]}'s final.bin has layout {teacher.layout}")
    return teacher


def _trainer(config: TrainConfig, init: checkpoint.Checkpoint | None, teachers: tuple | None, ranks, workers: int):
    """PPO, expert iteration or distillation (from `teachers`, the Guerrilla's and the COIN's),
    starting from `init`'s weights when given; `ranks` (gcpipe/train/ranks.py) play the games,
    each with `workers` processes."""
    model = None if init is None else init.model
    if config.algorithm == "expert":
        from gcpipe.train.expert import ExpertIteration

        return ExpertIteration(config, model, workers=workers, ranks=ranks)
    if config.algorithm == "distill":
        from gcpipe.train.distill import Distillation

        return Distillation(config, teachers, model, workers=workers, ranks=ranks)
    return PPO(config, model, workers=workers, ranks=ranks)


def _open_run(run: str, out: Path, trainer, resume: bool, say) -> float:
    """Continues the run from its newest good saved state when `resume` (metrics.csv cut back to
    the rows written before it), else clears the folder for a new run.  Returns the wall time
    the run had used before."""
    metrics = out / "metrics.csv"
    if resume:
        state = _good_state(run, out, say)
        if state is not None:
            trainer.load_state_dict(state["ppo"])
            with open(metrics, "r+b") as handle:
                handle.truncate(state["metrics_bytes"])
            say(f"{run}: continuing from its saved state at step {trainer.global_step:,}")
            _report_bad_checkpoints(run, out, trainer.config, say)
            return state["wall_time"]
        checkpoints = _checkpoints(out)
        first_epoch, first = next(iter(_recorded_checkpoints(out, trainer.config)), (None, None))
        if checkpoints == [first] and first_epoch <= _last_epoch(trainer.config):
            # Stopped between the first checkpoint and the first state (a kill, a full disk): only
            # starting over can write that state, and it writes the checkpoint again too (this
            # rerun reaches its epoch).
            say(f"{run}: {checkpoints[0]} was written but no saved state after it (the run stopped in between); "
                f"starting over, which writes it again")
        elif checkpoints:
            raise UserError(f"run folder {out} has {_describe(_saved_files(out))} but no saved state to continue "
                            f"from; `gcpipe train {run} --restart` would discard them and start over")
    for stale in [out / "final.bin", out / STATE_FILE, out / PREVIOUS_STATE_FILE, metrics]:
        for path in (stale, checksum_path(stale)):
            path.unlink(missing_ok=True)
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    (out / "checkpoints").mkdir(parents=True)
    with open(metrics, "w", newline="") as handle:
        csv.writer(handle).writerow(METRIC_FIELDS)
    return 0.0


def _good_state(run: str, out: Path, say) -> dict | None:
    """The newest saved state that verifies and fits metrics.csv: state.pt, else the one before
    it.  None when the folder holds no state at all; UserError when it holds only bad ones."""
    metrics = out / "metrics.csv"
    problems = []
    for name in (STATE_FILE, PREVIOUS_STATE_FILE):
        path = out / name
        if not path.exists():
            continue
        state, problem = _read_state(path, metrics)
        if state is not None:
            if problems:
                say(f"{run}: {'; '.join(problems)}; using {name}, the state before it")
            return state
        problems.append(f"{name} is unusable: {problem}")
    if not problems:
        return None
    raise UserError(f"run folder {out}: {'; '.join(problems)}; `gcpipe train {run} --restart` would discard "
                    f"{_describe(_saved_files(out))} and start over")


def _read_state(path: Path, metrics: Path) -> tuple[dict | None, str | None]:
    """A saved state and None, or None and why it cannot be used."""
    data = read_bytes(path)
    # A state without a sidecar was written before gcpipe kept them: read it unverified.
    problem = checksum_problem(path, data) if checksum_path(path).exists() else None
    if problem:
        return None, problem
    try:
        # On the CPU first: the trainer moves what it needs to its device.
        state = torch.load(io.BytesIO(data), weights_only=False, map_location="cpu")
    except Exception as error:   # torch's errors for a damaged pickle are of many types
        return None, f"torch cannot read it ({type(error).__name__})"
    try:
        prefix = metrics.read_bytes()[:state["metrics_bytes"]]
    except FileNotFoundError:
        return None, "metrics.csv, whose rows it continues, is missing"
    recorded = state.get("metrics_sha256")   # absent in states from before sidecars
    if len(prefix) < state["metrics_bytes"] or recorded not in (None, hashlib.sha256(prefix).hexdigest()):
        return None, "metrics.csv no longer holds the rows written before it (cut short or edited)"
    if prefix.split(b"\n", 1)[0].rstrip(b"\r").decode(errors="replace") != ",".join(METRIC_FIELDS):
        return None, ("metrics.csv has another gcpipe version's columns (a run continues under the version it "
                      "began with)")
    if state.get("engine", engine_fingerprint()) != engine_fingerprint():   # (config.json said otherwise)
        return None, (f"it was saved by an engine of another behaviour (engine fingerprint {state['engine']}, "
                      f"{engine_fingerprint()} now)")
    return state, None


def _report_bad_checkpoints(run: str, out: Path, config: TrainConfig, say) -> None:
    """Names the checkpoints of the epochs metrics.csv records that are missing or cannot be played
    (damaged on disk after they were written, as _checkpoint_problem tells): the saved state, past
    them, cannot write them again, and a rerun that said nothing left them so."""
    bad = []
    for _, path in _recorded_checkpoints(out, config):
        problem = f"checkpoint {path} is missing" if not path.exists() else _checkpoint_problem(path)
        if problem:
            bad.append(problem)
    if bad:
        say(f"{run}: {'; '.join(bad)}; the saved state, past them, cannot write them again: `gcpipe train {run} "
            f"--restart` would train the run again to write them")


def _recorded_checkpoints(out: Path, config: TrainConfig) -> list[tuple[int, Path]]:
    """(epoch, checkpoint) for the epochs metrics.csv records that write one, in order (none when
    it cannot be read: the resume's own checks of metrics.csv speak for it)."""
    try:
        rows = list(csv.reader(io.StringIO(read_text(out / "metrics.csv"))))
    except (OSError, UnicodeDecodeError, csv.Error):
        return []
    columns = {name: rows[0].index(name) for name in ("epoch", "global_step") if rows and name in rows[0]}
    paths = []
    for row in rows[1:] if len(columns) == 2 else ():
        epoch, step = (row[columns[name]] if len(row) > columns[name] else "" for name in ("epoch", "global_step"))
        if not all(text.isascii() and text.isdigit() and len(text) <= 16 for text in (epoch, step)):
            continue   # a row no run writes (edited): it names no checkpoint
        if _writes_checkpoint(int(epoch), config):
            paths.append((int(epoch), out / "checkpoints" / checkpoint_name(int(step))))
    return paths


def _last_epoch(config: TrainConfig) -> int:
    """The epoch this invocation stops after: the run's last, or max_epochs when that is sooner."""
    return config.total_epochs if not config.max_epochs else min(config.total_epochs, config.max_epochs)


def _writes_checkpoint(epoch: int, config: TrainConfig) -> bool:
    """Whether epoch `epoch` ends with a checkpoint (and a resume state): every checkpoint_interval
    epochs, and the last."""
    return epoch % config.checkpoint_interval == 0 or epoch == config.total_epochs


def _checkpoints(out: Path) -> list[Path]:
    return sorted((out / "checkpoints").glob("*.bin"))


def _saved_files(out: Path) -> list[Path]:
    """What a run has saved in its folder that starting over would delete."""
    return [*_checkpoints(out), *(path for path in (out / "final.bin", out / STATE_FILE, out / PREVIOUS_STATE_FILE)
                                  if path.exists())]


def _describe(files: list[Path]) -> str:
    checkpoints = sum(path.parent.name == "checkpoints" for path in files)
    others = [path.name for path in files if path.parent.name != "checkpoints"]
    return ", ".join([f"{checkpoints} checkpoint(s)"] * bool(checkpoints) + others) or "nothing"


def _epochs(run: str, trainer, out: Path, elapsed_before: float, echo) -> None:
    """The training loop: an epoch (a PPO rollout and update, or an expert iteration), its metrics
    row, and at every checkpoint interval a checkpoint, the trainer's checkpoint hook (PPO's
    opponent pool) and the resume state; final.bin at the end."""
    config = trainer.config
    metrics = out / "metrics.csv"
    started = time.perf_counter()
    last_epoch = _last_epoch(config)
    with Meter(run, config.total_epochs, "epochs", completed=trainer.epoch, write=echo) as meter:
        while trainer.epoch < last_epoch:
            t0, step_before = time.perf_counter(), trainer.global_step
            trainer.collect()
            t1 = time.perf_counter()
            losses = trainer.update()
            t2 = time.perf_counter()
            log = trainer.pop_log()
            row = {"epoch": trainer.epoch, "global_step": trainer.global_step,
                   "wall_time": elapsed_before + t2 - started, "sps": (trainer.global_step - step_before) / (t2 - t0),
                   "rollout_seconds": t1 - t0, "update_seconds": t2 - t1, **losses,
                   **{k: log.get(k, math.nan) for k in (*LOG_FIELDS, *EXPERT_LOG_FIELDS)}}
            finished = trainer.epoch == config.total_epochs
            if config.eval_interval and (trainer.epoch % config.eval_interval == 0 or finished):
                row.update(_evaluate(trainer, config))
            _append_row(metrics, row)
            meter.advance(1, _progress(row))
            if _writes_checkpoint(trainer.epoch, config):
                _write_model(trainer, out / "checkpoints" / checkpoint_name(trainer.global_step))
                trainer.on_checkpoint()
                _save_state(trainer, out, elapsed_before + time.perf_counter() - started)
    if trainer.epoch == config.total_epochs:
        _write_model(trainer, out / "final.bin")


def _progress(row: dict) -> str:
    """Steps so far, their rate and slot 0's win rates by side in the epoch's training games."""
    rates = [f"{side} {100 * row[key]:.0f}%" for side, key in (("G", "slot_0_score_as_guerrilla"),
                                                              ("C", "slot_0_score_as_coin"))
             if not math.isnan(row[key])]
    return f"{row['global_step']:,} steps  {row['sps']:,.0f} steps/s  win {' '.join(rates) or '-'}"


def _save_state(trainer, out: Path, wall_time: float) -> None:
    """state.pt: everything a rerun needs to continue exactly, with the length and digest of the
    metrics rows it continues (written atomically, checksummed; the state before it is kept)."""
    metrics = (out / "metrics.csv").read_bytes()
    state = {"ppo": trainer.state_dict(), "wall_time": wall_time, "metrics_bytes": len(metrics),
             "metrics_sha256": hashlib.sha256(metrics).hexdigest(), "engine": engine_fingerprint()}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    keep_previous(out / STATE_FILE, out / PREVIOUS_STATE_FILE)
    write_checked(out / STATE_FILE, buffer.getvalue())


def _evaluate(trainer, config: TrainConfig) -> dict[str, float]:
    # Own seed per epoch; evaluation games draw from their own generators, so the training
    # streams are untouched.
    seed = (config.seed * 1_000_003 + trainer.epoch) % 2**32
    return {"eval_win_rate_as_guerrilla": win_rate(trainer.policy, side=GUERRILLA, games=config.eval_games, seed=seed),
            "eval_win_rate_as_coin": win_rate(trainer.policy, side=COIN, games=config.eval_games, seed=seed)}


def _write_model(trainer, path: Path) -> None:
    with warnings.catch_warnings():
        # The legacy layout has no value head; dropping the trained one is the point of it.
        warnings.simplefilter("ignore", checkpoint.CheckpointWarning)
        checkpoint.save(trainer.policy, path, trainer.config.layout)


def _append_row(path: Path, row: dict) -> None:
    def text(value):
        if isinstance(value, float):
            return "" if math.isnan(value) else repr(value)
        return str(value)
    with naming(path), open(path, "a", newline="") as handle:
        csv.writer(handle).writerow([text(row.get(k, math.nan)) for k in METRIC_FIELDS])


def _checkpoint_problem(path: Path) -> str | None:
    """Why the checkpoint at `path` cannot be played (size, checksum sidecar, NaNs), or None."""
    try:
        checkpoint.load(path)
    except UserError as error:
        return str(error)
    return None


def _read_json(path: Path) -> dict | None:
    try:
        record = json.loads(read_text(path))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _comparable(record: dict) -> dict:
    """What a run's weights depend on.  A setting missing from an older record (one added since)
    counts as its default, which is what that version trained with."""
    defaults = {key: spec["default"] for key, spec in run_schema()["properties"].items() if "default" in spec}
    return {"run": record.get("run"), "config": result_settings({**defaults, **record.get("config", {})}),
            "init": record.get("derived", {}).get("init_sha256"),
            "teachers": record.get("derived", {}).get("teacher_sha256"),
            "engine": record.get("derived", {}).get("engine")}   # (None: a run from before it was recorded)


def _differences(previous: dict, record: dict, out: Path) -> str:
    """Why the run in `out` (its config.json `previous`) is not the run of `record`, in words."""
    before, now = _comparable(previous), _comparable(record)
    keys = sorted(key for key in set(before["config"]) | set(now["config"])
                  if before["config"].get(key) != now["config"].get(key))
    settings = ", ".join(keys + ["the init checkpoint"] * (before["init"] != now["init"]) +
                         ["a teacher checkpoint"] * (before["teachers"] != now["teachers"]) +
                         ["the run name"] * (before["run"] != now["run"]))
    if before["engine"] == now["engine"]:
        return f"the settings differ from the run in {out} ({settings or 'settings'})"
    engine = (f"the run in {out} was trained by an engine of another behaviour (engine fingerprint "
              f"{before['engine'] or 'not recorded'} there, {now['engine']} now)")
    return engine + (f" and its settings differ ({settings})" if settings else "")
