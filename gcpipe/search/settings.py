"""What a search does (csrc/gc_search.h), as one frozen value checked before any game starts.

Leaf values.  A net's value outputs become the Guerrilla's expected outcome in [-1, 1] by
`value_coef` (a, b, c, d) and `value_squash`: v = squash(a * value row + b * pass logit
+ c * [Guerrilla to move] + d).  gcpipe's files keep one value per side: the value row (decoder
row 256) is the Guerrilla's, the pass logit (row 255) the COIN's (model.md §6).  Named choices:
  outcome     files whose two rows estimate each side's +-1 outcome (expert-iteration training):
              v = clamp((row 256 - row 255) / 2)
  calibrated  coefficients measured on the file's own games (gcpipe.search.calibration), logistic
  rollout     no net value: greedy rollouts alone (rollout_weight 1; what a legacy file needs)
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from gcpipe._engine import ffi, lib
from gcpipe.errors import UserError
from gcpipe.schema import check, numbers_as_float

VARIANTS = {"puct": lib.GC_SEARCH_PUCT, "gumbel": lib.GC_SEARCH_GUMBEL}
SQUASHES = {"linear": lib.GC_VALUE_LINEAR, "logistic": lib.GC_VALUE_LOGISTIC}
VALUE_KINDS = ("outcome", "calibrated", "rollout")
OUTCOME_COEF = (0.5, -0.5, 0.0, 0.0)
MAX_SIMULATIONS = 1_000_000

# The structure of the settings (JSON Schema properties; the defaults are SearchSettings').  The
# `search` player kind's config entries and make_settings are both checked against it.
SETTINGS_SCHEMA = {
    "simulations": {"type": "integer", "minimum": 1, "maximum": MAX_SIMULATIONS,
                    "description": "Simulations per move."},
    "variant": {"enum": list(VARIANTS),
                "description": "puct (PUCT selection, AlphaZero's) or gumbel (Gumbel AlphaZero's Sequential Halving "
                               "at the root)."},
    "c_puct": {"type": "number", "minimum": 0, "description": "PUCT: the exploration constant."},
    "considered": {"type": "integer", "minimum": 1, "maximum": lib.GC_SEARCH_MAX_LEGAL,
                   "description": "Gumbel: root actions considered (Sequential Halving)."},
    "c_visit": {"type": "number", "minimum": 0,
                "description": "Gumbel: sigma(q) = (c_visit + max N) * c_scale * q (mctx's defaults)."},
    "c_scale": {"type": "number", "minimum": 0, "description": "Gumbel: the c_scale of sigma(q) (c_visit)."},
    "value": {"enum": list(VALUE_KINDS),
              "description": "The leaf value's choice of coefficients: outcome (files whose two value rows estimate "
                             "each side's +-1 outcome), calibrated (measured on the file's own games: gcpipe "
                             "calibrate) or rollout (greedy rollouts alone, what a legacy file needs)."},
    "value_squash": {"enum": list(SQUASHES),
                     "description": "The leaf value is v = squash(a * value row + b * pass logit + c * [Guerrilla to "
                                    "move] + d), squash linear (clamped to [-1, 1]) or logistic."},
    "value_coef": {"type": "array", "minItems": 4, "maxItems": 4,
                   "items": {"type": "number", "minimum": -1e30, "maximum": 1e30},
                   "description": "The leaf value's (a, b, c, d) (value_squash); default: those of `value`."},
    "rollouts": {"type": "integer", "minimum": 0, "maximum": 10_000, "description": "Greedy playouts per leaf."},
    "rollout_weight": {"type": "number", "minimum": 0, "maximum": 1,
                       "description": "lambda: leaf value = (1 - lambda) net value + lambda rollouts."},
    "temperature": {"type": "number", "minimum": 0,
                    "description": "PUCT's move: 0 the most visited, T > 0 drawn in proportion to N^(1/T)."},
}


@dataclass(frozen=True)
class SearchSettings:
    """The settings of a search; SETTINGS_SCHEMA's descriptions say what each means."""
    simulations: int = 200
    variant: str = "gumbel"
    c_puct: float = 1.5
    considered: int = 16
    c_visit: float = 50.0
    c_scale: float = 0.1
    value: str = "outcome"
    value_squash: str = "linear"
    value_coef: tuple[float, float, float, float] = OUTCOME_COEF
    rollouts: int = 0
    rollout_weight: float = 0.0
    temperature: float = 0.0

    def c_config(self):
        """The engine's gc_search_config (kept alive by the returned cdata)."""
        return ffi.new("gc_search_config *", {
            "variant": VARIANTS[self.variant], "simulations": self.simulations, "c_puct": self.c_puct,
            "considered": self.considered, "c_visit": self.c_visit, "c_scale": self.c_scale,
            "value_squash": SQUASHES[self.value_squash], "value_coef": list(self.value_coef),
            "rollouts": self.rollouts, "rollout_weight": self.rollout_weight, "temperature": self.temperature})

    def identity(self) -> dict:
        """What the ledger records about the search (every setting that changes play)."""
        return {"simulations": self.simulations, "variant": self.variant, "c_puct": self.c_puct,
                "considered": self.considered, "c_visit": self.c_visit, "c_scale": self.c_scale,
                "value": self.value, "value_squash": self.value_squash, "value_coef": list(self.value_coef),
                "rollouts": self.rollouts, "rollout_weight": self.rollout_weight, "temperature": self.temperature}


def make_settings(where: str = "search", **values) -> SearchSettings:
    """SearchSettings from keyword values (None = default), every problem a UserError naming `where`."""
    values = {k: v for k, v in values.items() if v is not None}
    given = dict(values)
    if isinstance(values.get("value_coef"), tuple):
        values["value_coef"] = list(values["value_coef"])
    check(values, {"type": "object", "properties": SETTINGS_SCHEMA, "additionalProperties": False}, where)
    values = numbers_as_float(values, SETTINGS_SCHEMA)
    if "value_coef" in values:
        values["value_coef"] = tuple(float(v) for v in values["value_coef"])
    settings = SearchSettings(**values)
    if settings.rollout_weight > 0 and settings.rollouts < 1:
        raise UserError(f"{where}: rollout_weight {settings.rollout_weight} needs rollouts >= 1")
    if settings.temperature > 0 and settings.variant != "puct":
        raise UserError(f"{where}: temperature applies to the puct variant (Gumbel's move is already drawn)")
    if settings.value == "rollout" and settings.rollouts < 1:
        raise UserError(f"{where}: value 'rollout' needs rollouts >= 1")
    fixed = _FIXED_BY_VALUE.get(settings.value, {})
    for key, setting in fixed.items():       # a named value kind sets these itself: a different one is a mistake
        if key in values and values[key] != setting:
            raise UserError(f"{where}: value '{settings.value}' sets {key} to {setting!r} itself, got {given[key]!r}"
                            + (" (give value 'calibrated' to choose the value mapping)" if key != "rollout_weight"
                               else ""))
    return replace(settings, **fixed)


# What the named value kinds of the module doc set.
_FIXED_BY_VALUE = {"outcome": {"value_squash": "linear", "value_coef": OUTCOME_COEF},
                   "rollout": {"rollout_weight": 1.0, "value_squash": "linear", "value_coef": (0.0, 0.0, 0.0, 0.0)}}
