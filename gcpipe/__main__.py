"""`gcpipe` and `python -m gcpipe`: the command line.

Ctrl-C during start-up: SIGINT is blocked from main's first line until the command's own
handling is in place (the CLI group's invoke unblocks it, gcpipe/cli.py), so an interrupt while
typer, numpy and the engine load, or while typer builds the command and parses its arguments,
stays pending and then is the one line `gcpipe: interrupted` and status 130, as later ones are.
An interrupt pending when the command ends without reaching it (`--help`, a usage error) is the
same line and status.  Only Python's own start-up, before main runs (the interpreter, this module
and gcpipe.errors, a few milliseconds), is out of reach."""
import os
import signal
import sys

from gcpipe.errors import os_error_line, print_interrupted, print_stderr


def _open_closed_standard_streams() -> None:
    """A standard stream closed by the caller (`2>&-`) opened on /dev/null before anything else
    opens a file: else the first file opened takes its descriptor (C libraries' messages on fd 2
    would land in a ledger), and Python's sys.stderr of None sent the error lines to stdout."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)   # (inheritable: the compiler, git and the workers get it too)
                os.close(null)
            else:
                os.set_inheritable(fd, True)
            setattr(sys, name, open(fd, mode, closefd=False))


def _refusal() -> str | None:
    """Why the command cannot start, said before any work: a working directory that is gone (torch
    then fails to load, in a message of its own), or an argument that is not UTF-8 text (its name
    would reach a JSON or CSV file, all UTF-8, only after the games were played)."""
    try:
        os.getcwd()
    except OSError as error:
        return f"the working directory cannot be read ({error.strerror}); cd into an existing folder"
    for argument in sys.argv[1:]:
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(argument).decode("utf-8", "backslashreplace")   # the bytes: \xff
            locale = "" if sys.getfilesystemencoding() == "utf-8" else ", or run under a UTF-8 locale"
            return (f"argument '{shown}' is not UTF-8 text, which names and paths must be (gcpipe's files "
                    f"are UTF-8); rename it{locale}")
    return None


def main() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})   # (module doc; unblocked in cli.py)
    _open_closed_standard_streams()
    refusal = _refusal()
    if refusal:
        print_stderr(f"gcpipe: error: {refusal}")
        sys.exit(2)
    try:
        from gcpipe.cli import app
        from gcpipe.io import STDOUT, NamedStream
    except KeyboardInterrupt:   # (SIGINT unblocked by the caller's mask, e.g. in a test harness)
        print_interrupted()
        sys.exit(130)
    sys.stdout = NamedStream(sys.stdout, STDOUT)
    try:
        app()
    except OSError as error:   # raised outside a command, which has its own handling: `--help > /dev/full`
        print_stderr(os_error_line(error))
        sys.exit(2)
    except KeyboardInterrupt:  # outside the command's handling, where SIGINT was not blocked
        print_interrupted()
        sys.exit(130)
    finally:
        # The command is over, its outputs written or its error said.  Python's teardown (torch's
        # included, ~0.2 s) restores the default SIGINT action, so a Ctrl-C then killed the process
        # with no word and status -2; ignored, it leaves the command's own status.
        pending = signal.SIGINT in signal.sigpending()   # (before SIG_IGN, which discards it)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        if pending:   # it came before the command could take it (`--help`, a usage error)
            print_interrupted()
            sys.exit(130)


if __name__ == "__main__":
    main()
