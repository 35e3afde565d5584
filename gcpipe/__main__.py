"""`gcpipe` and `python -m gcpipe`: the command line, imported inside the Ctrl-C handling, so an
interrupt while typer, numpy and the engine load (~0.1 s) is one line as later ones are."""
import sys

from gcpipe.errors import print_interrupted


def main() -> None:
    try:
        from gcpipe.cli import app
    except KeyboardInterrupt:
        print_interrupted()
        sys.exit(130)
    app()


if __name__ == "__main__":
    main()
