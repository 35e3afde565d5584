"""config/README.md, the reference of every pipeline config key, written from the schema every config is
checked against: config/schema.yaml with its `players` entries assembled from the player kinds and its
`runs` from the training settings (gcpipe.config.config_schema).  Each key's type, range and default
come from its JSON Schema and its meaning from the schema's `description`, so the page cannot say
other than the checks do; a test regenerates it and compares.

    python -m gcpipe.schema_doc           rewrite config/README.md
    python -m gcpipe.schema_doc --check   exit 1 if config/README.md differs from what the schema gives
"""
from __future__ import annotations

import dataclasses
import sys

import yaml

from gcpipe.io import atomic_write_text, markdown_table, read_text
from gcpipe.schema import NAME_PATTERN, SCHEMA_PATH

README_PATH = SCHEMA_PATH.parent / "README.md"

# The configs in config/: what each runs and the command that runs it.
SHIPPED = [
    ("config.yaml", "The default pipeline: six players (random, greedy, MCTS 2K, a legacy-style baseline, the "
                    "distilled candidate and a search player on its expert-iteration network), 36 cells, the "
                    "Elo table.", "snakemake --cores 8 elo_table"),
    ("smoke.yaml", "A tiny field that runs every stage and file format of the DAG in minutes; its numbers mean "
                   "nothing.", "snakemake --cores 2 all --configfile config/smoke.yaml"),
    ("reference.yaml", "The published field at full scale (MCTS 10K, 1000 games per cell), for a cluster.",
     "snakemake --profile profiles/slurm elo_table --configfile config/reference.yaml"),
    ("distill.yaml", "The distillation recipe at full budget, measured against MCTS 2K and greedy.",
     "snakemake --cores 2 elo_table --configfile config/distill.yaml"),
    ("strongest.yaml", "The strongest raw network measured: the default recipe with another Guerrilla teacher.",
     "snakemake --cores 2 elo_table --configfile config/strongest.yaml --set-threads train=1"),
]

_TYPES = {"integer": "integer", "number": "number", "boolean": "boolean", "string": "string"}


class _Schema:
    """Reads one assembled schema: its "#/$defs/NAME" references resolved."""

    def __init__(self, schema: dict):
        self.defs = schema["$defs"]

    def resolve(self, node: dict) -> dict:
        """`node` with a "$ref" replaced by its definition (the node's own keys win)."""
        while isinstance(node, dict) and "$ref" in node:
            target = self.defs[node["$ref"].rsplit("/", 1)[1]]
            node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
        return node

    def type_text(self, node: dict) -> str:
        node = self.resolve(node)
        if "oneOf" in node and all("required" not in branch or len(branch) > 1 for branch in node["oneOf"]):
            return " or ".join(self.type_text(branch) for branch in node["oneOf"])
        if "enum" in node:
            return "one of " + ", ".join(f"`{value}`" for value in node["enum"])
        if "const" in node:
            return f"`{node['const']}`"
        kind = node.get("type")
        if kind == "array":
            items = self.type_text(node.get("items", {}))
            return f"list of {items}s" if " " not in items else f"list ({items})"
        if kind == "object":
            if "properties" in node and node.get("additionalProperties") is False and "required" in node:
                return "mapping {" + ", ".join(f"{key}: {self.type_text(value)}"
                                               for key, value in node["properties"].items()) + "}"
            inner = node.get("additionalProperties")
            if isinstance(inner, dict) and inner.get("$ref", "").rsplit("/", 1)[-1] in ("player", "run"):
                return f"mapping of names to {inner['$ref'].rsplit('/', 1)[1]} entries (below)"
            if isinstance(inner, dict):
                return f"mapping of names to {self.type_text(inner)}"
            return "mapping"
        return _TYPES.get(kind, "any")

    def range_text(self, node: dict) -> str:
        node = self.resolve(node)
        if "oneOf" in node:
            ranges = {self.range_text(branch) for branch in node["oneOf"]} - {""}
            return " ".join(sorted(ranges)) if len(ranges) == 1 else ""
        if node.get("type") == "array":
            parts = []
            if "minItems" in node and node["minItems"] == node.get("maxItems"):
                parts.append(f"{node['minItems']} items")
            elif node.get("minItems"):
                parts.append(f"at least {node['minItems']} item{'s' if node['minItems'] > 1 else ''}")
            if node.get("uniqueItems"):
                parts.append("no repeats")
            inner = self.range_text(node.get("items", {}))
            return ", ".join(parts + ([f"each {inner}"] if inner else []))
        if node.get("type") == "object":
            if node.get("minProperties"):
                return "not empty"
            inner = node.get("additionalProperties")
            if isinstance(inner, dict) and self.range_text(inner):
                return f"each {self.range_text(inner)}"
            if "properties" in node and node.get("required"):
                inner = {self.range_text(value) for value in node["properties"].values()} - {""}
                return f"each {inner.pop()}" if len(inner) == 1 else ""
            return ""
        low = _number(node["minimum"]) if "minimum" in node else None
        high = _number(node["maximum"]) if "maximum" in node else None
        if "exclusiveMinimum" in node:
            return f"> {_number(node['exclusiveMinimum'])}" + (f", ≤ {high}" if high is not None else "")
        if low is not None and high is not None:
            return f"{low} – {high}"
        if low is not None:
            return f"≥ {low}"
        if high is not None:
            return f"≤ {high}"
        if "pattern" in node:
            return "a name (Players)" if node["pattern"] == NAME_PATTERN else "see meaning"
        return ""


def _number(value) -> str:
    """1000000 -> 1,000,000; 1e30 -> 1e+30; 0.5 -> 0.5."""
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e16):
        return f"{int(value):,}"
    return f"{value:g}"


def _value_text(value) -> str:
    """A default as YAML writes it in a config, in a code span."""
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10 ** 6).strip()
    text = text.removesuffix("\n...").strip()
    return f"`{text}`" if text != "''" else '`""`'


def _cell(text: str) -> str:
    """Text fit for one table cell: one line, no bare `|`."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _rows(reader: _Schema, properties: dict, prefix: str = "", defaults: dict | None = None) -> list[list[str]]:
    """(key, type, range, default, meaning) rows of `properties`; a mapping with `properties` of its own
    gives a row per inner key (engine.native, matches.games, ...)."""
    rows = []
    for key, node in properties.items():
        resolved = reader.resolve(node)
        name = f"{prefix}{key}"
        if resolved.get("type") == "object" and "properties" in resolved and "required" not in resolved:
            rows += _rows(reader, resolved["properties"], f"{name}.")
            continue
        if defaults is not None and key in defaults:
            default = _value_text(defaults[key])
        else:
            default = _value_text(node["default"]) if "default" in node else "—"
        rows.append([f"`{name}`", _cell(reader.type_text(node)), _cell(reader.range_text(node)) or "—", default,
                     _cell(resolved.get("description", node.get("description", "")))])
    return rows


_HEADER = ["Key", "Type", "Range", "Default", "Meaning"]


def _table(rows) -> str:
    return markdown_table(_HEADER, rows, right_from=len(_HEADER))


def render() -> str:
    """The text of config/README.md."""
    from gcpipe.config import config_schema
    from gcpipe.players import KINDS
    from gcpipe.search.settings import SearchSettings

    schema = config_schema()
    reader = _Schema(schema)
    top = schema["properties"]
    out = [
        "# Pipeline configuration",
        "",
        "<!-- Written by `python -m gcpipe.schema_doc` from config/schema.yaml and the player kinds' settings; "
        "edit those, not this file (a test compares them). -->",
        "",
        "A pipeline config is one YAML file: the players, the training runs, the match plan, the Elo fit and the "
        "report. The Snakefile and every `gcpipe` command that reads a config check it against one schema "
        "(`config/schema.yaml`, its player entries assembled from the player kinds), fill in the defaults below "
        "and refuse a bad value in one line that names the file and the key.",
        "",
        "## Configs that ship",
        "",
        markdown_table(["File", "What it runs", "Command"],
                       [[f"`config/{name}`", _cell(what), f"`{command}`"] for name, what, command in SHIPPED],
                       right_from=3).rstrip("\n"),
        "",
        "## Check a config",
        "",
        "```",
        "gcpipe config config/config.yaml",
        "```",
        "",
        "prints the config with every default filled in, or the first problem as one line, e.g. "
        "`config/config.yaml: players.mcts2k.iterations: -5 is less than the minimum of 1`. "
        "`--out FILE` writes the resolved config to a file.",
        "",
        "## Top-level keys",
        "",
        " ".join(_cell(schema["description"]).split()),
        "",
        _table(_rows(reader, top)).rstrip("\n"),
        "",
    ]
    player = schema["$defs"]["player"]
    out += [
        "## Players",
        "",
        "Each entry of `players` is `NAME: {kind: KIND, roster: N, ...settings}`. "
        + _cell(schema["$defs"]["name"]["description"]) + " Every kind takes:",
        "",
        _table(_rows(reader, {"kind": player["properties"]["kind"], "roster": {"$ref": "#/$defs/roster"}}))
        .rstrip("\n"),
        "",
    ]
    search_defaults = {field.name: field.default for field in dataclasses.fields(SearchSettings)}
    search_defaults["value_coef"] = list(search_defaults["value_coef"])
    for kind, cls in KINDS.items():
        properties = cls.schema["properties"]
        doc = " ".join((cls.__doc__ or "").split())
        out += [f"### `kind: {kind}`", ""]
        if doc:
            out += [doc, ""]
        if not properties:
            out += ["No settings.", ""]
            continue
        if any(set(branch) == {"required"} for branch in cls.schema.get("oneOf", [])):
            keys = [branch["required"][0] for branch in cls.schema["oneOf"]]
            out += ["Exactly one of " + " and ".join(f"`{key}`" for key in keys) + ".", ""]
        out += [_table(_rows(reader, properties, defaults=search_defaults if kind == "search" else None))
                .rstrip("\n"), ""]
    run = schema["$defs"]["run"]
    out += [
        "## Training runs",
        "",
        "Each entry of `runs` is `RUN: {...settings}`, trained into `results/runs/RUN/`. "
        + _cell(run["description"]) + " A run without `device` takes the top-level `device` where the config "
        "sets one.",
        "",
        _table(_rows(reader, run["properties"])).rstrip("\n"),
        "",
    ]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if argv == ["--check"]:
        same = README_PATH.exists() and read_text(README_PATH) == text
        if not same:
            print(f"gcpipe: error: {README_PATH} is not what config/schema.yaml gives; "
                  f"run `python -m gcpipe.schema_doc`", file=sys.stderr)
        return 0 if same else 1
    if argv:
        print("usage: python -m gcpipe.schema_doc [--check]", file=sys.stderr)
        return 2
    atomic_write_text(README_PATH, text)
    print(f"wrote {README_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
