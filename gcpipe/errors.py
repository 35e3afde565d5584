"""Errors a user can cause; the CLI prints them as one line and exits non-zero."""
import math
import numbers
import os
import sys


class UserError(Exception):
    """Bad input from the user: a config, a spec, a file, a move. Shown without a traceback."""


class MissingExtraError(UserError, ImportError):
    """An optional dependency, installed with one of gcpipe's pip extras, is missing."""

    def __init__(self, package: str, extra: str):
        super().__init__(f"{package} is not installed; it comes with gcpipe's '{extra}' extra: "
                         f"pip install 'gcpipe[{extra}]' (in a checkout: pip install -e '.[{extra}]')")


def is_int(value) -> bool:
    """An integer, Python's or numpy's, and not a bool (True is an int to Python, not to a user)."""
    return type(value) is int or (isinstance(value, numbers.Integral) and not isinstance(value, bool))


def check_int(flag: str, value, low: int, high: int | None = None) -> int:
    """`value` when it is an integer in low..high (high None: no upper bound), else a UserError
    naming `flag`: "--games must be an integer in 1..1000000, got 0"."""
    if is_int(value) and low <= value and (high is None or value <= high):
        return int(value)
    bounds = f">= {low}" if high is None else f"in {low}..{high}"
    raise UserError(f"{flag} must be an integer {bounds}, got {value!r}")


def is_finite_number(value) -> bool:
    """A finite real number, Python's or numpy's, and not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def print_interrupted() -> None:
    """The one line a Ctrl-C leaves on stderr (on a terminal after the ^C echo or a progress bar)."""
    start = "\n" if sys.stderr.isatty() else ""
    print_stderr(f"{start}gcpipe: interrupted")


def print_stderr(line: str) -> None:
    """`line` on stderr.  Where stderr cannot take it (a full disk under a job's log file), the line
    is dropped: it is a message, not a result, and an error's exit status still says it (the failed
    print of an error gave a traceback, itself unprintable, and status 1)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        sys.stderr = open(os.devnull, "w")   # the unwritten line stays in the old stream's buffer


def os_error_line(error: OSError) -> str:
    """The one line of an OSError that reaches the command line: a path the user gave that cannot be
    read or written (a folder under a regular file, /proc, a read-only or full disk), named."""
    where = f"{error.filename}: " if error.filename else ""
    return f"gcpipe: error: {where}{error.strerror or error}"


def run_script(main, argv: list[str], name: str) -> int:
    """`main(argv)` of a script outside the CLI (benchmarks/), a UserError shown as the gcpipe
    commands show theirs: one line `NAME: error: ...` on stderr and exit status 2."""
    try:
        return main(argv)
    except UserError as error:
        print_stderr(f"{name}: error: {error}")
        return 2
