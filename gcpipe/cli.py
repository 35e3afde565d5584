"""The `gcpipe` command line: each subcommand parses its arguments and calls one library function."""
from pathlib import Path

import typer
from typer.core import TyperGroup

from gcpipe import __version__
from gcpipe.errors import UserError


class _UserErrorsAsOneLine(TyperGroup):
    """Turns a UserError raised by any subcommand into one line on stderr and exit code 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UserError as error:
            typer.echo(f"gcpipe: error: {error}", err=True)
            raise typer.Exit(2) from None


app = typer.Typer(cls=_UserErrorsAsOneLine, no_args_is_help=True, add_completion=False, help=__doc__)


def _version(value: bool):
    if value:
        typer.echo(f"gcpipe {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")):
    """Guerrilla Checkers research pipeline."""


@app.command()
def build(native: bool = typer.Option(False, "--native", help="Add -march=native (measure: it can be slower)."),
          record: Path = typer.Option(Path("results/engine/build.json"), help="Where to write the build record.")):
    """Recompile the C engine in place and write the build record (compiler, flags, source hash)."""
    from gcpipe.engine.build import rebuild

    info = rebuild(native=native, record=record)
    typer.echo(f"engine built with {info['compiler']} {' '.join(info['cflags'])}; record: {record}")


@app.command()
def elo(ledgers: list[str] = typer.Argument(None, metavar="LEDGER...",
                                            help="Match ledgers (G__C.jsonl), one or more per cell."),
        out: str = typer.Option(..., "--out", help="Folder for ratings/crosstable .csv/.json/.md/.png."),
        anchor: str = typer.Option("mean:1500", "--anchor",
                                   help="'mean:VALUE' or 'PLAYER/SIDE:VALUE', e.g. 'greedy/guerrilla:1000'."),
        order: str = typer.Option(None, "--order", help="Player order for tables, comma-separated."),
        crosstable: str = typer.Option(None, "--crosstable",
                                       help="Fit a cross table file (.json or Markdown) instead of ledgers.")):
    """Fit side-specific Bradley–Terry Elo ratings and write tables and plots."""
    from gcpipe.elo import elo_table, ratings_table_markdown

    ratings = elo_table(ledgers or (), out_dir=out, anchor=anchor,
                        order=order.split(",") if order else None, crosstable=crosstable)
    typer.echo(ratings_table_markdown(ratings), nl=False)
