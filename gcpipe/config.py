"""The pipeline config: load the YAML, validate it against config/schema.yaml (the player section
assembled from the player kinds) with the schema's defaults filled in, and check what spans
settings.  Every problem is a UserError of one line naming the file and the key, e.g.
    config/config.yaml: players.mcts.iterations: -5 is less than the minimum of 1
The Snakefile and every command that reads a config (`gcpipe train`, `match`, `play`, ...) load
it here, so all accept and reject the same configs.
"""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import yaml

from gcpipe import paths
from gcpipe.errors import UserError
from gcpipe.io import read_text
from gcpipe.players import CHECKPOINT_KINDS, PlayerBook, check_own_rosters, player_schema, roster_positions
from gcpipe.schema import ANCHOR_LIMIT, ROSTER_POSITIONS, check, load_schema, shown
from gcpipe.train.config import TrainConfig, make_config, run_schema
from gcpipe.workflow import MAX_SHARDS_PER_CELL, match_plan


def config_schema() -> dict:
    """config/schema.yaml with its `player` definition filled in from the player kinds and its
    `run` from the training settings (gcpipe.train.config.run_schema)."""
    schema = load_schema()
    schema["$defs"]["player"] = player_schema()
    schema["$defs"]["run"] = run_schema()
    return schema


def validate_config(config: dict, source: str = "config") -> dict:
    """Validate `config` in place against the schema, fill in defaults (including the match
    field and table order, which default to other keys), run the checks that span settings,
    and return it. `source` names the file in error messages."""
    if not isinstance(config, dict):
        raise UserError(f"{source}: the config must be a mapping of keys to values, got "
                        f"{type(config).__name__}")
    if "device" in config:   # every run's default, given before the schema fills in theirs (cpu)
        check(config["device"], {"$ref": "#/$defs/device"}, f"{source}: device")
        runs = config.get("runs")
        for settings in runs.values() if isinstance(runs, dict) else ():
            if isinstance(settings, dict):
                settings.setdefault("device", config["device"])
    check(config, config_schema(), source)
    try:
        _check_cross_references(config)
    except UserError as problem:
        raise UserError(f"{source}: {problem}") from None
    return config


def _check_file_name(what: str, name: str, pattern: str, remedy: str) -> None:
    """A name the pipeline would give a file (`pattern` says which): within the filesystem's limit,
    or a UserError now (Snakemake failed on it mid-run, after the jobs before it)."""
    size = len(name.encode("utf-8"))
    if size > paths.NAME_MAX:
        raise UserError(f"{what}: its file {pattern} would have a name of {size} bytes, beyond the "
                        f"{paths.NAME_MAX} a file name may have; {remedy}")


def input_runs(settings: dict) -> list[tuple[str, str]]:
    """(setting, run) for each configured run whose final.bin a run reads: its init_run and, when it
    distills, its teachers."""
    inputs = [("init_run", settings.get("init_run", ""))]
    if settings.get("algorithm") == "distill":
        inputs += [(f"teacher_runs.{side}", run) for side, run in settings.get("teacher_runs", {}).items()]
    return [(key, run) for key, run in inputs if run]


def _circle_from(start: str, runs: dict) -> list[tuple[str, str]]:
    """The (setting, run) steps of a path of inputs that leads from run `start` back to it, or []."""
    seen = set()

    def path_from(run: str) -> list[tuple[str, str]]:
        for key, source in input_runs(runs[run]):
            if source == start:
                return [(key, source)]
            if source not in seen:
                seen.add(source)
                rest = path_from(source)
                if rest:
                    return [(key, source)] + rest
        return []
    return path_from(start)


def _check_cross_references(config: dict) -> None:
    players, runs = config["players"], config["runs"]
    configs = {run: make_config(settings, where=f"runs.{run}") for run, settings in runs.items()}
    for run in runs:
        for key, source in input_runs(runs[run]):
            if source not in runs:
                raise UserError(f"runs.{run}.{key}: {source!r} is not a configured run (runs: {', '.join(runs)})")
    for run in runs:
        circle = _circle_from(run, runs)
        if circle:
            raise UserError(f"runs.{run}.{circle[0][0]}: the runs start from each other in a circle "
                            f"({' -> '.join([run] + [source for _, source in circle])})")
        init = runs[run].get("init_run")
        if init and configs[init].bias != configs[run].bias:
            raise UserError(f"runs.{run}.init_run: run {init!r} writes layout {configs[init].layout}, which does not "
                            f"fit layout {configs[run].layout} (bias vectors)")
        if configs[run].algorithm == "distill":
            for side, searched in configs[run].teacher_search.items():
                teacher = configs[run].teacher_runs[side]
                if searched and configs[teacher].algorithm == "ppo":
                    raise UserError(f"runs.{run}.teacher_search.{side}: the search reads the value rows of run "
                                    f"{teacher!r} as +-1 outcomes, which algorithm ppo does not train; teach with an "
                                    f"expert or distill run")
    for name, player in players.items():
        if player["kind"] in CHECKPOINT_KINDS and "run" in player and player["run"] not in runs:
            raise UserError(f"players.{name}: run {player['run']!r} is not configured under runs "
                            f"(runs: {', '.join(runs) or 'none'})")
    matches, elo = config["matches"], config["elo"]
    matches.setdefault("field", list(players))
    for index, name in enumerate(matches["field"]):
        if name not in players:
            raise UserError(f"matches.field[{index}]: unknown player {name!r} "
                            f"(players: {', '.join(players)})")
    for name in matches["max_games_with"]:
        if name not in players:
            raise UserError(f"matches.max_games_with: unknown player {name!r} "
                            f"(players: {', '.join(players)})")
    elo.setdefault("order", list(matches["field"]))
    for index, name in enumerate(elo["order"]):
        if name not in matches["field"]:
            raise UserError(f"elo.order[{index}]: {name!r} is not in the match field "
                            f"({', '.join(matches['field'])})")
    unordered = [name for name in matches["field"] if name not in elo["order"]]
    if unordered:   # the table's rows are the order: the elo job refused it after every game
        raise UserError(f"elo.order: it lists the field's players in table order, all of them; "
                        f"missing: {', '.join(unordered)}")
    if abs(float(elo["anchor"].rpartition(":")[2])) > ANCHOR_LIMIT:   # (the schema checked the form)
        raise UserError(f"elo.anchor: {shown(elo['anchor'])}: the value must be within ±{ANCHOR_LIMIT:g}, as "
                        f"`gcpipe elo --anchor` takes it")
    anchor = elo["anchor"].rpartition(":")[0]
    if anchor != "mean" and anchor.rpartition("/")[0] not in matches["field"]:
        raise UserError(f"elo.anchor: player {anchor.rpartition('/')[0]!r} is not in the match "
                        f"field ({', '.join(matches['field'])})")
    cells = [cell.name for cell in match_plan(config)]
    for index, name in enumerate(config["report"]["games"]):
        if name not in cells:
            raise UserError(f"report.games[{index}]: {name!r} is not a cell of the match plan "
                            f"(cells are GUERRILLA__COIN of field players, e.g. {cells[0]})")
    analyst = config["report"].get("analyst")
    if analyst is not None and (analyst not in players or players[analyst]["kind"] not in CHECKPOINT_KINDS):
        raise UserError(f"report.analyst: {analyst!r} is not a net or search player of `players` "
                        f"({', '.join(n for n, p in players.items() if p['kind'] in CHECKPOINT_KINDS) or 'none'})")
    for cell in match_plan(config):
        count = math.ceil(cell.games / matches["shard_size"])
        if count > MAX_SHARDS_PER_CELL:
            raise UserError(f"matches: cell {cell.name} would be {count:,} shards of {matches['shard_size']:,} games "
                            f"(at most {MAX_SHARDS_PER_CELL:,} jobs a cell); raise matches.shard_size")
    for cell in match_plan(config):
        _check_file_name(f"matches: the cell of players {shown(cell.guerrilla)} and {shown(cell.coin)}",
                         cell.name + paths.CELL_FILE_SUFFIX, "GUERRILLA__COIN.jsonl", "shorten the player names")
    for run in config["runs"]:
        _check_file_name(f"runs.{shown(run)}", run + paths.RUN_FILE_SUFFIX, "logs/train/RUN.log",
                         "shorten the run's name")
    roster = roster_positions(players)
    for name in matches["field"]:
        if roster[name] >= ROSTER_POSITIONS:
            raise UserError(f"players.{name}: its roster position is {roster[name]} (its place in `players`), but "
                            f"positions are 0..{ROSTER_POSITIONS - 1}; give it a free `roster`")
    check_own_rosters({name: roster[name] for name in matches["field"]}, "`roster`")


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key, mark):
        super().__init__()
        self.key, self.line = key, mark.line + 1


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML forbids it; PyYAML
    would silently keep the last value).  A merge key (`<<: *anchor`) is not a key: the base
    loader merges the anchored mapping, and keys written beside it override its entries."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                if key in seen:
                    raise _DuplicateKey(key, key_node.start_mark)
                seen.add(key)
            except TypeError:   # an unhashable key: the base constructor reports it
                pass
        return super().construct_mapping(node, deep)


_AMBIGUOUS_INT = re.compile(r"[-+]?(0[0-7_]+|[0-9][0-9_]*(:[0-5]?[0-9])+)")


def _refuse_ambiguous_int(loader, node):
    """YAML 1.1 reads 010 as 8 and 1:30 as 90 (octal, base 60), quietly: refused, so a roster
    position, seed or count is never other than it reads."""
    if _AMBIGUOUS_INT.fullmatch(node.value):
        raise _AmbiguousNumber(node.value, node.start_mark)
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:   # beyond Python's integer-string limit (sys.get_int_max_str_digits)
        raise _HugeNumber(node.value, node.start_mark) from None


class _AmbiguousNumber(yaml.YAMLError):
    def __init__(self, text, mark):
        super().__init__()
        self.text, self.line = text, mark.line + 1


class _HugeNumber(_AmbiguousNumber):
    pass


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _refuse_ambiguous_int)


def read_config_file(path):
    """The YAML document of the config file at `path`, not yet validated."""
    path = Path(path)
    try:
        return yaml.load(read_text(path), Loader=_StrictLoader)
    except FileNotFoundError:
        raise UserError(f"config {path} does not exist") from None
    except OSError as error:
        raise UserError(f"cannot read config {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise UserError(f"cannot read config {path}: {error}") from None
    except RecursionError:
        raise UserError(f"config {path} nests its lists or mappings too deeply to read") from None
    except _HugeNumber as error:
        limit = sys.get_int_max_str_digits()
        raise UserError(f"config {path}:{error.line}: a number of {len(error.text):,} characters, beyond any "
                        f"setting's range (and beyond the {limit:,} digits Python reads)") from None
    except _AmbiguousNumber as error:
        raise UserError(f"config {path}:{error.line}: {error.text} is an octal or base-60 number to YAML "
                        f"(010 is 8, 1:30 is 90); write it in decimal without a leading 0, or quote it") from None
    except _DuplicateKey as error:
        raise UserError(f"config {path}:{error.line}: key {error.key!r} is given twice in one mapping "
                        f"(YAML would keep only the last value); remove one") from None
    except yaml.YAMLError as error:
        raise UserError(f"config {path} is not valid YAML: {' '.join(str(error).split())}") from None


def load_config(path) -> dict:
    """Read, validate and fill in the pipeline config at `path` (see validate_config)."""
    return validate_config(read_config_file(path), source=str(path))


def run_config(path, run: str) -> TrainConfig:
    """The training settings of `run` in the pipeline config at `path` (`gcpipe train`)."""
    runs = load_config(path)["runs"]
    if run not in runs:
        raise UserError(f"config {path} has no run '{run}' (runs: {', '.join(runs) or 'none'})")
    return make_config(runs[run], where=f"{path}: runs.{run}")


def player_book(path=None) -> PlayerBook:
    """The players a command can name: those of the config at `path` (none: short specs only)."""
    return PlayerBook(load_config(path)["players"] if path is not None else None)


def config_text(config: dict) -> str:
    """The config as YAML, keys in their given order (the resolved config every job reads)."""
    return yaml.safe_dump(config, sort_keys=False, allow_unicode=True, default_flow_style=False)
