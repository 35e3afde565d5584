"""The engine's cffi declarations are read from csrc/*.h (gcpipe/engine/_build.py), not restated; its
compiler flags are its own."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gcpipe._engine import ffi, lib
from gcpipe.engine._build import cdef_of

HEADER = """/* a header */
#ifndef GC_X_H
#define GC_X_H
#include <stdint.h>
#define GC_CELLS 64               /* integer: Python reads it */
#define GC_MASK ((1ULL << GC_CELLS) - 1)
#define GC_FILE_H 0x8080ULL       /* (a name ending in _H with a value is no guard) */
#define GC_RATE 0.05f             // float: not for cffi
#define GC_SCALE 1e3
#define GC_TWICE(x) ((x) * 2)
enum { GC_A = -1, GC_B,
       GC_C = 7 /* seven */ };
typedef struct {
    uint8_t cells[GC_CELLS];  /* one
                                 per cell */
    double a, b;
} gc_x;
typedef struct gc_y gc_y;
static const int8_t GC_TABLE[2][2] = {{1, 2}, {3, 4}};
int gc_x_count(const gc_x *x,
               int first);
static inline int gc_twice(int v) {
    if (v) { return 2 * v; }
    return 0;
}
#endif
"""


def test_the_declarations_are_read_from_a_header_with_every_number_left_to_the_compiler():
    assert cdef_of(HEADER) == (
        "#define GC_CELLS ...\n"
        "#define GC_MASK ...\n"
        "#define GC_FILE_H ...\n"
        "enum { GC_A, GC_B, GC_C, ... };\n"
        "typedef struct { uint8_t cells[...]; double a, b; ...; } gc_x;\n"
        "typedef struct gc_y gc_y;\n"
        "int gc_x_count(const gc_x *x, int first);\n"
        "int gc_twice(int v);\n")


def test_the_engine_exposes_the_headers_values_and_layouts():
    # Values and sizes from the compiler, as csrc/*.h state them.
    assert (lib.GC_SQUARES_FILE_H, lib.GC_NET_SIMD_BEST, lib.GC_MCTS_BAD_CONFIG) == (0x8080808080808080, -1, -2)
    assert len(ffi.new("gc_env_log *").hist_n_bank) == lib.GC_LOG_BANKS == 8
    assert lib.gc_neighbours(1) == 0b10000010           # a static inline function, wrapped: points 1 and 7


def test_the_geometry_tables_are_their_generators_output():
    csrc = Path(__file__).resolve().parents[1] / "csrc"
    generated = subprocess.run([sys.executable, str(csrc / "gen_tables.py")], capture_output=True, text=True,
                               check=True).stdout
    assert generated == (csrc / "gc_tables.h").read_text()


def test_the_environment_s_compiler_flags_are_not_applied(tmp_path):
    # CFLAGS=-ffast-math built another engine (other games) under a build record that listed only
    # gcpipe's flags.  A compiler that logs its arguments and fails ends the build at its first call.
    repo = Path(__file__).resolve().parents[1]
    for part in ("csrc", "setup.py", "pyproject.toml", "gcpipe/engine/_build.py"):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (repo / part).is_dir() else shutil.copy)(repo / part, tmp_path / part)
    log = tmp_path / "cc.log"
    compiler = tmp_path / "cc"
    compiler.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit 1\n')
    compiler.chmod(0o755)
    env = dict(os.environ, CC=str(compiler), CFLAGS="-DFROM_CFLAGS", CPPFLAGS="-DFROM_CPPFLAGS",
               LDFLAGS="-DFROM_LDFLAGS")
    build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert build.returncode != 0
    arguments = log.read_text().split()
    assert "-ffp-contract=off" in arguments and "-O3" in arguments
    assert not [argument for argument in arguments if argument.startswith("-DFROM_")]


def test_a_failed_build_says_the_compiler_s_reason(tmp_path, monkeypatch):
    # The line was setuptools' last: "error: command '...' failed with exit code 1", whatever the cause.
    from gcpipe.engine.build import rebuild
    from gcpipe.errors import UserError

    compiler = tmp_path / "cc"
    compiler.write_text('#!/bin/sh\necho "csrc/gc_rules.c:1:1: error: a reason" >&2\nexit 1\n')
    compiler.chmod(0o755)
    monkeypatch.setenv("CC", str(compiler))
    with pytest.raises(UserError) as failed:        # it stops at the first file: the engine stays as it is
        rebuild(record=None)
    assert str(failed.value) == "engine build failed: csrc/gc_rules.c:1:1: error: a reason"


def test_the_reason_of_a_failed_build_is_its_first_error_not_a_summary():
    from gcpipe.engine.build import _build_failure

    command_failed = "error: command '/usr/bin/gcc' failed with exit code 1"
    assert _build_failure("gcc -c x\n/usr/bin/ld: cannot find -lfoo: No such file or directory\n"
                          f"collect2: error: ld returned 1 exit status\n{command_failed}\n") == (
        "/usr/bin/ld: cannot find -lfoo: No such file or directory")
    assert _build_failure(f"error: could not create 'build/t': Permission denied\n{command_failed}\n") == (
        "error: could not create 'build/t': Permission denied")
    assert _build_failure("odd\nlast words\n") == "last words"
    assert _build_failure("") == "no output"
