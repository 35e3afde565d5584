"""results/provenance.json: what produced a set of results — the resolved config, the package
versions, the engine build record, the git commit of the code — and the SHA-256 of the files
it vouches for (checkpoints, tables), so a rerun can be checked byte for byte.

The record holds no timestamps or host names: the same inputs give the same bytes.
"""
from __future__ import annotations

import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import gcpipe
from gcpipe.config import read_config_file
from gcpipe.errors import UserError
from gcpipe.io import atomic_write_json, read_text, sha256_file

# The distributions whose versions can change results or how they are produced.
PACKAGES = ("gcpipe", "numpy", "torch", "scipy", "cffi", "matplotlib", "typer", "jsonschema",
            "PyYAML", "snakemake", "snakemake-executor-plugin-slurm")
REPO = Path(gcpipe.__file__).resolve().parents[1]


def package_versions() -> dict[str, str | None]:
    """Installed version of each of PACKAGES (None when one is not installed)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(repo: Path = REPO) -> dict | None:
    """The commit of the code and whether tracked files differ from it; None outside a git checkout."""
    def git(*args):
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"commit": commit, "dirty": bool(changed)}


def _read(path: Path, what: str, parse):
    try:
        return parse(read_text(path))
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist") from None
    except OSError as error:
        raise UserError(f"cannot read {what} {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise UserError(f"{what} {path} does not parse: {' '.join(str(error).split())}") from None


def provenance(config_path, build_record, artifacts=()) -> dict:
    """The provenance record of results made with the config at `config_path` (as the workflow
    resolved it) and the engine described by `build_record` (results/engine/build.json)."""
    config = read_config_file(config_path)     # as the pipeline reads it: a key given twice is refused
    if not isinstance(config, dict):
        raise UserError(f"config {config_path} is not a mapping of keys to values")
    engine = _read(Path(build_record), "engine build record", json.loads)
    files = {}
    for artifact in sorted(set(map(str, artifacts))):
        try:
            files[artifact] = sha256_file(artifact)
        except OSError as error:
            raise UserError(f"cannot hash {artifact}: {error.strerror or error}") from None
    return {
        "gcpipe": gcpipe.__version__,
        "git": git_state(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "engine": engine,
        "config": config,
        "artifacts_sha256": files,
    }


def write_provenance(out, config_path, build_record, artifacts=()) -> dict:
    record = provenance(config_path, build_record, artifacts)
    atomic_write_json(out, record)
    return record
