"""The docs site (mkdocs.yml over docs/) builds with `mkdocs build --strict`: a broken link or anchor, a
page the navigation names but docs/ lacks, or a page of docs/ the navigation leaves out fails the build.
Needs the `docs` extra (pip install -e '.[docs]'); skipped, saying so, without it.  Also the project's
LICENSE and CITATION.cff say what pyproject.toml says."""
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
HAS_MKDOCS = importlib.util.find_spec("mkdocs") is not None and importlib.util.find_spec("material") is not None


def _nav_pages(nav) -> list[str]:
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _mkdocs_config() -> dict:
    # mkdocs.yml is plain YAML (no !ENV or !!python tags), so the safe loader reads it.
    return yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))


def test_the_site_is_strict_over_docs():
    config = _mkdocs_config()
    assert config["docs_dir"] == "docs" and config["strict"] is True
    assert config["validation"]["nav"]["omitted_files"] == "warn"   # (--strict fails on a warning)
    assert config["validation"]["links"]["not_found"] == "warn"
    assert config["validation"]["links"]["anchors"] == "warn"
    pages = _nav_pages(config["nav"])
    assert len(pages) == len(set(pages))
    assert {"index.md", "configuration.md", "experiments.md", "spec/rules.md"} <= set(pages)


@pytest.mark.skipif(not HAS_MKDOCS, reason="mkdocs is not installed: pip install -e '.[docs]' to build the docs site")
def test_mkdocs_build_is_strict_clean(tmp_path):
    missing = [page for page in _nav_pages(_mkdocs_config()["nav"]) if not (REPO / "docs" / page).is_file()]
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, f"pages in the navigation but not in docs/: {missing}\n{result.stderr[-4000:]}"
    # The configuration page shows config/README.md, the settings reference, as the site's own page.
    page = (tmp_path / "site" / "configuration" / "index.html").read_text(encoding="utf-8")
    assert "total_timesteps" in page and "Configs that ship" in page


@pytest.mark.skipif(not HAS_MKDOCS, reason="mkdocs is not installed: pip install -e '.[docs]' to build the docs site")
def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The check can fail: the same site with one link to a page that does not exist."""
    docs = tmp_path / "docs"
    docs.mkdir()
    config = _mkdocs_config()
    for page in _nav_pages(config["nav"]):
        (docs / page).parent.mkdir(parents=True, exist_ok=True)
        (docs / page).write_text(f"# {page}\n", encoding="utf-8")
    (docs / "index.md").write_text("# Home\n\nSee [the rules](spec/no-such-page.md).\n", encoding="utf-8")
    config.update(docs_dir=str(docs), site_dir=str(tmp_path / "site"), hooks=[])
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 1 and "no-such-page.md" in result.stderr
    (docs / "index.md").write_text("# Home\n", encoding="utf-8")
    (docs / "stray.md").write_text("# Not in the navigation\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 1 and "stray.md" in result.stderr


def test_license_and_citation_agree_with_the_package():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    assert (citation["title"], citation["version"]) == (project["name"], project["version"])
    assert citation["license"] == "MIT" and citation["authors"] == [{"name": "The gcpipe authors"}]
    assert citation["message"] and citation["abstract"]
    license_text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License\n")
    assert re.search(r"^Copyright \(c\) \d{4} the gcpipe authors$", license_text, re.M)
