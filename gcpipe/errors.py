"""Errors a user can cause; the CLI prints them as one line and exits non-zero."""


class UserError(Exception):
    """Bad input from the user: a config, a spec, a file, a move. Shown without a traceback."""
