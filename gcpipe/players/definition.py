"""Player definitions: a config entry or a short spec -> a checked `Player`, before any game.

A config entry is `{kind: KIND, roster: N, ...settings}` under the pipeline config's `players:`;
a short spec is `[NAME=]KIND[:SETTINGS][@ROSTER]` on the command line (`random`, `mcts:2000`,
`cand=net:x.bin@5`).  Both are read with the kind's settings schema, so they accept and reject
the same values and fill in the same defaults.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from gcpipe.errors import UserError, is_int
from gcpipe.players.bots import GreedyPlayer, MctsPlayer, RandomPlayer
from gcpipe.players.network import NetPlayer
from gcpipe.players.openspiel import OpenSpielPlayer
from gcpipe.protocol import RuntimePlayer
from gcpipe.schema import NAME_PATTERN, ROSTER_POSITIONS, check, numbers_as_float, load_schema
from gcpipe.search.player import SearchPlayer

# The player kinds, by the name configs and specs use.
KINDS: dict[str, type[RuntimePlayer]] = {
    cls.kind: cls for cls in (RandomPlayer, GreedyPlayer, MctsPlayer, NetPlayer, SearchPlayer, OpenSpielPlayer)}
# The kinds that play a checkpoint file (CHECKPOINT_SCHEMA: `path`, or a training `run`'s final.bin).
CHECKPOINT_KINDS = tuple(kind for kind, cls in KINDS.items() if "run" in cls.schema["properties"])

_NAME = re.compile(NAME_PATTERN)
_NAME_RULE = load_schema()["$defs"]["name"]["description"].rstrip(".")


@dataclass(frozen=True)
class Player:
    """One defined player.  `settings` build its runtime; `identity` is what the ledger records
    about it; `roster` is its roster position (rules.md §8; PlayerBook.field sets it)."""
    name: str
    kind: str
    settings: dict
    identity: dict = field(compare=False)
    roster: int | None = None

    def runtime(self) -> RuntimePlayer:
        """The object that plays (built in the process that plays)."""
        return KINDS[self.kind].build(self.settings)

    @property
    def task_games(self) -> int:
        return KINDS[self.kind].task_games

    @property
    def pairs_per_step(self) -> int:
        return KINDS[self.kind].pairs_per_step


def player_schema() -> dict:
    """The JSON Schema of a `players:` entry, assembled from the kinds' settings schemas."""
    branches = []
    for kind, cls in KINDS.items():
        keywords = {key: value for key, value in cls.schema.items() if key != "properties"}
        branches.append({"if": {"required": ["kind"], "properties": {"kind": {"const": kind}}},
                         "then": {"type": "object", "additionalProperties": False, **keywords,
                                  "properties": {"kind": {"const": kind}, "roster": {"$ref": "#/$defs/roster"},
                                                 **cls.schema["properties"]}}})
    kind = {"enum": list(KINDS), "description": "The player's kind (below)."}
    return {"type": "object", "required": ["kind"], "properties": {"kind": kind}, "allOf": branches}


def define(name: str, entry: dict, where: str | None = None) -> Player:
    """The player of one config entry (a mapping with `kind`); UserError starting with `where`
    (default "players.NAME") for anything wrong with it, its files included."""
    check_name(name)
    return Player(name, *_settle(entry, where or f"players.{name}"))


def _settle(entry, where: str) -> tuple[str, dict, dict, int | None]:
    """kind, settings, identity and roster of a config entry (see define)."""
    entry = check(dict(entry) if isinstance(entry, dict) else entry, player_schema(), where)
    cls = KINDS[entry["kind"]]
    properties = cls.schema["properties"]
    settings = numbers_as_float({key: entry[key] for key in properties if key in entry}, properties)
    try:
        settings, identity = cls.define(settings)
    except UserError as problem:
        raise UserError(f"{where}: {problem}") from None
    return cls.kind, settings, identity, entry.get("roster")


def parse_spec(spec: str) -> Player:
    """A player from a short spec: [NAME=]KIND[:SETTINGS][@ROSTER]."""
    text, name, roster = spec, None, None
    if "=" in text:
        name, text = text.split("=", 1)
    match = re.fullmatch(r"(.*)@(\d+)", text)
    if match:
        text, roster = match.group(1), int(match.group(2))
        check_roster(roster, f"player spec {spec!r}: @N")
    kind, colon, args = text.strip().partition(":")
    if kind not in KINDS:
        raise UserError(f"unknown player {spec!r}: not a config player; short specs are "
                        f"{', '.join(cls.spec_usage() for cls in KINDS.values())}")
    cls = KINDS[kind]
    try:
        entry = {"kind": kind, **cls.spec_settings(args if colon else None)}
    except UserError as problem:
        raise UserError(f"player spec {spec!r}: {problem}") from None
    kind, settings, identity, _ = _settle(entry, f"player spec {spec!r}")
    name = cls.default_name(settings) if name is None else name
    check_name(name)
    return Player(name, kind, settings, identity, roster)


def from_identity(name: str, identity) -> Player:
    """The player a ledger record names (its `guerrilla_id` or `coin_id`), to replay its games: the
    same settings, the same checkpoint file (SHA-256 checked)."""
    kind = identity.get("kind") if isinstance(identity, dict) else None
    if kind not in KINDS:
        raise UserError(f"player {name}: the ledger's identity {identity} names no player kind")
    properties = KINDS[kind].schema["properties"]
    player = define(name, {"kind": kind, **{key: value for key, value in identity.items() if key in properties}},
                    where=f"player {name}")
    if set(player.identity) - set(identity):
        raise UserError(f"player {name}: the ledger's identity {identity} lacks a setting")
    if player.identity != identity:
        raise UserError(f"player {name}: the ledger's identity {identity} is not what gcpipe records for it "
                        f"({player.identity})")
    return player


def roster_positions(players: dict) -> dict[str, int]:
    """Each config player's roster position (rules.md §8): its `roster`, else its index in `players`."""
    return {name: entry.get("roster", index) for index, (name, entry) in enumerate(players.items())}


def check_name(name, where: str = "player") -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(f"{where} name {name!r} is not usable: {_NAME_RULE[0].lower()}{_NAME_RULE[1:]}")


class PlayerBook:
    """The players a command can name: the config's `players:` (defined lazily, so an unused broken
    entry does not stop a match) and short specs."""

    def __init__(self, config_players: dict | None = None):
        self._entries = dict(config_players or {})
        for name in self._entries:
            check_name(name, where="config player")
        self._rosters = roster_positions(self._entries)
        self._defined: dict[str, Player] = {}

    def resolve(self, spec: str) -> Player:
        """A config player by name (its roster position set), or a short spec (see the module doc)."""
        if not isinstance(spec, str) or not spec.strip():
            raise UserError("a player spec cannot be empty")
        spec = spec.strip()
        if spec in self._entries:
            if spec not in self._defined:
                self._defined[spec] = replace(define(spec, self._entries[spec]), roster=self._rosters[spec])
            return self._defined[spec]
        return parse_spec(spec)

    def field(self, specs) -> list[Player]:
        """The players of a command (each name once), with their roster positions set: a config
        player's as roster_positions says, a short spec's own `@N`, else its index among the
        players named on the command line (rules.md §8)."""
        players: list[Player] = []
        for spec in specs:
            player = self.resolve(spec)
            same_name = next((p for p in players if p.name == player.name), None)
            if same_name is None:
                players.append(player)
            elif same_name.identity != player.identity or same_name.roster != player.roster:
                raise UserError(f"two different players are both named {player.name!r}; "
                                f"name one explicitly (NAME=SPEC)")
        players = [player if player.roster is not None else replace(player, roster=index)
                   for index, player in enumerate(players)]
        for player in players:
            check_roster(player.roster, f"the roster position of {player.name} (its place among the players "
                                        f"unless set with @N or `roster`)")
        return players


def check_own_rosters(rosters: dict[str, int], remedy: str) -> None:
    """A field's players (name -> roster position) each on a position of their own: two on one
    would make their cells replay each other's seeds (one cell of two players may share one).
    `remedy` says how a user gives one another (the config's `roster`, a spec's @N)."""
    holder: dict[int, str] = {}
    for name, position in rosters.items():
        if position in holder:
            raise UserError(f"players {holder[position]} and {name} share roster position {position}, so "
                            f"their cells would replay the same seeds; give one of them another {remedy}")
        holder[position] = name


def check_roster(value, what: str) -> None:
    """Roster positions are 0..15 (rules.md §8 combines two as a*16 + b)."""
    if value is not None and (not is_int(value) or not 0 <= value < ROSTER_POSITIONS):
        raise UserError(f"{what} must be a roster position 0..{ROSTER_POSITIONS - 1} (the seed formula "
                        f"combines two as a*16 + b), got {value!r}")
