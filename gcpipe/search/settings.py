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

import math
from dataclasses import dataclass, replace

from gcpipe._engine import ffi, lib
from gcpipe.errors import UserError

VARIANTS = {"puct": lib.GC_SEARCH_PUCT, "gumbel": lib.GC_SEARCH_GUMBEL}
SQUASHES = {"linear": lib.GC_VALUE_LINEAR, "logistic": lib.GC_VALUE_LOGISTIC}
VALUE_KINDS = ("outcome", "calibrated", "rollout")
OUTCOME_COEF = (0.5, -0.5, 0.0, 0.0)
MAX_SIMULATIONS = 1_000_000
# The integer settings' ranges (also checked for expert iteration's search_* training settings).
INTEGER_RANGES = {"simulations": (1, MAX_SIMULATIONS), "considered": (1, lib.GC_SEARCH_MAX_LEGAL),
                  "rollouts": (0, 10_000)}


@dataclass(frozen=True)
class SearchSettings:
    simulations: int = 200
    variant: str = "gumbel"
    c_puct: float = 1.5            # PUCT exploration
    considered: int = 16           # Gumbel: root actions considered (Sequential Halving)
    c_visit: float = 50.0          # Gumbel: sigma(q) = (c_visit + max N) * c_scale * q  (mctx's defaults)
    c_scale: float = 0.1
    value: str = "outcome"         # outcome | calibrated | rollout (module docstring)
    value_squash: str = "linear"
    value_coef: tuple[float, float, float, float] = OUTCOME_COEF
    rollouts: int = 0              # greedy playouts per leaf
    rollout_weight: float = 0.0    # lambda: leaf value = (1 - lambda) net value + lambda rollouts
    temperature: float = 0.0       # PUCT's move: 0 the most visited, T > 0 drawn in proportion to N^(1/T)

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
    settings = SearchSettings(**{k: v for k, v in values.items() if v is not None})
    _check(settings, where)
    if settings.value == "rollout" and settings.rollouts < 1:
        raise UserError(f"{where}: value 'rollout' needs rollouts >= 1")
    fixed = _FIXED_BY_VALUE.get(settings.value, {})
    for key, setting in fixed.items():       # a named value kind sets these itself: a different one is a mistake
        given = values.get(key)
        if given is not None and (tuple(given) if key == "value_coef" else given) != setting:
            raise UserError(f"{where}: value '{settings.value}' sets {key} to {setting!r} itself, got {given!r}"
                            + (" (give value 'calibrated' to choose the value mapping)" if key != "rollout_weight"
                               else ""))
    return replace(settings, **fixed)


# What the named value kinds of the module doc set.
_FIXED_BY_VALUE = {"outcome": {"value_squash": "linear", "value_coef": OUTCOME_COEF},
                   "rollout": {"rollout_weight": 1.0, "value_squash": "linear", "value_coef": (0.0, 0.0, 0.0, 0.0)}}


def _check(s: SearchSettings, where: str) -> None:
    def integer(name, low, high):
        value = getattr(s, name)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise UserError(f"{where}: {name} must be an integer from {low} to {high}, got {value!r}")

    def number(name, low=0.0, high=math.inf):
        value = getattr(s, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not low <= value <= high:
            raise UserError(f"{where}: {name} must be a finite number from {low:g} to {high:g}, got {value!r}")

    for name, (low, high) in INTEGER_RANGES.items():
        integer(name, low, high)
    for name in ("c_puct", "c_visit", "c_scale"):
        number(name)
    number("rollout_weight", 0.0, 1.0)
    number("temperature")
    if s.temperature > 0 and s.variant != "puct":
        raise UserError(f"{where}: temperature applies to the puct variant (Gumbel's move is already drawn)")
    if s.variant not in VARIANTS:
        raise UserError(f"{where}: variant must be one of {', '.join(VARIANTS)}, got {s.variant!r}")
    if s.value not in VALUE_KINDS:
        raise UserError(f"{where}: value must be one of {', '.join(VALUE_KINDS)}, got {s.value!r}")
    if s.value_squash not in SQUASHES:
        raise UserError(f"{where}: value_squash must be one of {', '.join(SQUASHES)}, got {s.value_squash!r}")
    coef = s.value_coef
    if len(coef) != 4 or not all(isinstance(v, (int, float)) and math.isfinite(v) and abs(v) < 1e30 for v in coef):
        raise UserError(f"{where}: value_coef must be four finite numbers, got {coef!r}")
    if s.rollout_weight > 0 and s.rollouts < 1:
        raise UserError(f"{where}: rollout_weight {s.rollout_weight} needs rollouts >= 1")
