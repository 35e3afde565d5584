"""The structural rules of every setting a user writes: config/schema.yaml (JSON Schema) and the
settings schemas of the player kinds (gcpipe.players), checked by one validator that fills in
the defaults and reports the first problem as one line naming the key, e.g.
    players.mcts.iterations: -5 is less than the minimum of 1
Code elsewhere keeps only rules that span several settings.
"""
from __future__ import annotations

import copy
import functools
import math
import re
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import best_match

import gcpipe
from gcpipe.errors import UserError

SCHEMA_PATH = Path(gcpipe.__file__).resolve().parents[1] / "config" / "schema.yaml"


@functools.cache
def _schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))


def load_schema() -> dict:
    """config/schema.yaml as a fresh mapping (callers may change their copy)."""
    return copy.deepcopy(_schema())


# Names end up in file names (G__C.jsonl) and Snakemake wildcards, so "__" and path characters are out.
NAME_PATTERN = _schema()["$defs"]["name"]["pattern"]
# rules.md §8 combines two roster positions as a*16 + b: positions 0..15, or two pairs would share seeds.
ROSTER_POSITIONS = _schema()["$defs"]["roster"]["maximum"] + 1
assert ROSTER_POSITIONS == 16
# An Elo anchor's value (--anchor, elo.anchor) at most this far from 0: beyond, float ratings lose their
# decimals (and 1e308 overflows).
ANCHOR_LIMIT = 1e6


def _wants_integer(subschema) -> bool:
    # Every "#/$defs/NAME" is schema.yaml's; the `player` and `run` definitions config.py puts in
    # their place are mappings either way, never integers.
    while isinstance(subschema, dict) and "$ref" in subschema:
        subschema = _schema()["$defs"].get(subschema["$ref"].rsplit("/", 1)[1])
    return isinstance(subschema, dict) and subschema.get("type") == "integer"


def _integers_as_int(mapping: dict, subschemas) -> None:
    """Over (key, subschema) pairs of `mapping`: an integer setting written as 1.0e+3 (which JSON
    Schema takes as an integer) becomes the int 1000, so code and files downstream see one type."""
    for key, subschema in subschemas:
        value = mapping.get(key)
        if isinstance(value, float) and value.is_integer() and _wants_integer(subschema):
            mapping[key] = int(value)


def _extend_with_defaults(validator_class):
    """A validator that fills in each property's `default` before validating it (the recipe
    snakemake's `validate` uses), copying the default so filled configs never share objects
    with the schema or with each other; and that turns integral floats of integer settings into
    ints."""
    validate_properties = validator_class.VALIDATORS["properties"]
    validate_additional = validator_class.VALIDATORS["additionalProperties"]

    def properties_with_defaults(validator, properties, instance, schema):
        if validator.is_type(instance, "object"):
            for name, subschema in properties.items():
                if "default" in subschema and name not in instance:
                    instance[name] = copy.deepcopy(subschema["default"])
            _integers_as_int(instance, properties.items())
        yield from validate_properties(validator, properties, instance, schema)

    def additional_properties_as_int(validator, additional, instance, schema):
        if validator.is_type(instance, "object") and isinstance(additional, dict):
            named, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
            extra = [key for key in instance
                     if key not in named and not any(re.search(pattern, key) for pattern in patterns)]
            _integers_as_int(instance, ((key, additional) for key in extra))
        yield from validate_additional(validator, additional, instance, schema)

    return validators.extend(validator_class, {"properties": properties_with_defaults,
                                               "additionalProperties": additional_properties_as_int})


def _finite_number(checker, instance) -> bool:
    """JSON Schema's "number", without NaN and the infinities (YAML's .nan, .inf), which slip
    through every minimum and maximum."""
    return Draft202012Validator.TYPE_CHECKER.is_type(instance, "number") and math.isfinite(instance)


_DefaultingValidator = validators.extend(
    _extend_with_defaults(Draft202012Validator),
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("number", _finite_number))

_TYPE_WORDS = {"object": "a mapping", "array": "a list", "string": "a string",
               "integer": "an integer", "number": "a finite number", "boolean": "true or false"}
_NUMBER_TEXT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def key_path(parts) -> str:
    """players.m.iterations, matches.field[1]: where a value sits in a config."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def shown(value) -> str:
    """repr(value), cut: an error line must stay a line (an alias bomb's value is 200 MB)."""
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + f"... ({len(text):,} characters)"


def _describe(error) -> str:
    """One line for a schema violation: where it is, and what is wrong in the user's words."""
    where = key_path(error.absolute_path)
    instance, schema = error.instance, error.schema
    if error.validator == "additionalProperties":
        allowed = list(schema.get("properties", {}))
        unknown = [key for key in instance if key not in allowed]
        what = (f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}"
                + (f" (allowed: {', '.join(allowed)})" if allowed else ""))
    elif error.validator == "required":
        what = f"missing key {error.message.split(' is a required')[0]}"
    elif error.validator == "oneOf" and all(set(branch) == {"required"} for branch in error.validator_value):
        properties = schema.get("properties", {})
        keys = [key for branch in error.validator_value for key in branch["required"]]
        what = "needs exactly one of " + " or ".join(
            f"'{key}'" + (f" ({properties[key]['description']})" if "description" in properties.get(key, {}) else "")
            for key in keys)
    elif error.validator == "oneOf" and not isinstance(instance, dict):
        # A value that fits no form (e.g. a kind or a mapping of kinds): list the forms.
        what = f"{shown(instance)} is not " + " nor ".join(_form(branch) for branch in error.validator_value)
    elif error.validator == "enum":
        what = f"{shown(instance)} is not one of {', '.join(map(str, error.validator_value))}"
    elif error.validator == "type":
        expected = _TYPE_WORDS.get(error.validator_value, error.validator_value)
        what = f"must be {expected}, got {shown(instance)}"
        if isinstance(instance, str) and _NUMBER_TEXT.match(instance):
            what += (f" (YAML reads {instance} as text: write the number in full, or as 1.0e+6; Snakemake's "
                     f"--config reads a nested value as text: give it in a --configfile)")
    elif error.validator == "minProperties":
        what = "must not be empty"
    elif error.validator == "pattern":
        # A bad key (e.g. a player name) is checked by `propertyNames`; say it is a name.
        kind = "name " if "propertyNames" in error.absolute_schema_path else ""
        what = f"{kind}{shown(instance)} has the wrong form" + (f": {schema['description'].rstrip('.')}"
                                                          if "description" in schema else "")
    elif error.validator == "uniqueItems":
        what = f"lists an entry twice: {shown(instance)}"
    else:
        what = error.message
    return f"{where}: {what}" if where else what


def _form(branch: dict) -> str:
    """A oneOf branch in words: its enum or its mapping's keys (one "#/$defs/X" reference followed)."""
    if "$ref" in branch:
        branch = _schema()["$defs"][branch["$ref"].rsplit("/", 1)[1]]
    if "enum" in branch:
        return "one of " + ", ".join(map(str, branch["enum"]))
    if branch.get("type") == "object":
        return "a mapping with keys " + " and ".join(branch.get("properties", {}))
    return _TYPE_WORDS.get(branch.get("type"), str(branch))


def check(instance, schema: dict, where: str = "") -> object:
    """Validate `instance` in place against `schema` (its "#/$defs/..." references resolve in
    config/schema.yaml unless `schema` brings its own $defs), filling in defaults; returns it.
    A violation is a UserError "WHERE: key.path: what is wrong" (WHERE and the path when given)."""
    if "$defs" not in schema:
        schema = {**schema, "$defs": _schema()["$defs"]}
    error = best_match(_DefaultingValidator(schema).iter_errors(instance))
    if error is not None:
        text = _describe(error)
        raise UserError(f"{where}: {text}" if where else text)
    return instance


def numbers_as_float(values: dict, properties: dict) -> dict:
    """`values` (checked) with the number settings of the schema's `properties` as floats: JSON Schema
    takes 1 as a number, and Python code and the records written from the settings want one type per
    setting.  (Integer settings are ints already: `check` turns an integral 1.0e6 into one.)"""
    return {key: float(value) if properties.get(key, {}).get("type") == "number" else value
            for key, value in values.items()}
