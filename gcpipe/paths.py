"""Where the pipeline's files live under results/ (relative to the working directory, as
Snakemake runs jobs): the one place these paths are written.  Functions take names or
Snakemake wildcard patterns alike, e.g. ledger("{guerrilla}__{coin}")."""
import re
from pathlib import Path

RESULTS = Path("results")
ENGINE_BUILD = RESULTS / "engine" / "build.json"
PROVENANCE = RESULTS / "provenance.json"
RUNS = RESULTS / "runs"
MATCHES = RESULTS / "matches"
COMPARE = RESULTS / "compare"
ELO = RESULTS / "elo"
GAMES = RESULTS / "games"
LOGS = RESULTS / "logs"
BENCHMARKS = RESULTS / "benchmarks"
# The longest file name (one path component, in bytes) the filesystems take (ext4, xfs, APFS,
# btrfs, tmpfs: NAME_MAX).  Cell and run names become file names: checked while planning.
NAME_MAX = 255
# The longest name made of a cell's name (the ledger G__C.jsonl; G__C.json, the shard folder
# G__C/ and the game pictures' folder are shorter) or of a run's name (logs/train/RUN.log,
# benchmarks/train/RUN.tsv; runs/RUN/ is shorter).
CELL_FILE_SUFFIX = ".jsonl"
RUN_FILE_SUFFIX = ".log"


def resolved_config(digest: str) -> Path:
    """The resolved config (defaults filled in) whose text has this digest: the file every job of
    the runs that resolved it reads (see gcpipe.workflow.resolved_config)."""
    return RESULTS / "config" / f"{digest}.yaml"


def run_dir(run: str) -> Path:
    """A training run's folder: config.json, metrics.csv, checkpoints/, state.pt, final.bin."""
    return RUNS / run


def final_checkpoint(run: str) -> Path:
    """The checkpoint a finished training run leaves, played by `{kind: net, run: RUN}`."""
    return run_dir(run) / "final.bin"


def checkpoint_name(path) -> str:
    """A short name for a checkpoint file: the run's for results/runs/RUN/final.bin, else the file
    stem, in the characters player names allow."""
    path = Path(path)
    stem = path.parent.name if path.stem == "final" and path.parent.name else path.stem
    return re.sub(r"[^A-Za-z0-9.\-]+", "-", stem).strip("-.") or "net"


def ledger(cell: str, folder: Path = MATCHES) -> Path:
    """A cell's ledger G__C.jsonl; its summary is the same path with .json."""
    return Path(folder) / f"{cell}.jsonl"


def games_dir(cell: str) -> Path:
    """The pictures of a cell's games (gcpipe view)."""
    return GAMES / cell


def shard_summary(cell: str, first, games) -> Path:
    """The summary of the shard of `games` games from game index `first` (its ledger beside it)."""
    return MATCHES / "shards" / cell / f"{first}-{games}.json"
