"""cffi (out-of-line API mode) build of the C engine in csrc/ into gcpipe._engine.

Used by setuptools at install (setup.py: cffi_modules) and by `gcpipe build`.  Extra compiler
flags come from GCPIPE_CFLAGS (e.g. "-march=native"), so builds are reproducible and recorded.
"""
import os
import platform
import re
import shlex
from pathlib import Path

from cffi import FFI

CSRC = Path(__file__).resolve().parents[2] / "csrc"
SOURCES = sorted(str(p) for p in CSRC.glob("*.c"))
# -ffp-contract=off: no fused multiply-add the source does not write (gc_net.c fixes every sum's
# rounding; -std=c11 implies it with GCC, Clang needs it said).
BASE_CFLAGS = ["-std=c11", "-O3", "-fno-strict-aliasing", "-ffp-contract=off"]
# The popcount instruction (every x86-64 CPU since 2008-09: x86-64-v2): without it each
# __builtin_popcountll is a library call, a sixth of an MCTS rollout's instructions.
if platform.machine().lower() in ("x86_64", "amd64"):
    BASE_CFLAGS.append("-mpopcnt")
EXTRA_CFLAGS = shlex.split(os.environ.get("GCPIPE_CFLAGS", ""))

# The headers whose declarations Python sees (gc_math.h for gc_expf and gc_logf; the rest of csrc/*.h
# are the C side's own).
HEADERS = ["gc_math.h", "gc_rules.h", "gc_bots.h", "gc_mcts.h", "gc_env.h", "gc_net.h", "gc_search.h", "gc_select.h",
           "gc_mingru.h", "gc_gemm.h", "gc_policy.h", "gc_bf16.h"]

_FLOAT = re.compile(r"[.]|\b\d+[eE]")                 # a float literal's point or exponent
_OBJECT_DEFINE = re.compile(r"#define\s+(\w+)\s+(.+)")


def cdef_of(header: str) -> str:
    """The declarations cffi takes from a C header's text, so that the headers stay the one source
    of Python's C API: comments and preprocessor lines dropped but integer #defines, which become
    `#define NAME ...`; enum values, array sizes and struct layouts left to the compiler ("...",
    so no number is restated); a static inline function as its prototype (cffi wraps it); static
    data dropped.  The headers hold no conditional compilation and no multi-line macros."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", header, flags=re.S)
    lines, code = [], []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            define = _OBJECT_DEFINE.match(line.strip())
            if define and not _FLOAT.search(define[2]):        # (an include guard has no value)
                lines.append(f"#define {define[1]} ...")
        else:
            code.append(line)
    for statement in _statements("\n".join(code)):
        if statement.startswith("static inline"):
            lines.append(statement[len("static inline"):statement.index("{")].strip() + ";")
        elif statement.startswith("static"):
            continue
        elif statement.startswith("enum"):
            body = statement[statement.index("{") + 1:statement.rindex("}")]
            names = [part.split("=")[0].strip() for part in body.split(",") if part.strip()]
            lines.append("enum { " + ", ".join(names + ["..."]) + " };")
        elif "{" in statement:                              # typedef struct { fields } name;
            head, body = statement.split("{", 1)
            body, tail = body.rsplit("}", 1)
            fields = [" ".join(f.split()) for f in re.sub(r"\[[^]]*\]", "[...]", body).split(";") if f.strip()]
            lines.append(head.strip() + " { " + " ".join(f + ";" for f in fields + ["..."]) + " }" + tail)
        else:
            lines.append(statement)
    return "\n".join(lines) + "\n"


def _statements(code: str) -> list[str]:
    """Top-level statements, whitespace collapsed: each ends at a ';' outside braces, or at the
    closing brace of a function body."""
    statements, depth, start = [], 0, 0
    for i, char in enumerate(code):
        end = None
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0 and ")" in code[start:i].split("{", 1)[0]:
                end = i + 1
        elif char == ";" and depth == 0:
            end = i + 1
        if end is not None:
            statements.append(" ".join(code[start:end].split()))
            start = end
    return [s for s in statements if s != ";"]


CDEF = "".join(cdef_of((CSRC / h).read_text(encoding="utf-8")) for h in HEADERS)   # (any locale)
ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "gcpipe._engine",
    "".join(f'#include "{h}"\n' for h in HEADERS),
    sources=SOURCES,
    include_dirs=[str(CSRC)],
    extra_compile_args=BASE_CFLAGS + EXTRA_CFLAGS,
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
