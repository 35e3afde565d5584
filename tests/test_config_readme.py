"""config/README.md, the reference of every config key, is what `python -m gcpipe.schema_doc` writes from
config/schema.yaml and the player kinds' settings (so the two cannot drift), and it documents every
key the shipped configs use, each with a meaning."""
import re
import subprocess
import sys

import pytest

from gcpipe import schema_doc
from gcpipe.config import load_config
from gcpipe.players import KINDS

REPO = schema_doc.SCHEMA_PATH.parents[1]
SHIPPED = sorted(path.name for path in (REPO / "config").glob("*.yaml") if path.name != "schema.yaml")


def _documented() -> dict[str, str]:
    """{key: meaning} of every table row of config/README.md."""
    rows = re.findall(r"^\| `([^`]+)` \| .* \| (.*) \|$", schema_doc.README_PATH.read_text(encoding="utf-8"), re.M)
    return dict(rows)


def test_the_shipped_configs_are_listed():
    assert sorted(name for name, _, _ in schema_doc.SHIPPED) == SHIPPED
    for name, _, command in schema_doc.SHIPPED:
        assert command.startswith("snakemake ") and (name == "config.yaml" or f"config/{name}" in command)


def test_config_readme_is_what_the_schema_gives():
    assert schema_doc.README_PATH.read_text(encoding="utf-8") == schema_doc.render(), (
        "config/README.md is not what config/schema.yaml gives: run `python -m gcpipe.schema_doc`")


def test_the_check_command_fails_on_drift(tmp_path, monkeypatch):
    stale = tmp_path / "README.md"
    stale.write_text(schema_doc.render().replace("Games per cell.", "Games per match."), encoding="utf-8")
    monkeypatch.setattr(schema_doc, "README_PATH", stale)
    assert schema_doc.main(["--check"]) == 1
    stale.write_text(schema_doc.render(), encoding="utf-8")
    assert schema_doc.main(["--check"]) == 0


def test_the_module_runs_as_documented():
    result = subprocess.run([sys.executable, "-m", "gcpipe.schema_doc", "--check"], capture_output=True, text=True,
                            cwd=REPO)
    assert (result.returncode, result.stderr) == (0, "")


def test_every_row_says_what_its_key_means():
    documented = _documented()
    assert len(documented) > 60
    assert [key for key, meaning in documented.items() if not meaning.strip()] == []


@pytest.mark.parametrize("name", SHIPPED)
def test_every_key_of_the_shipped_configs_is_documented(name):
    config = load_config(REPO / "config" / name)
    documented = _documented()
    used = set()
    for section, value in config.items():
        if section in ("players", "runs"):
            for entry in value.values():
                used.update(key for key in entry)
        elif isinstance(value, dict):
            used.update(f"{section}.{key}" for key in value)
        else:
            used.add(section)
    assert sorted(used - set(documented)) == []


def test_every_setting_of_every_player_kind_has_a_row():
    text = schema_doc.README_PATH.read_text(encoding="utf-8")
    for kind, cls in KINDS.items():
        section = text.split(f"### `kind: {kind}`")[1].split("\n## ")[0].split("\n### ")[0]
        assert sorted(re.findall(r"^\| `([^`]+)` \|", section, re.M)) == sorted(cls.schema["properties"]), kind


def test_defaults_are_the_ones_the_checks_fill_in():
    """Spot checks against the filled-in config: a run's defaults and a search player's."""
    rows = {key: line for key, line in re.findall(r"^\| `([^`]+)` (\|.*)$",
                                                  schema_doc.README_PATH.read_text(encoding="utf-8"), re.M)}
    assert "| integer | 1 – 65,536 | `64` |" in rows["horizon"]
    assert "| number | ≥ 0 | `0.7` |" in rows["exploration"]
    assert "`[0.5, -0.5, 0.0, 0.0]`" in rows["value_coef"]
    assert "| integer | 1 – 100,000,000 | `1000` |" in rows["matches.games"]
