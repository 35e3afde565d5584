"""Engines built from edited copies of the sources, for the behaviour-fingerprint tests: the
installed tree is never edited or rebuilt.  A copy is a checkout's files (gcpipe/, csrc/,
config/, setup.py, pyproject.toml, the Snakefile and what it reads); `gcpipe build` builds it in
place (so its build record and fingerprint come from the real command), and a process runs it
with the copy first on PYTHONPATH (Snakemake: with the copy's Snakefile, since Snakemake puts
the Snakefile's folder first on its path).

The copies differ from the tree in csrc/gc_bots.c only, so a compiler wrapper keeps the
objects it made: a compile whose arguments (the copy's folder written alike) and source text it
has seen gives the same object again, and each copy after the first compiles one file."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GCPIPE = Path(sys.executable).with_name("gcpipe")
BOTS = "csrc/gc_bots.c"
# The greedy bot's tie-break: the same random draw picks another of the tied actions (about half
# of random-vs-greedy games change).
TIE_BREAK = (BOTS, "    return best[gc_rand_below(&s->rng, (uint32_t)count)];",
             "    return best[count - 1 - gc_rand_below(&s->rng, (uint32_t)count)];")
# No change of behaviour: a comment, and the declarators of one statement in another order (they
# are independent: each initialiser is complete before the next).
NEUTRAL = [(BOTS, "int gc_bot_greedy(gc_state *s) {",
            "/* The action that captures the most; ties broken by the game's generator. */\n"
            "int gc_bot_greedy(gc_state *s) {"),
           (BOTS, "    int n = gc_legal_actions(s, legal), count = 0, top = -1;",
            "    int count = 0, top = -1, n = gc_legal_actions(s, legal);")]

_CACHING_CC = r"""#!/bin/sh
# cc that keeps its objects (tests/engines.py): same arguments and source text, same object.
out=""; prev=""; compile=0; sources=""
for arg in "$@"; do
    [ "$prev" = "-o" ] && out="$arg"
    [ "$arg" = "-c" ] && compile=1
    case "$arg" in *.c) sources="$sources $arg";; esac
    prev="$arg"
done
[ $compile = 1 ] && [ -n "$out" ] || exec cc "$@"
root="$PWD"; relative="${PWD#/}"
key=$({ printf '%s\n' "$@" | sed -e "s#$root#ROOT#g" -e "s#$relative#ROOT#g"; cat "$root"/csrc/*.h $sources; } |
      sha256sum | cut -c1-40)
if [ -f "CACHE/$key.o" ]; then cp "CACHE/$key.o" "$out"; exit 0; fi
cc "$@" || exit $?
cp "$out" "CACHE/$key.$$" && mv "CACHE/$key.$$" "CACHE/$key.o"
"""


def environment(copy: Path | None = None, **extra) -> dict:
    """The environment of a process that runs the engine of `copy` (None: the installed one), not
    watching a pipeline launcher."""
    env = {key: value for key, value in os.environ.items() if key not in ("GCPIPE_LAUNCHER", "PYTHONPATH")}
    if copy is not None:
        env["PYTHONPATH"] = str(copy)
    env.update(extra)
    return env


def caching_compiler(folder: Path, cache: Path | None = None) -> Path:
    """The wrapper above, in `folder`, keeping its objects in `cache` (default `folder`/cache; wrappers
    may share one: an object is written beside its name and renamed to it)."""
    cache = folder / "cache" if cache is None else cache
    cache.mkdir(parents=True, exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "cc"
    wrapper.write_text(_CACHING_CC.replace("CACHE", str(cache)))
    wrapper.chmod(0o755)
    return wrapper


def copy_sources(folder: Path, edits) -> Path:
    """A checkout's files (the package, its sources, config/, the Snakefile and what it reads)
    copied into `folder` (no built library, no fingerprint cache), with each (file, old, new) edit
    applied; the old text must occur once."""
    folder.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "_engine.c", "_engine.fingerprint.json")
    for part in ("gcpipe", "csrc", "config", "report", "envs", "profiles"):
        shutil.copytree(REPO / part, folder / part, ignore=ignore)
    for part in ("setup.py", "pyproject.toml", "Snakefile"):
        shutil.copy(REPO / part, folder / part)
    for name, old, new in edits:
        text = (folder / name).read_text()
        assert text.count(old) == 1, (name, old)
        (folder / name).write_text(text.replace(old, new))
    return folder


def build(folder: Path, compiler: Path) -> dict:
    """`gcpipe build` of the copy in `folder` (its own engine, its own record); the record."""
    import json

    record = folder / "build.json"
    result = subprocess.run([sys.executable, "-m", "gcpipe", "build", "--record", str(record)], cwd=folder,
                            env=environment(folder, CC=str(compiler)), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    return json.loads(record.read_text())
