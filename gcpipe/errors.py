"""Errors the user can fix (bad input, missing files); the CLI prints them as one line."""


class UserError(Exception):
    """A problem with the user's input, reported as one line on stderr and exit code 2 by the CLI."""
