"""Errors a user can cause; the CLI prints them as one line and exits non-zero."""
import numbers


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
