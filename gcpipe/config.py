"""The pipeline config: load the YAML, validate it against config/schema.yaml with the schema's
defaults filled in, check what spans sections, and derive the match plan from it.

Every problem is a UserError of one line naming the file and the key, e.g.
    config/config.yaml: players.mcts.iterations: -5 is less than the minimum of 1
The Snakefile calls the same functions as the CLI, so both accept and reject the same configs.
"""
from __future__ import annotations

import copy
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import best_match

import gcpipe
from gcpipe.errors import UserError

SCHEMA_PATH = Path(gcpipe.__file__).resolve().parents[1] / "config" / "schema.yaml"
RESULTS = Path("results")
SIDES = ("guerrilla", "coin")
NETWORK_KINDS = ("net", "search")   # players that play a checkpoint file (`path`, or a run's final.bin)


def load_schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))


def _extend_with_defaults(validator_class):
    """A validator that fills in each property's `default` before validating it (the recipe
    snakemake's `validate` uses), copying the default so filled configs never share objects
    with the schema or with each other."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def properties_with_defaults(validator, properties, instance, schema):
        if validator.is_type(instance, "object"):
            for name, subschema in properties.items():
                if "default" in subschema and name not in instance:
                    instance[name] = copy.deepcopy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": properties_with_defaults})


_DefaultingValidator = _extend_with_defaults(Draft202012Validator)


_TYPE_WORDS = {"object": "a mapping", "array": "a list", "string": "a string",
               "integer": "an integer", "number": "a number", "boolean": "true or false"}


def _key_path(parts) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _describe(error) -> str:
    """One line for a schema violation: where it is, and what is wrong in the user's words."""
    where = _key_path(error.absolute_path)
    instance, schema = error.instance, error.schema
    if error.validator == "additionalProperties":
        allowed = list(schema.get("properties", {}))
        unknown = [key for key in instance if key not in allowed]
        what = (f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}"
                + (f" (allowed: {', '.join(allowed)})" if allowed else ""))
    elif error.validator == "required":
        what = f"missing key {error.message.split(' is a required')[0]}"
    elif error.validator == "oneOf" and schema.get("properties", {}).get("kind", {}).get("const") in NETWORK_KINDS:
        what = (f"a {schema['properties']['kind']['const']} player needs exactly one of 'path' (a checkpoint "
                f"file) or 'run' (a training run)")
    elif error.validator == "enum":
        what = f"{instance!r} is not one of {', '.join(map(str, error.validator_value))}"
    elif error.validator == "type":
        expected = _TYPE_WORDS.get(error.validator_value, error.validator_value)
        what = f"must be {expected}, got {instance!r}"
    elif error.validator == "minProperties":
        what = "must not be empty"
    elif error.validator == "pattern":
        # A bad key (e.g. a player name) is checked by `propertyNames`; say it is a name.
        kind = "name " if "propertyNames" in error.absolute_schema_path else ""
        what = f"{kind}{instance!r} has the wrong form" + (f": {schema['description'].rstrip('.')}"
                                                          if "description" in schema else "")
    elif error.validator == "uniqueItems":
        what = f"lists an entry twice: {instance!r}"
    else:
        what = error.message
    return f"{where}: {what}" if where else what


def validate_config(config: dict, source: str = "config") -> dict:
    """Validate `config` in place against the schema, fill in defaults (including the match
    field and table order, which default to other keys), run the checks that span sections,
    and return it. `source` names the file in error messages."""
    if not isinstance(config, dict):
        raise UserError(f"{source}: the config must be a mapping of keys to values, got "
                        f"{type(config).__name__}")
    error = best_match(_DefaultingValidator(load_schema()).iter_errors(config))
    if error is not None:
        raise UserError(f"{source}: {_describe(error)}")
    try:
        _check_cross_references(config)
    except UserError as problem:
        raise UserError(f"{source}: {problem}") from None
    return config


def _check_cross_references(config: dict) -> None:
    from gcpipe.train.config import make_config

    players, runs = config["players"], config["runs"]
    configs = {run: make_config(settings, where=f"runs.{run}") for run, settings in runs.items()}
    for run in runs:
        chain, at = [run], runs[run].get("init_run")
        while at:
            if at not in runs:
                raise UserError(f"runs.{chain[-1]}.init_run: {at!r} is not a configured run "
                                f"(runs: {', '.join(runs)})")
            if at in chain:
                raise UserError(f"runs.{run}.init_run: the runs start from each other in a circle "
                                f"({' -> '.join(chain + [at])})")
            chain.append(at)
            at = runs[at].get("init_run")
        init = runs[run].get("init_run")
        if init and configs[init].bias != configs[run].bias:
            raise UserError(f"runs.{run}.init_run: run {init!r} writes layout {configs[init].layout}, which does not "
                            f"fit layout {configs[run].layout} (bias vectors)")
    for name, player in players.items():
        if player["kind"] in NETWORK_KINDS and "run" in player and player["run"] not in runs:
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
    anchor = elo["anchor"].rpartition(":")[0]
    if anchor != "mean" and anchor.rpartition("/")[0] not in matches["field"]:
        raise UserError(f"elo.anchor: player {anchor.rpartition('/')[0]!r} is not in the match "
                        f"field ({', '.join(matches['field'])})")
    cells = [cell.name for cell in match_plan(config)]
    for index, name in enumerate(config["report"]["games"]):
        if name not in cells:
            raise UserError(f"report.games[{index}]: {name!r} is not a cell of the match plan "
                            f"(cells are GUERRILLA__COIN of field players, e.g. {cells[0]})")
    roster = roster_positions(config)
    holder: dict[int, str] = {}
    for name in matches["field"]:
        if roster[name] in holder:
            raise UserError(f"players {holder[roster[name]]} and {name} share roster position "
                            f"{roster[name]}, so their cells would replay the same seeds; give one "
                            f"of them another `roster`")
        holder[roster[name]] = name


def load_config(path) -> dict:
    """Read, validate and fill in the pipeline config at `path` (see validate_config)."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"config {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"cannot read config {path}: {error}") from None
    except yaml.YAMLError as error:
        raise UserError(f"config {path} is not valid YAML: {' '.join(str(error).split())}") from None
    return validate_config(document, source=str(path))


def roster_positions(config: dict) -> dict[str, int]:
    """Each player's roster position (rules.md §8): its `roster`, else its index in `players`."""
    return {name: player.get("roster", index)
            for index, (name, player) in enumerate(config["players"].items())}


def net_checkpoint(player: dict) -> Path:
    """The checkpoint file a `net` or `search` player plays: its `path`, or the final.bin of its run."""
    if "run" in player:
        return RESULTS / "runs" / player["run"] / "final.bin"
    return Path(player["path"])


@dataclass(frozen=True)
class Cell:
    guerrilla: str
    coin: str
    games: int

    @property
    def name(self) -> str:
        return f"{self.guerrilla}__{self.coin}"


def match_plan(config: dict) -> list[Cell]:
    """Every field player as Guerrilla against every field player as COIN, in field order, each
    with the configured games, capped by `max_games_with` for the players involved."""
    matches = config["matches"]
    caps = matches["max_games_with"]

    def games(guerrilla, coin):
        return min([matches["games"]] + [caps[p] for p in (guerrilla, coin) if p in caps])

    return [Cell(g, c, games(g, c)) for g in matches["field"] for c in matches["field"]]


def shards(games: int, shard_size: int) -> list[tuple[int, int]]:
    """Game-index shards (first game, number of games) that cover games 0..games-1."""
    return [(first, min(shard_size, games - first)) for first in range(0, games, shard_size)]


def check_pipeline(config: dict, results=RESULTS, source: str = "config") -> None:
    """What the workflow checks on disk before any job starts: the results folder can be
    written, every run's settings produce a final.bin, checkpoint files named by `path`
    exist, have a known layout, hold finite weights and match their `sha256`, and OpenSpiel is
    installed if an `openspiel` player plays. `source` names the config file in messages about
    its keys."""
    _check_writable(Path(results))
    for run, settings in config["runs"].items():
        if settings.get("max_epochs", 0):
            raise UserError(f"{source}: runs.{run}.max_epochs stops training before final.bin is "
                            f"written, which the pipeline's matches need; set it to 0")
    # Players that exist before any job runs: checkpoint files named by `path` (a `run:` net is
    # trained by the DAG) and OpenSpiel players (the extra must be installed).
    checkable = [name for name in config["matches"]["field"]
                 if config["players"][name]["kind"] == "openspiel"
                 or (config["players"][name]["kind"] in NETWORK_KINDS and "path" in config["players"][name])]
    if checkable:
        from gcpipe.match.players import player_from_config  # imports torch: only when needed

        for name in checkable:
            try:
                player_from_config(name, config["players"][name])
            except UserError as problem:
                raise UserError(f"{source}: players.{name}: {problem}") from None


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


def config_text(config: dict) -> str:
    """The config as YAML, keys in their given order (the resolved config every job reads)."""
    return yaml.safe_dump(config, sort_keys=False, allow_unicode=True, default_flow_style=False)


def write_if_changed(path, text: str) -> Path:
    """Write `text` to `path` (atomically) only when it differs, so the file's mtime changes
    only when its content does and Snakemake reruns only what the change concerns."""
    from gcpipe.io import atomic_write_text

    path = Path(path)
    try:
        unchanged = path.read_text(encoding="utf-8") == text
    except OSError:
        unchanged = False
    if not unchanged:
        atomic_write_text(path, text)
    return path
