"""The player protocol: `RuntimePlayer`, the base class of every player kind (see gcpipe/players
for the protocol, the kinds and how to add one).  It sits right above the engine, so a kind can
live in the package whose machinery it plays with (gcpipe.search's SearchPlayer) and the
players package can still import it."""
from __future__ import annotations

import abc
import os

import numpy as np

from gcpipe import paths
from gcpipe.engine import GameBatch
from gcpipe.errors import UserError

# The settings of kinds that play a checkpoint file: the file, or the final.bin of a training run.
CHECKPOINT_SCHEMA = {
    "properties": {
        "run": {"$ref": "#/$defs/name", "description": "a training run"},
        "path": {"type": "string", "minLength": 1, "description": "a checkpoint file"},
        "sha256": {"type": "string", "pattern": "^[0-9a-fA-F]{64}$", "description": "64 hexadecimal digits"},
    },
    "oneOf": [{"required": ["path"]}, {"required": ["run"]}],
}


def checkpoint_path(settings: dict) -> str:
    """The checkpoint file of CHECKPOINT_SCHEMA settings (normalised, as the ledger records it)."""
    return os.path.normpath(str(paths.final_checkpoint(settings["run"]) if "run" in settings else settings["path"]))


class RuntimePlayer(abc.ABC):
    """One player kind.  Class attributes and class methods define players of the kind (read
    the settings of a config entry or short spec, check them, say what the ledger records);
    an instance, made by `build` in the process that plays, plays through the batched protocol."""

    kind: str = ""
    # JSON Schema of the settings beyond `kind` and `roster`: "properties" (with defaults; may
    # refer to config/schema.yaml's "#/$defs/...") and any keywords on the whole entry.
    schema: dict = {"properties": {}}
    # The settings a short spec gives in order, "KIND:A:B" (each optional).
    spec_fields: tuple[str, ...] = ()
    # Games per match-runner task: fewer for kinds whose games take long, so every finished game
    # reaches the ledger soon and workers stay evenly busy; more for cheap ones (less hand-over).
    task_games: int = 1000
    # Game pairs per step of a sequential comparison (gcpipe compare --sprt): a step costs two
    # runner calls (worker start-up, network loading: about a tenth of a second), so cheap kinds
    # take large steps and kinds whose games take seconds small ones.
    pairs_per_step: int = 1000

    # -- definition (class side) --------------------------------------------------------------
    @classmethod
    def spec_usage(cls) -> str:
        """How a short spec of this kind is written, e.g. mcts[:ITERATIONS[:EXPLORATION[:ROLLOUT]]]."""
        return cls.kind + "".join(f"[:{field.upper()}" for field in cls.spec_fields) + "]" * len(cls.spec_fields)

    @classmethod
    def spec_settings(cls, args: str | None) -> dict:
        """The settings written after "KIND:" in a short spec (None: nothing written), as typed
        values; defaults and ranges are the schema's business."""
        if args is None:
            return {}
        fields = args.split(":")
        if len(fields) > len(cls.spec_fields):
            raise UserError(f"{cls.kind} takes no settings" if not cls.spec_fields
                            else f"{cls.kind} takes at most {':'.join(f.upper() for f in cls.spec_fields)}")
        settings = {}
        for name, text in zip(cls.spec_fields, fields):
            if text:
                settings[name] = _typed(text, name, cls.schema["properties"][name])
        return settings

    @classmethod
    def define(cls, settings: dict) -> tuple[dict, dict]:
        """Checks `settings` (valid by the schema, its defaults filled in) against the world — files,
        hashes — and returns (the settings the runtime is built from, the identity the ledger
        records); UserError for anything wrong."""
        return settings, {"kind": cls.kind, **settings}

    @classmethod
    def default_name(cls, settings: dict) -> str:
        """The name of an unnamed short-spec player."""
        return cls.kind

    @classmethod
    def build(cls, settings: dict) -> "RuntimePlayer":
        """The runtime of a defined player, from the settings `define` returned (in the process
        that plays)."""
        return cls(settings)

    # -- the protocol (instance side) ---------------------------------------------------------
    def start(self, n_slots: int) -> None:
        """Per-slot state for `n_slots` concurrent games (slot i plays game i of the GameBatch)."""

    def new_games(self, slots: np.ndarray) -> None:
        """New games start in `slots`."""

    def observe(self, games: GameBatch, slots: np.ndarray) -> None:
        """In `slots` the other side is about to move (reads the positions; draws nothing)."""

    @abc.abstractmethod
    def choose(self, games: GameBatch, slots: np.ndarray) -> np.ndarray:
        """This player is to move in `slots`: one action per slot (int32), the positions unchanged."""


def _typed(text: str, name: str, schema: dict):
    """A short-spec field as the schema's type (the range is checked with the schema)."""
    kind = schema.get("type")
    try:
        return int(text) if kind == "integer" else float(text) if kind == "number" else text
    except ValueError:
        raise UserError(f"{name} must be {'a whole number' if kind == 'integer' else 'a number'}, "
                        f"got {text!r}") from None
