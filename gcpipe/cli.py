"""The `gcpipe` command line: each subcommand parses its arguments and calls one library function."""
import typer

from gcpipe import __version__

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)


def _version(value: bool):
    if value:
        typer.echo(f"gcpipe {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")):
    """Guerrilla Checkers research pipeline."""
