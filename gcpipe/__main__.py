"""`gcpipe` and `python -m gcpipe`: the command line, imported inside the Ctrl-C handling, so an
interrupt while typer, numpy and the engine load (~0.1 s) is one line as later ones are."""
import signal
import sys

from gcpipe.errors import os_error_line, print_interrupted, print_stderr


def main() -> None:
    try:
        from gcpipe.cli import app
        from gcpipe.io import NamedStream
    except KeyboardInterrupt:
        print_interrupted()
        sys.exit(130)
    sys.stdout = NamedStream(sys.stdout, "standard output")
    try:
        app()
    except OSError as error:   # raised outside a command, which has its own handling: `--help > /dev/full`
        print_stderr(os_error_line(error))
        sys.exit(2)
    finally:
        # The command is over, its outputs written or its error said.  Python's teardown (torch's
        # included, ~0.2 s) restores the default SIGINT action, so a Ctrl-C then killed the process
        # with no word and status -2; ignored, it leaves the command's own status.
        signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    main()
