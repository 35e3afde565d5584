"""Players of a match: built-in bots (random, greedy, MCTS), networks (checkpoint files) and
OpenSpiel's algorithms (the `openspiel` extra, gcpipe.match.openspiel).

A player comes from one of two places:
- the pipeline config's `players:` mapping, e.g.
      players:
        random:   {kind: random}
        mcts2k:   {kind: mcts, iterations: 2000, exploration: 0.7, rollout: greedy, roster: 3}
        baseline: {kind: net, run: baseline}            # results/runs/baseline/final.bin
        puffer40: {kind: net, path: x.bin, sha256: f586...}
        osmcts:   {kind: openspiel, algorithm: mcts, max_simulations: 1000}
- a short spec on the command line: `random`, `greedy`, `mcts:2000`, `mcts:2000:0.7:random`,
  `net:path/to/file.bin`, `openspiel:mcts:1000`, optionally named (`cand=net:x.bin`) and placed
  (`mcts:2000@3`).

Everything that can be wrong with a player (unknown spec, missing or malformed checkpoint,
SHA-256 mismatch, OpenSpiel not installed) is found here, before any game starts.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from gcpipe.engine.bots import MCTS_DEFAULT_EXPLORATION, MCTS_DEFAULT_ROLLOUT, BotSpec, parse_bot
from gcpipe.errors import UserError
from gcpipe.match.openspiel import DEFAULTS as OPENSPIEL_DEFAULTS, OpenSpielSpec, parse_openspiel

KINDS = ("random", "greedy", "mcts", "net", "search", "openspiel")
AGENT_KINDS = ("search", "openspiel")     # players of the batched protocol (start, new_games, observe, choose)
# Names end up in file names (G__C.jsonl), so "__" (the cell separator) and path characters are out.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-]*(_[A-Za-z0-9.\-]+)*$")
_CONFIG_KEYS = {
    "random": {"kind", "roster"},
    "greedy": {"kind", "roster"},
    "mcts": {"kind", "roster", "iterations", "exploration", "rollout"},
    "net": {"kind", "roster", "path", "run", "sha256", "full_turn"},
    "search": {"kind", "roster", "path", "run", "sha256", "simulations", "variant", "c_puct", "considered", "c_visit",
               "c_scale", "value", "value_squash", "value_coef", "rollouts", "rollout_weight", "temperature",
               "calibration"},
    "openspiel": {"kind", "roster", *OPENSPIEL_DEFAULTS},
}


@dataclass(frozen=True)
class Player:
    """One player: a bot (`bot`), a network (`path`, with the `sha256`, `layout` and
    `full_turn` of the checked file) or an OpenSpiel algorithm (`openspiel`).  `identity` is
    what the ledger records about it."""
    name: str
    kind: str
    bot: BotSpec | None = None
    path: str = ""
    sha256: str = ""
    layout: str = ""
    full_turn: bool = False
    openspiel: OpenSpielSpec | None = None
    roster: int | None = None      # roster position (rules.md §8); PlayerBook.field sets it
    identity: dict = field(default_factory=dict, compare=False)
    search: object = None          # a search player's SearchSettings

    @property
    def is_net(self) -> bool:
        """Plays through a network (a net or a search player)."""
        return self.kind in ("net", "search")


def make_bot(name: str, spec: BotSpec | str, roster: int | None = None) -> Player:
    """A bot player from a bot spec ("greedy", "mcts:2000", a BotSpec); UserError if unplayable."""
    _check_name(name)
    _check_roster(roster, name)
    bot = spec if isinstance(spec, BotSpec) else parse_bot(spec)
    identity = {"kind": bot.kind}
    if bot.kind == "mcts":
        identity.update(iterations=bot.iterations, exploration=bot.exploration, rollout=bot.rollout)
    return Player(name=name, kind=bot.kind, bot=bot, roster=roster, identity=identity)


def make_net(name: str, path, sha256: str | None = None, full_turn: bool | None = None,
             roster: int | None = None) -> Player:
    """A network player; loads the checkpoint now so a bad file fails before any game."""
    from gcpipe.nn.checkpoint import load  # torch is imported only when a net plays

    _check_name(name)
    _check_roster(roster, name)
    if sha256 is not None and not (isinstance(sha256, str) and re.fullmatch(r"[0-9a-fA-F]{64}", sha256)):
        raise UserError(f"player {name}: sha256 must be 64 hex digits, got {sha256!r}")
    if full_turn is not None and not isinstance(full_turn, bool):
        raise UserError(f"player {name}: full_turn must be true or false, got {full_turn!r}")
    path = os.path.normpath(str(path))
    checkpoint = load(path, expected_sha256=sha256)
    full_turn = checkpoint.full_turn if full_turn is None else full_turn
    identity = {"kind": "net", "path": path, "sha256": checkpoint.sha256, "layout": checkpoint.layout,
                "full_turn": full_turn}
    return Player(name=name, kind="net", path=path, sha256=checkpoint.sha256, layout=checkpoint.layout,
                  full_turn=full_turn, roster=roster, identity=identity)


def make_search(name: str, path, settings, sha256: str | None = None, roster: int | None = None) -> Player:
    """A search player: the network of the checkpoint at `path` guiding the search `settings`."""
    from gcpipe.search.player import SearchPlayer

    net = make_net(name, path, sha256, roster=roster)
    SearchPlayer(path, settings)   # a file the search cannot use fails here, before any game
    identity = {"kind": "search", "path": net.path, "sha256": net.sha256, "layout": net.layout, **settings.identity()}
    return replace(net, kind="search", search=settings, identity=identity)


def make_openspiel(name: str, spec: OpenSpielSpec, roster: int | None = None) -> Player:
    """An OpenSpiel player; checks now that OpenSpiel is installed."""
    _check_name(name)
    _check_roster(roster, name)
    return Player(name=name, kind="openspiel", openspiel=spec, roster=roster, identity=spec.identity())


def make_agent(player: Player):
    """The runtime player of a search or OpenSpiel player: the batched protocol (start(n_slots),
    new_games(slots), observe(games, slots) before the other side's plies, choose(games, slots))."""
    if player.kind == "openspiel":
        from gcpipe.match.openspiel import OpenSpielPlayer

        return OpenSpielPlayer(player.openspiel)
    from gcpipe.nn.checkpoint import load
    from gcpipe.search.player import SearchPlayer

    # The SHA-256 checked when the player was defined must still hold in every worker.
    return SearchPlayer(load(player.path, expected_sha256=player.sha256), player.search)


def player_from_config(name: str, entry) -> Player:
    """The player of one `players:` entry of the pipeline config."""
    if not isinstance(entry, dict):
        raise UserError(f"config player {name}: expected a mapping with 'kind', got {entry!r}")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise UserError(f"config player {name}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    unknown = sorted(set(entry) - _CONFIG_KEYS[kind])
    if unknown:
        raise UserError(f"config player {name}: unknown key(s) {', '.join(unknown)} for kind {kind}")
    roster = entry.get("roster")
    if kind == "openspiel":
        try:
            settings = OpenSpielSpec(**{key: value for key, value in entry.items() if key in OPENSPIEL_DEFAULTS})
        except UserError as problem:
            raise UserError(f"config player {name}: {problem}") from None
        return make_openspiel(name, settings, roster)
    if kind not in ("net", "search"):
        spec = kind
        if kind == "mcts":
            spec = ":".join(str(entry.get(key, "")) for key in ("kind", "iterations", "exploration", "rollout"))
        try:
            return make_bot(name, spec, roster)
        except UserError as problem:
            raise UserError(f"config player {name}: {problem}") from None
    if ("path" in entry) == ("run" in entry):
        raise UserError(f"config player {name}: a {kind} player needs exactly one of 'path' or 'run'")
    if "run" in entry:
        if not isinstance(entry["run"], str) or not _NAME.match(entry["run"]):
            raise UserError(f"config player {name}: run must be a run name, got {entry['run']!r}")
        from gcpipe.config import net_checkpoint

        path = net_checkpoint(entry)
    else:
        if not isinstance(entry["path"], str) or not entry["path"]:
            raise UserError(f"config player {name}: path must be a file path, got {entry['path']!r}")
        path = entry["path"]
    if kind == "search":
        from gcpipe.search.settings import make_settings

        keys = _CONFIG_KEYS["search"] - {"kind", "roster", "path", "run", "sha256", "calibration"}
        values = {key: entry[key] for key in keys if key in entry}
        if "value_coef" in values and isinstance(values["value_coef"], list):
            values["value_coef"] = tuple(values["value_coef"])
        if values.get("value") == "calibrated" and "value_coef" not in values and "calibration" not in entry:
            raise UserError(f"config player {name}: value 'calibrated' needs a calibration file (calibration: FILE, "
                            f"from gcpipe calibrate) or value_coef")
        settings = make_settings(where=f"config player {name}", **values)
        if "calibration" in entry:
            from gcpipe.nn.checkpoint import load
            from gcpipe.search.calibration import calibrated_settings

            settings = calibrated_settings(settings, entry["calibration"], load(path).sha256, f"config player {name}")
        return make_search(name, path, settings, entry.get("sha256"), roster)
    return make_net(name, path, entry.get("sha256"), entry.get("full_turn"), roster)


def player_from_identity(name: str, identity) -> Player:
    """The player a ledger record names (its `guerrilla_id` or `coin_id`), to replay its games: the
    same bot settings, or the same checkpoint file (SHA-256 checked) and recurrence."""
    kind = identity.get("kind") if isinstance(identity, dict) else None
    try:
        if kind == "net":
            player = make_net(name, identity["path"], identity["sha256"], identity["full_turn"])
        elif kind == "search":
            from gcpipe.search.settings import make_settings

            values = {key: value for key, value in identity.items() if key not in ("kind", "path", "sha256", "layout")}
            values["value_coef"] = tuple(values["value_coef"])
            player = make_search(name, identity["path"], make_settings(where=f"player {name}", **values),
                                 identity["sha256"])
        elif kind == "openspiel":
            player = make_openspiel(name, OpenSpielSpec(**{key: identity[key] for key in OPENSPIEL_DEFAULTS}))
        elif kind == "mcts":
            player = make_bot(name, f"mcts:{identity['iterations']}:{identity['exploration']}:{identity['rollout']}")
        else:
            player = make_bot(name, str(kind))
    except (KeyError, TypeError):
        raise UserError(f"player {name}: the ledger's identity {identity} lacks a setting") from None
    if player.identity != identity:
        raise UserError(f"player {name}: the ledger's identity {identity} is not what gcpipe records for it "
                        f"({player.identity})")
    return player


class PlayerBook:
    """The players a command can name: the config's `players:` (resolved lazily, so an unused
    broken entry does not stop a match) and short specs."""

    def __init__(self, config_players: dict | None = None):
        self._entries = dict(config_players or {})
        for name in self._entries:
            _check_name(name, where="config player")
        self._resolved: dict[str, Player] = {}

    @classmethod
    def from_config_file(cls, path) -> "PlayerBook":
        """The players of the pipeline config at `path` (validated against its schema); no config
        (None) means short specs only."""
        if path is None:
            return cls()
        from gcpipe.config import load_config

        return cls(load_config(path)["players"])

    def resolve(self, spec: str) -> Player:
        """A config player by name, or a short spec (see the module doc)."""
        if not isinstance(spec, str) or not spec.strip():
            raise UserError("a player spec cannot be empty")
        spec = spec.strip()
        if spec in self._entries:
            if spec not in self._resolved:
                self._resolved[spec] = player_from_config(spec, self._entries[spec])
            return self._resolved[spec]
        return parse_spec(spec)

    def field(self, specs) -> list[Player]:
        """The players of a command (each name once), with their roster positions set: the
        player's own `roster` if given, else its index in the config's `players:`, else its
        index among the players named on the command line (rules.md §8)."""
        players: list[Player] = []
        for spec in specs:
            player = self.resolve(spec)
            same_name = next((p for p in players if p.name == player.name), None)
            if same_name is None:
                players.append(player)
            elif same_name.identity != player.identity or same_name.roster != player.roster:
                raise UserError(f"two different players are both named {player.name!r}; "
                                f"name one explicitly (NAME=SPEC)")
        config_index = {name: i for i, name in enumerate(self._entries)}
        placed = []
        for index, player in enumerate(players):
            roster = player.roster
            if roster is None:
                from_config = self._resolved.get(player.name) is player
                roster = config_index[player.name] if from_config else index
            placed.append(replace(player, roster=roster))
        return placed


def parse_spec(spec: str) -> Player:
    """A player from a short spec: [NAME=]KIND[:ARGS][@ROSTER]."""
    text = spec
    name = None
    if "=" in text:
        name, text = text.split("=", 1)
    roster = None
    match = re.fullmatch(r"(.*)@(\d+)", text)
    if match:
        text, roster = match.group(1), int(match.group(2))
    kind, _, rest = text.partition(":")
    if kind == "net":
        if not rest:
            raise UserError(f"player spec {spec!r}: write net:PATH")
        return make_net(name or _net_name(rest), rest, roster=roster)
    if kind == "search":
        from gcpipe.search.settings import make_settings

        path, _, simulations = rest.rpartition(":")
        if not path or not re.fullmatch(r"[0-9]+", simulations):
            raise UserError(f"player spec {spec!r}: write search:PATH:SIMULATIONS")
        settings = make_settings(where=f"player spec {spec!r}", simulations=int(simulations))
        return make_search(name or f"{_net_name(path)}-s{simulations}", path, settings, roster=roster)
    if kind == "openspiel":
        settings = parse_openspiel(rest)
        return make_openspiel(name or settings.default_name(), settings, roster)
    if kind not in ("random", "greedy", "mcts"):
        raise UserError(f"unknown player {spec!r}: not a config player; short specs are random, greedy, "
                        f"mcts[:ITERATIONS[:EXPLORATION[:ROLLOUT]]], net:PATH, search:PATH:SIMULATIONS, "
                        f"openspiel:mcts[:MAX_SIMULATIONS[:UCT_C[:N_ROLLOUTS]]]")
    bot = parse_bot(text)
    return make_bot(name or _bot_name(bot), bot, roster)


def _bot_name(bot: BotSpec) -> str:
    """mcts:2000 -> "mcts2000"; settings other than the defaults are spelled out."""
    if bot.kind != "mcts":
        return bot.kind
    name = f"mcts{bot.iterations}"
    if (bot.exploration, bot.rollout) != (MCTS_DEFAULT_EXPLORATION, MCTS_DEFAULT_ROLLOUT):
        name += f"-c{bot.exploration:g}-{bot.rollout}"
    return name


def _net_name(path: str) -> str:
    """A default name for net:PATH: the file stem, or the run's name for results/runs/RUN/final.bin."""
    p = Path(path)
    stem = p.parent.name if p.stem == "final" and p.parent.name else p.stem
    return re.sub(r"[^A-Za-z0-9.\-]+", "-", stem).strip("-.") or "net"


def _check_name(name, where: str = "player") -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(f"{where} name {name!r} is not usable: use letters, digits, '.', '-' and single '_', "
                        f"starting with a letter or digit")


def _check_roster(roster, name: str) -> None:
    if roster is not None and (isinstance(roster, bool) or not isinstance(roster, int) or roster < 0):
        raise UserError(f"player {name}: roster must be an integer >= 0, got {roster!r}")
