"""`gcpipe build`: recompile the C engine in place and record how it was built and its behaviour
fingerprint (gcpipe/fingerprint.py, run in a child process after the build)."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

from gcpipe import paths
from gcpipe.errors import UserError
from gcpipe.io import atomic_write_text

REPO = Path(__file__).resolve().parents[2]
CSRC = REPO / "csrc"


def source_hash() -> str:
    """SHA-256 over the engine sources (names and bytes), so a build record names what it compiled."""
    digest = hashlib.sha256()
    for path in sorted(CSRC.glob("*.[ch]")) + [Path(__file__).with_name("_build.py")]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def compiler_version() -> str:
    cc = os.environ.get("CC", "cc")
    try:   # (CC may carry flags: "gcc -m64")
        out = subprocess.run([*shlex.split(cc), "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return f"{cc} (version unknown)"
    return out.splitlines()[0].strip()


_FAILURE = re.compile(r"error:|cannot find|undefined reference|Permission denied|No such file")
_SUMMARY = re.compile(r"^(collect2: error: ld returned|error: command )")


def _build_failure(output: str) -> str:
    """The line of a failed build's output that says why: the compiler's or linker's first error, or
    setuptools' (a folder it cannot write), not the summaries that only say a command failed."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    reasons = [line for line in lines if _FAILURE.search(line) and not _SUMMARY.match(line)]
    return (reasons + lines[-1:] + ["no output"])[0]


def built_fingerprint() -> str:
    """The behaviour fingerprint of the library just built (gcpipe/fingerprint.py), computed in a
    fresh process: this one may hold the library from before the build.  That process also
    caches it beside the library, so the commands that follow read it."""
    proc = subprocess.run([sys.executable, "-m", "gcpipe.fingerprint"], cwd=REPO, capture_output=True, text=True,
                          env={key: value for key, value in os.environ.items() if key != "GCPIPE_SIMD"})
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines() or ["no output"]
        raise UserError(f"the engine built, but its behaviour fingerprint could not be computed: {lines[-1]}")
    return proc.stdout.strip()


def rebuild(native: bool = False, record: Path | None = paths.ENGINE_BUILD) -> dict:
    """Compiles csrc/ into gcpipe/_engine in place (setuptools build_ext --inplace) with the
    flags of gcpipe/engine/_build.py, plus -march=native when asked; writes the build record."""
    if not (REPO / "setup.py").is_file():
        raise UserError(f"cannot rebuild: {REPO} is not a gcpipe source checkout (install with pip install -e .)")
    extra = ["-march=native"] if native else []
    env = dict(os.environ, GCPIPE_CFLAGS=shlex.join(extra))
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace", "--force"],
                          cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UserError(f"engine build failed: {_build_failure(proc.stderr + proc.stdout)}")
    from gcpipe.engine import _build

    info = {
        "compiler": compiler_version(),
        "cflags": _build.BASE_CFLAGS + extra,
        "native": native,
        "sources_sha256": source_hash(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "fingerprint": built_fingerprint(),
    }
    if record is not None:
        atomic_write_text(Path(record), json.dumps(info, indent=2) + "\n")
    return info
