"""What the Snakefile plans from a validated config: the cells of the match field, their
game-index shards, the checks on disk before any job starts, and the resolved config file.
The Snakefile only wires these into rules.

The resolved config is content-addressed, results/config/<digest>.yaml, and each job is given
the file of the run that planned it: a later invocation with another config writes another
file, so it can never change what a running pipeline's jobs read.  A dry run writes nothing."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gcpipe import paths
from gcpipe.errors import UserError
from gcpipe.io import atomic_write_text, read_text
from gcpipe.players import CHECKPOINT_KINDS, Player, PlayerBook, define


# A bound on the jobs of one cell (checked with the config), so a typo in `games` or
# `shard_size` cannot plan millions of jobs.
MAX_SHARDS_PER_CELL = 10_000


@dataclass(frozen=True)
class Cell:
    guerrilla: str
    coin: str
    games: int

    @property
    def name(self) -> str:
        return f"{self.guerrilla}__{self.coin}"


# Threads a training job books per rank of its run: locally `gcpipe train --threads` shares them
# out among the ranks it starts; under SLURM (the profile's set-threads) they are each task's CPUs.
TRAIN_THREADS_PER_RANK = 2


def train_threads(settings: dict) -> int:
    """The threads of a run's training job: TRAIN_THREADS_PER_RANK for each of its `ranks`."""
    return TRAIN_THREADS_PER_RANK * settings.get("ranks", 1)


def train_tasks(settings: dict) -> int | None:
    """The SLURM tasks of a run's training job: its `ranks`, started by srun from the job's own
    process (gcpipe/train/ranks.py); None (no such resource, as for every other job) for one."""
    ranks = settings.get("ranks", 1)
    return ranks if ranks > 1 else None


def train_mpi(settings: dict) -> str | None:
    """The SLURM executor's `mpi` resource of a run's training job: set for a run of several ranks,
    so the job's command runs in its batch script (which may call srun), not inside `srun -n1`."""
    return "srun" if settings.get("ranks", 1) > 1 else None


def match_plan(config: dict) -> list[Cell]:
    """Every field player as Guerrilla against every field player as COIN, in field order, each
    with the configured games, capped by `max_games_with` for the players involved."""
    matches = config["matches"]
    caps = matches["max_games_with"]

    def games(guerrilla, coin):
        return min([matches["games"]] + [caps[p] for p in (guerrilla, coin) if p in caps])

    return [Cell(g, c, games(g, c)) for g in matches["field"] for c in matches["field"]]


def planned_cells(config: dict) -> dict[str, tuple[Player, Player, int]]:
    """Each cell of the match plan by name: its Guerrilla and COIN players (defined, roster
    positions set) and its number of games, what the pipeline's ledger of that cell must hold."""
    book = PlayerBook(config["players"])
    players = {name: book.resolve(name) for name in config["matches"]["field"]}
    return {cell.name: (players[cell.guerrilla], players[cell.coin], cell.games) for cell in match_plan(config)}


def shards(games: int, shard_size: int) -> list[tuple[int, int]]:
    """Game-index shards (first game, number of games) that cover games 0..games-1."""
    return [(first, min(shard_size, games - first)) for first in range(0, games, shard_size)]


# What a build record holds (gcpipe.engine.build.rebuild): 2 = with the behaviour fingerprint.
# A param of the build job, so a record of an earlier format is rebuilt once.
RECORD_FORMAT = 2


def recorded_fingerprint(record) -> str:
    """The behaviour fingerprint the build record at `record` names (gcpipe/fingerprint.py)."""
    try:
        fingerprint = json.loads(read_text(record)).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        fingerprint = None
    if not isinstance(fingerprint, str):
        raise UserError(f"the engine build record {record} names no engine fingerprint (missing, unreadable or "
                        f"written by an earlier gcpipe); delete it, and the next run rebuilds the engine")
    return fingerprint


def checkpoint_of(player: dict) -> list[str]:
    """The checkpoint file a config player plays, as a list (bots need none): a net's or search
    player's `path`, or the final.bin of its training `run`."""
    if player["kind"] not in CHECKPOINT_KINDS:
        return []
    return [str(paths.final_checkpoint(player["run"]) if "run" in player else player["path"])]


def review_analyst(config: dict, cell: str) -> str | None:
    """The player whose network analyses a report game of `cell` (G__C): `report.analyst`, else the
    cell's Guerrilla if it plays a checkpoint, else its COIN, else None."""
    if config["report"].get("analyst"):
        return config["report"]["analyst"]
    guerrilla, _, coin = cell.partition("__")
    return next((name for name in (guerrilla, coin) if config["players"][name]["kind"] in CHECKPOINT_KINDS), None)


def check_pipeline(config: dict, source: str = "config") -> None:
    """What the workflow checks, reading only, when it is planned: every run's settings produce
    a final.bin, and the field's players that need no training are playable (checkpoint files
    named by `path` exist, have a known layout, hold finite weights and match their `sha256`).
    `source` names the config file in messages."""
    for run, settings in config["runs"].items():
        if settings.get("max_epochs", 0):
            raise UserError(f"{source}: runs.{run}.max_epochs stops training before final.bin is "
                            f"written, which the pipeline's matches need; set it to 0")
    for name in config["matches"]["field"]:
        entry = config["players"][name]
        if "run" not in entry:   # a run's final.bin is the pipeline's to make
            define(name, entry, where=f"{source}: players.{name}")


def check_results_folder(results=paths.RESULTS) -> None:
    """Whether the results folder could be made and written, judged without writing (the checks
    while planning run in a dry run too): its nearest existing folder must be writable.
    prepare_results probes it for real (access() says yes to root on read-only mounts)."""
    results = Path(results).absolute()
    existing = next(folder for folder in (results, *results.parents) if folder.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"results folder {results}/ is not writable: {existing} is not a writable folder")


def prepare_results(config_text: str, results=paths.RESULTS) -> Path:
    """What a run does once it has been planned, before its first job (the Snakefile's onstart,
    which a dry run skips, so a dry run writes nothing): check that the results folder can be
    written and write the resolved config its jobs read.  Returns the config's path."""
    _check_writable(Path(results))
    path = resolved_config(config_text)
    if not path.exists():   # content-addressed: an existing file already holds these bytes
        try:
            atomic_write_text(path, config_text)
        except OSError as error:
            raise UserError(f"cannot write the resolved config {path}: {error.strerror or error}") from None
    return path


def _check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # A probe file, not os.access: access() says yes to root on read-only mounts.
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".write-probe.")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise UserError(f"results folder {folder}/ is not writable: "
                        f"{error.strerror or error}") from None


def resolved_config(text: str) -> Path:
    """The content-addressed file of the resolved config `text`: results/config/<digest>.yaml."""
    return paths.resolved_config(hashlib.sha256(text.encode("utf-8")).hexdigest()[:16])
