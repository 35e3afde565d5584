"""The `gcpipe` command line: each subcommand parses its arguments, calls one library function and
prints its result (the text formats of match results are here)."""
import errno
import signal
from pathlib import Path

import typer
from typer.core import TyperGroup

from gcpipe import __version__, paths
from gcpipe.errors import UserError, os_error_line, print_interrupted, print_stderr
from gcpipe.io import STDOUT
from gcpipe.torch_env import before_torch

before_torch()   # before any command imports torch

# The error the parser raises for any argument it refuses (a missing one, an unknown option, a bad
# value).  typer exports BadParameter, one kind of it, but not the class itself, which is click's
# (typer before 0.26, which installs click) or typer's own copy of click (0.26 on, which installs no
# click and whose errors a `click.UsageError` would not catch): found from the public name, either way.
UsageError = next(cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "UsageError")


class _UserErrorsAsOneLine(TyperGroup):
    """Turns a UserError raised by any subcommand into one line on stderr and exit code 2, and
    Ctrl-C into one line and exit code 130 (a stopped match or training resumes on a rerun).
    An OSError that reaches here is a path the user gave that cannot be read or written (a
    folder under a regular file, /proc, a read-only or full disk): one line too, as are running
    out of memory and an argument the parser refuses (a missing one, an unknown option, a number
    that is none)."""

    def invoke(self, ctx):
        try:
            # From here on an interrupt is this line; before, gcpipe/__main__.py held it pending.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            return super().invoke(ctx)
        except UserError as error:
            print_stderr(f"gcpipe: error: {error}")
            raise typer.Exit(2) from None
        except UsageError as error:
            command = error.ctx.command_path if error.ctx else "gcpipe"
            print_stderr(f"gcpipe: error: {' '.join(error.format_message().split())} (see {command} --help)")
            raise typer.Exit(2) from None
        except OSError as error:
            if error.errno == errno.EPIPE and error.filename == STDOUT:   # its reader is gone (`| head`):
                raise                                                        # typer exits quietly
            print_stderr(os_error_line(error))
            raise typer.Exit(2) from None
        except MemoryError as error:   # numpy names the allocation: "Unable to allocate 7.28 TiB for ..."
            print_stderr(f"gcpipe: error: out of memory{f' ({error})' if str(error) else ''}; ask for less")
            raise typer.Exit(2) from None
        except RuntimeError as error:   # torch's allocator says it in a RuntimeError of its own
            if "can't allocate memory" not in str(error):
                raise
            print_stderr(f"gcpipe: error: out of memory ({str(error).splitlines()[-1].strip()}); ask for less")
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            print_interrupted()
            raise typer.Exit(130) from None


app = typer.Typer(cls=_UserErrorsAsOneLine, no_args_is_help=True, add_completion=False, help=__doc__)


def _version(value: bool):
    if value:
        typer.echo(f"gcpipe {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")):
    """Guerrilla Checkers research pipeline."""
    import warnings

    from gcpipe.lifetime import watch_launcher

    warnings.formatwarning = lambda message, *_, **__: f"gcpipe: warning: {message}\n"
    watch_launcher()   # a pipeline job stops when the Snakemake process that started it is gone


@app.command()
def build(native: bool = typer.Option(False, "--native", help="Add -march=native (measure: it can be slower)."),
          record: Path = typer.Option(paths.ENGINE_BUILD, help="Where to write the build record.")):
    """Recompile the C engine in place and write the build record (compiler, flags, source hash)."""
    from gcpipe.engine.build import rebuild

    info = rebuild(native=native, record=record)
    typer.echo(f"engine built with {info['compiler']} {' '.join(info['cflags'])}; engine fingerprint "
               f"{info['fingerprint']}; record: {record}")


@app.command()
def fingerprint(fresh: bool = typer.Option(False, "--fresh", help="Compute it now rather than read the cache "
                                           "beside the library (which is keyed by the library's SHA-256).")):
    """Print the behaviour fingerprint of the installed engine: what ledgers and training runs record."""
    from gcpipe.fingerprint import compute, engine_fingerprint

    typer.echo(compute() if fresh else engine_fingerprint())


@app.command()
def elo(ledgers: list[str] = typer.Argument(None, metavar="LEDGER...",
                                            help="Match ledgers (G__C.jsonl), one or more per cell."),
        out: str = typer.Option(..., "--out", help="Folder for ratings/crosstable .csv/.json/.md/.png."),
        anchor: str = typer.Option("mean:1500", "--anchor",
                                   help="'mean:VALUE' or 'PLAYER/SIDE:VALUE', e.g. 'greedy/guerrilla:1000'."),
        order: str = typer.Option(None, "--order", help="Player order for tables, comma-separated."),
        crosstable: str = typer.Option(None, "--crosstable",
                                       help="Fit a cross table file (.json or Markdown) instead of ledgers."),
        ordo: bool = typer.Option(False, "--ordo",
                                  help="Also write ordo.*: one rating per player plus a fitted Guerrilla advantage."),
        config: Path = typer.Option(None, "--config", help="A pipeline config: each ledger must be of a cell of its "
                                    "match plan, played by its players at their roster positions, and hold exactly "
                                    "the planned games (the pipeline passes its own).")):
    """Fit side-specific Bradley–Terry Elo ratings and write tables and plots: ratings, cross table,
    rating differences with the likelihood of superiority, head-to-head cells."""
    from gcpipe.elo import elo_table, ratings_table_markdown

    plan = None
    if config is not None:
        from gcpipe.config import load_config
        from gcpipe.workflow import planned_cells

        plan = planned_cells(load_config(config))
    ratings = elo_table(ledgers or (), out_dir=out, anchor=anchor, order=order.split(",") if order else None,
                        crosstable=crosstable, ordo=ordo, plan=plan)
    typer.echo(ratings_table_markdown(ratings), nl=False)


# The kinds' spec_usage() (a test keeps them in step: importing the kinds here would load the engine
# for every command, `gcpipe build` included).
_PLAYER_HELP = ("A config player's name or a short spec: random, greedy, mcts[:ITERATIONS[:EXPLORATION[:ROLLOUT]]], "
                "net:PATH, search:PATH:SIMULATIONS, openspiel:mcts[:MAX_SIMULATIONS[:UCT_C[:N_ROLLOUTS]]]; "
                "NAME=SPEC names it, SPEC@N sets its roster position.")
_CONFIG_OPTION = typer.Option(None, "--config", help="Pipeline config whose `players:` can be named.")
_WORKERS_OPTION = typer.Option(None, "--workers", help="Worker processes (default: all cores). Results do not depend on it.")
_QUIET_OPTION = typer.Option(False, "--quiet", help="No progress output.")


@app.command()
def train(run: str = typer.Argument(..., help="The run's name under `runs:` in the config."),
          config: Path = typer.Option(..., "--config", help="Pipeline config (YAML) whose `runs:` holds RUN."),
          out: Path = typer.Option(None, "--out", help="Run folder (default results/runs/RUN)."),
          restart: bool = typer.Option(False, "--restart",
                                       help="Start over even if the run folder holds a saved state of the same "
                                            "settings (by default a rerun continues from it)."),
          threads: int = typer.Option(None, "--threads", help="torch threads (default: torch's choice); expert "
                                                               "iteration plays its games in as many processes."),
          init: Path = typer.Option(None, "--init", help="Start from this checkpoint (overrides the run's init_run).")):
    """Train RUN (PPO, distillation or expert iteration): checkpoints, metrics.csv, resume state and final.bin in
    the run folder."""
    from gcpipe.config import run_config
    from gcpipe.train.run import train as run_training

    folder = run_training(run, run_config(config, run), out, restart=restart, threads=threads, init=init)
    if folder is not None:   # None: a rank other than the learner, which writes nothing
        typer.echo(f"{run}: {folder / 'final.bin'}" if (folder / "final.bin").exists() else
                   f"{run}: stopped, state in {folder}")


@app.command()
def match(guerrilla: str = typer.Argument(..., metavar="G", help=_PLAYER_HELP),
          coin: str = typer.Argument(..., metavar="C", help="The COIN player, as G."),
          games: int = typer.Option(..., "--games", help="Number of games."),
          config: Path = _CONFIG_OPTION,
          first_game: int = typer.Option(0, "--first-game", help="Index of the first game (a shard starts later)."),
          out: str = typer.Option(None, "--out", help="Ledger file, *.jsonl (default results/matches/G__C.jsonl)."),
          workers: int = _WORKERS_OPTION,
          roster_g: int = typer.Option(None, "--roster-g", help="Roster position of G in the seed formula."),
          roster_c: int = typer.Option(None, "--roster-c", help="Roster position of C in the seed formula."),
          replace_others: bool = typer.Option(False, "--replace-others",
                                              help="Play afresh over a ledger of other players or roster positions "
                                                   "(the DAG's shards, superseded by a retrained network) instead of refusing it."),
          quiet: bool = _QUIET_OPTION):
    """Play games K..K+N-1 of G (Guerrilla) vs C (COIN) that the ledger lacks; resumable after a kill.

    Seeds follow rules.md §8 with roster positions: --roster-g/--roster-c, else the player's
    `roster`, else its index in the config's players, else its place on this command line."""
    from gcpipe.config import player_book
    from gcpipe.match import match as play_match

    result = play_match(guerrilla, coin, games, book=player_book(config), first_game=first_game, out=out,
                        workers=workers, roster_g=roster_g, roster_c=roster_c, progress=not quiet,
                        replace_others=replace_others)
    typer.echo(format_match(result))


@app.command()
def compare(candidate: str = typer.Argument(..., help=_PLAYER_HELP),
            baseline: str = typer.Argument(..., help="The baseline player, as CANDIDATE."),
            games: int = typer.Option(1000, "--games", help="Game pairs (games per cell)."),
            sprt: str = typer.Option(None, "--sprt", metavar="ELO0,ELO1",
                                     help="Stop as soon as the SPRT of H0: Elo=ELO0 against H1: Elo=ELO1 decides."),
            alpha: float = typer.Option(None, "--alpha", help="SPRT: chance of accepting H1 when H0 holds (default 0.05)."),
            beta: float = typer.Option(None, "--beta", help="SPRT: chance of accepting H0 when H1 holds (default 0.05)."),
            sprt_model: str = typer.Option(None, "--sprt-model",
                                           help="SPRT Elo: normalized (pentanomial nElo, fishtest's) or logistic "
                                                "(default normalized)."),
            max_games: int = typer.Option(None, "--max-games",
                                          help="SPRT: stop undecided after N games, both sides together "
                                               "(default 2 x --games)."),
            config: Path = _CONFIG_OPTION,
            out: Path = typer.Option(paths.COMPARE, "--out", help="Folder for the cell ledgers and the summary."),
            workers: int = _WORKERS_OPTION,
            quiet: bool = _QUIET_OPTION):
    """Candidate vs baseline in game pairs (game g once on each side), with 95% intervals.

    Without --sprt: --games pairs plus both self cells.  With --sprt: pairs until the sequential
    test decides ("H0 accepted" / "H1 accepted") or --max-games; resumable like every match."""
    from gcpipe.config import player_book
    from gcpipe.match.compare import compare as play_compare, sprt_test

    test = sprt_test(sprt, alpha, beta, sprt_model)
    typer.echo(format_compare(play_compare(candidate, baseline, games, book=player_book(config), out_dir=out,
                                           workers=workers, progress=not quiet, sprt=test, max_games=max_games)))


@app.command()
def tournament(players: list[str] = typer.Argument(..., metavar="PLAYER...", help=_PLAYER_HELP),
               games: int = typer.Option(100, "--games", help="Games per cell."),
               config: Path = _CONFIG_OPTION,
               out: Path = typer.Option(paths.MATCHES, "--out", help="Folder for the cell ledgers."),
               workers: int = _WORKERS_OPTION,
               quiet: bool = _QUIET_OPTION):
    """Every player as Guerrilla against every player as COIN; prints the "Gwins-Cwins" cross table
    (rows Guerrilla, columns COIN)."""
    from gcpipe.config import player_book
    from gcpipe.match import tournament as play_tournament

    typer.echo(format_crosstable(play_tournament(players, games, book=player_book(config), out_dir=out,
                                                 workers=workers, progress=not quiet)))


@app.command()
def merge(shards: list[str] = typer.Argument(..., metavar="SHARD...",
                                             help="Ledgers of game-index shards of one cell."),
          out: str = typer.Option(..., "--out", help="The merged ledger (G__C.jsonl); its summary goes beside it."),
          games: int = typer.Option(None, "--games", help="Games the cell must have: 0..N-1, none missing.")):
    """Merge the shard ledgers of one cell into one ledger sorted by game index, plus its summary."""
    from gcpipe.match.ledger import merge_shards, write_summary

    records = merge_shards(shards, out, games=games)
    write_summary(out)
    typer.echo(f"{out}: {len(records)} games from {len(shards)} shard(s)")


@app.command()
def view(ledger: Path = typer.Argument(..., metavar="LEDGER", help="A cell's ledger (G__C.jsonl)."),
         out: Path = typer.Option(..., "--out", help="Folder for the SVG files."),
         game: list[int] = typer.Option(None, "--game", help="Draw this game index (repeatable) instead of the "
                                                              "first Guerrilla win and the first COIN win."),
         html: bool = typer.Option(False, "--html", help="Also write a review page (.html) of each game."),
         analyst: str = typer.Option(None, "--analyst", help="The net or search player whose analysis the review "
                                                             "pages show (implies --html)."),
         config: Path = typer.Option(None, "--config", help="Pipeline config whose players can be named.")):
    """Replay games of a ledger and draw them as SVG, one board per ply: guerrilla_win.svg and
    coin_win.svg (or game-N.svg for each --game N); with --html or --analyst also a page per game
    (.html) to step through in a browser."""
    if html or analyst:
        from gcpipe.analysis.review import view_and_review
        from gcpipe.config import player_book

        files = view_and_review(ledger, out, games=game or None, analyst=analyst, book=player_book(config))
    else:
        from gcpipe.match.viewer import view_ledger

        files = view_ledger(ledger, out, games=game or None)
    for path in files:
        typer.echo(str(path))


@app.command()
def analyse(player: str = typer.Option(None, "--player", help="net:FILE.bin, search:FILE.bin:SIMS, or a net or "
                                                              "search player of --config."),
            moves: str = typer.Option(None, "--moves", help="Moves from the start, e.g. 'd4-d5 D3-E2' (the "
                                                            "notation of gcpipe play)."),
            seed: int = typer.Option(None, "--seed", help="The game's generator seed (default 1)."),
            ledger: Path = typer.Option(None, "--ledger", help="A ledger: analyse its game --game at --ply."),
            game: int = typer.Option(None, "--game", help="The game index in --ledger."),
            ply: int = typer.Option(None, "--ply", help="Plies from the start (default: after every move)."),
            top: int = typer.Option(None, "--top", help="List only the first N moves."),
            jsonl: bool = typer.Option(False, "--jsonl", help="Read queries from standard input, one JSON object "
                                                              "a line; answer each on one line."),
            config: Path = typer.Option(None, "--config", help="Pipeline config whose players can be named.")):
    """What a network or a search thinks of a position: legal moves with the net's probabilities,
    its value rows and, for a search, visits, Q-values, improved policy and principal variation (JSON)."""
    import sys

    from gcpipe.analysis.position import analyse as run
    from gcpipe.config import player_book

    run(player_book(config), player, jsonl, read_line=sys.stdin.buffer.readline, write=typer.echo,
        moves=moves, seed=seed, ledger=ledger, game=game, ply=ply, top=top)


@app.command("config")
def show_config(path: str = typer.Argument(..., metavar="CONFIG", help="A pipeline config (YAML)."),
                out: str = typer.Option(None, "--out", help="Write the resolved config here instead of stdout.")):
    """Validate a pipeline config and print it with every default filled in."""
    from gcpipe.config import config_text, load_config
    from gcpipe.io import atomic_write_text

    text = config_text(load_config(path))
    if out:
        atomic_write_text(out, text)
    else:
        typer.echo(text, nl=False)


@app.command()
def provenance(artifacts: list[str] = typer.Argument(None, metavar="FILE...",
                                                     help="Result files to record SHA-256 digests of."),
               config: str = typer.Option(..., "--config", help="The resolved config the results were made with."),
               build_record: str = typer.Option(str(paths.ENGINE_BUILD), "--build", help="The engine build record."),
               out: str = typer.Option(str(paths.PROVENANCE), "--out", help="Where to write the record.")):
    """Record config, package versions, engine build flags, git commit and result digests."""
    from gcpipe.provenance import write_provenance

    record = write_provenance(out, config, build_record, artifacts or ())
    commit = record["git"]["commit"][:12] if record["git"] else "no git checkout"
    typer.echo(f"{out}: {len(record['artifacts_sha256'])} file digest(s), commit {commit}")


@app.command()
def calibrate(checkpoint: Path = typer.Argument(..., metavar="CHECKPOINT", help="A 5c checkpoint (.bin)."),
              out: Path = typer.Option(..., "--out", help="The calibration file to write (JSON)."),
              games: int = typer.Option(3000, "--games", help="Self-play games (a fifth held out)."),
              seed: int = typer.Option(1, "--seed", help="Seed of the games.")):
    """Fit how CHECKPOINT's value outputs map to win probabilities on its own self-play games, for
    search players with `value: calibrated` (`calibration: FILE` in the config)."""
    from gcpipe.search.calibration import write_calibration

    record = write_calibration(checkpoint, out, games, seed)
    brier = record["brier_held_out"]
    typer.echo(f"{out}: P(Guerrilla wins) = sigmoid({', '.join(f'{w:.4g}' for w in record['value_coef'])} . "
               f"(value row, pass logit, Guerrilla to move, 1)); held-out Brier "
               + "; ".join(f"{side}: {b['calibrated']:.4f} (raw mapping {b['outcome_mapping']:.4f}, base rate "
                           f"{b['base_rate']:.4f})" for side, b in brier.items()))


@app.command()
def values(checkpoints: list[str] = typer.Argument(..., metavar="[NAME=]CHECKPOINT...", help="5c checkpoints to compare."),
           out: Path = typer.Option(..., "--out", help="Folder for values.json and reliability.png."),
           games: int = typer.Option(400, "--games", help="Search-guided self-play games per checkpoint."),
           simulations: int = typer.Option(32, "--simulations", help="Search simulations per move."),
           seed: int = typer.Option(1, "--seed", help="Seed of the games (held out from training's)."),
           calibration: list[str] = typer.Option(None, "--calibration", metavar="NAME=FILE",
                                                 help="Use a calibration file's values for NAME.")):
    """How well each checkpoint's values predict the outcomes of the games its own search plays:
    Brier scores per side to move and reliability diagrams."""
    from gcpipe.io import atomic_write_bytes, atomic_write_json, check_output_file
    from gcpipe.report import reliability_png
    from gcpipe.train.values import value_accuracy

    pairs = [_name_and_path(text) for text in checkpoints]
    named = dict(pairs)
    if len(named) < len(pairs):
        twice = next(name for name, _ in pairs if [n for n, _ in pairs].count(name) > 1)
        raise UserError(f"two checkpoints are named {twice!r}; name them apart (NAME=CHECKPOINT)")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder")
    calibrations = dict(_name_and_path(text) for text in calibration or ())
    unknown = sorted(set(calibrations) - set(named))
    if unknown:
        raise UserError(f"--calibration names {', '.join(unknown)}, which no checkpoint is called")
    for name in ("values.json", "reliability.png"):   # before the games
        check_output_file(out / name)
    reports = {name: value_accuracy(path, games, simulations, seed, calibrations.get(name)) for name, path in named.items()}
    atomic_write_json(out / "values.json", reports)
    atomic_write_bytes(out / "reliability.png", reliability_png(reports))
    for name, report in reports.items():
        typer.echo(f"{name}: Brier (net value / search value / base rate) " + "; ".join(
            f"{side}: {report[side]['brier_net_value']:.4f} / {report[side]['brier_search_value']:.4f} / "
            f"{report[side]['brier_base_rate']:.4f}" for side in ("guerrilla_to_move", "coin_to_move")))


def _name_and_path(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if sep and not name:
        raise UserError(f"{text!r}: the name before '=' is empty; give NAME=FILE or the file alone")
    return (name, path) if sep else (Path(text).stem, text)


@app.command("plot-training")
def plot_training_curves(metrics: str = typer.Argument(..., metavar="METRICS_CSV",
                                                       help="A run's metrics.csv."),
                         out: str = typer.Option(..., "--out", help="The PNG to write."),
                         title: str = typer.Option("", "--title", help="Figure title (e.g. the run name).")):
    """Plot training curves (win rate by side, losses, policy statistics, SPS) as a PNG."""
    from gcpipe.report import plot_training

    typer.echo(str(plot_training(metrics, out, title)))


bench_app = typer.Typer(no_args_is_help=True, help="Speed measurements (numbers to report, never asserted in tests).")
app.add_typer(bench_app, name="bench")


@bench_app.command("mcts")
def bench_mcts(iterations: int = typer.Option(2000, help="Iterations per search."),
               positions: int = typer.Option(8, help="Searches per (phase, rollout) pass."),
               repeats: int = typer.Option(3, help="Passes; the fastest counts.")):
    """MCTS iterations/s (one thread) at the opening and mid-game, random and greedy rollouts."""
    from gcpipe.engine.bench import bench_mcts as run

    for key, value in run(iterations=iterations, positions=positions, repeats=repeats).items():
        typer.echo(f"{key}: {value:,.0f}")


@bench_app.command("engine")
def bench_engine(random_actions: int = typer.Option(20_000_000, "--random-actions",
                                                    help="Actions of single-thread random play."),
                 envs: int = typer.Option(4096, "--envs", help="Environments in the self-play VecEnv."),
                 steps: int = typer.Option(300, "--steps", help="Timed VecEnv steps."),
                 seed: int = typer.Option(0, "--seed", help="Seed of the games and the random actions.")):
    """Rules speed (random play, legal enumeration included) and self-play VecEnv env steps/s."""
    from gcpipe.engine.bench import bench_engine as run

    for key, value in run(random_actions=random_actions, num_envs=envs, steps=steps, seed=seed).items():
        typer.echo(f"{key}: {value:,.0f}" if value >= 100 else f"{key}: {value:.3g}")


@bench_app.command("net")
def bench_net(games: int = typer.Option(4096, "--games", help="Concurrent games."),
              plies: int = typer.Option(300, "--plies", help="Timed plies (after 10 warm-up plies)."),
              workers: int = typer.Option(1, "--workers", help="Processes, one thread each (games are split)."),
              full_turn: bool = typer.Option(False, "--full-turn", help="Also step the waiting side's net (5c)."),
              checkpoint: Path = typer.Option(None, "--checkpoint", help="A .bin to run (default: a random net)."),
              seed: int = typer.Option(1, "--seed", help="Seed of the games and the random net."),
              simd: str = typer.Option("best", "--simd", help="Code path of the C step: best, avx512, avx2, scalar.")):
    """Batched network play: observe, H=128 L=2 C network step, C sampling and move, game-steps/s."""
    from gcpipe.nn.bench import bench_net as run

    result = run(games=games, plies=plies, workers=workers, full_turn=full_turn,
                 checkpoint=None if checkpoint is None else str(checkpoint), seed=seed, simd=simd)
    for key, value in result.items():
        typer.echo(f"{key}: {value:,.0f}" if isinstance(value, float) and value >= 100
                   else f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")


@bench_app.command("search")
def bench_search(simulations: int = typer.Option(64, "--simulations", help="Simulations per decision."),
                 variant: str = typer.Option("gumbel", "--variant", help="gumbel or puct."),
                 games: int = typer.Option(256, "--games", help="Concurrent games per worker."),
                 plies: int = typer.Option(10, "--plies", help="Plies played (one search per game each)."),
                 workers: str = typer.Option("1,2", "--workers", help="Worker counts to measure, comma-separated."),
                 checkpoint: Path = typer.Option(None, "--checkpoint", help="A .bin to search with (default: a random net).")):
    """Search speed in self-play: simulations/s and decisions/s at each worker count."""
    from gcpipe.search.bench import bench_search as run
    from gcpipe.search.settings import make_settings

    try:
        counts = [int(w) for w in workers.split(",")]
    except ValueError:
        raise UserError(f"--workers must be comma-separated integers, got {workers!r}") from None
    settings = make_settings(where="bench search", simulations=simulations, variant=variant)
    for row in run(settings, games, plies, counts, None if checkpoint is None else str(checkpoint)):
        typer.echo(f"workers {row['workers']}: {row['simulations_per_s']:,.0f} simulations/s, "
                   f"{row['decisions_per_s']:,.1f} decisions/s ({row['variant']}, {row['simulations']} simulations, "
                   f"{row['games_per_worker']} games per worker)")


@bench_app.command("train")
def bench_train(envs: int = typer.Option(2048, "--envs", help="Environments (x2 slots in self-play)."),
                horizon: int = typer.Option(64, "--horizon", help="Ticks per epoch (BPTT length)."),
                epochs: int = typer.Option(4, "--epochs", help="Timed epochs (after one warm-up epoch)."),
                threads: int = typer.Option(2, "--threads", help="torch threads."),
                selfplay: bool = typer.Option(True, "--selfplay/--bot", help="Self-play (2 slots) or bot mode."),
                train_slot_1: bool = typer.Option(False, "--train-slot-1", help="Also learn from slot 1."),
                device: str = typer.Option("cpu", "--device", help="cpu, cuda or auto (the run setting `device`)."),
                rollout_net: str = typer.Option(None, "--rollout-net", help="auto, torch or c (the run setting "
                                                "`rollout_net`; default auto, or --run's)."),
                update_precision: str = typer.Option(None, "--update-precision", help="float32 or bfloat16 (the "
                                                     "run setting `update_precision`; default float32, or --run's)."),
                run_name: str = typer.Option(None, "--run", help="Measure this PPO run of --config instead (its "
                                                                 "settings replace --envs ... --device)."),
                config: Path = typer.Option(None, "--config", help="Pipeline config holding --run.")):
    """PPO end to end: agent steps/s of whole epochs (rollout + update) and of each phase, the GFLOP/s
    of each phase, the training's matrix-product rate at the rollout's shapes and the steps/s it
    bounds (roofline)."""
    from gcpipe.config import run_config
    from gcpipe.train.bench import bench_train as run

    if (run_name is None) != (config is None):
        raise UserError("--run and --config go together")
    settings = run_config(config, run_name) if run_name is not None else None
    for key, value in run(num_envs=envs, horizon=horizon, epochs=epochs, threads=threads, selfplay=selfplay,
                          train_slot_1=train_slot_1, device=device, rollout_net=rollout_net,
                          update_precision=update_precision, run=settings).items():
        typer.echo(f"{key}: {value}" if isinstance(value, str) else
                   f"{key}: {value:,.0f}" if value >= 100 else f"{key}: {value:.3g}")


@bench_app.command("match")
def bench_match(games: int = typer.Option(1000, "--games", help="Games of the net-vs-net cell."),
                workers: int = typer.Option(2, "--workers", help="Worker processes."),
                mcts_games: int = typer.Option(8, "--mcts-games", help="Games of the MCTS-vs-greedy cell (0: skip)."),
                mcts_iterations: int = typer.Option(2000, "--mcts-iterations", help="MCTS iterations per move.")):
    """Match runner speed: net vs net (H=128, full-turn) and MCTS vs greedy at 1 and N workers."""
    import json

    from gcpipe.match.bench import bench_match as run

    typer.echo(json.dumps(run(games, workers, mcts_games, mcts_iterations), indent=2))


ckpt_app = typer.Typer(no_args_is_help=True, help="Inspect and convert checkpoint files (.bin).")
app.add_typer(ckpt_app, name="ckpt")


@ckpt_app.command("info")
def ckpt_info(path: Path = typer.Argument(..., metavar="FILE", help="A checkpoint file.")):
    """Layout, size, SHA-256, value head and each tensor's shape and L2 norm."""
    from gcpipe.nn.checkpoint import describe

    info = describe(path)
    typer.echo(f"file: {info['path']}\nlayout: {info['layout']}\nbytes: {info['bytes']}\nsha256: {info['sha256']}\n"
               f"value head: {'yes' if info['value_head'] else 'no'}\n"
               f"recurrence: {'full-turn' if info['full_turn'] else 'actor-only'}")
    for tensor in info["tensors"]:
        shape = "x".join(map(str, tensor["shape"]))
        typer.echo(f"  {tensor['name']:<7} {shape:>9}  norm {tensor['norm']:.6g}")


@ckpt_app.command("convert")
def ckpt_convert(source: Path = typer.Argument(..., metavar="IN", help="The checkpoint to read."),
                 target: Path = typer.Argument(..., metavar="OUT", help="The file to write (not IN)."),
                 layout: str = typer.Option(..., "--layout", help="legacy, 5c or 5c-bias.")):
    """Rewrite a checkpoint in another layout (atomic write; never over IN)."""
    import warnings

    from gcpipe.nn.checkpoint import convert

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = convert(source, target, layout)
    for warning in caught:
        typer.echo(f"gcpipe: warning: {warning.message}", err=True)
    typer.echo(f"{target}: layout {written.layout}, {written.size} bytes, sha256 {written.sha256}")


@app.command()
def play(side: str = typer.Option("guerrilla", "--side", help="The side you play: guerrilla or coin."),
         opponent: str = typer.Option("greedy", "--opponent",
                                      help="random, greedy, mcts:N, net:FILE.bin, search:FILE.bin:SIMS, or a "
                                           "player of --config."),
         seed: int = typer.Option(1, "--seed", help="The game's generator seed (the opponent's draws)."),
         config: Path = typer.Option(None, "--config", help="Pipeline config whose players can be named.")):
    """Play a game in the terminal against a bot or a network (moves like d4-d5 or D3-C4)."""
    from gcpipe.config import player_book
    from gcpipe.play import play as run

    run(side, opponent, seed=seed, book=player_book(config))


@app.command()
def serve(opponent: str = typer.Option("greedy", "--opponent",
                                       help="random, greedy, mcts:N, net:FILE.bin, search:FILE.bin:SIMS, or a "
                                            "player of --config."),
          side: str = typer.Option("guerrilla", "--side", help="The side you play: guerrilla or coin."),
          ledger: Path = typer.Option(..., "--ledger", help="The ledger the finished games are appended to."),
          name: str = typer.Option("human", "--name", help="Your name in the ledger."),
          port: int = typer.Option(8000, "--port", help="The port on localhost (0: a free one)."),
          config: Path = typer.Option(None, "--config", help="Pipeline config whose players can be named.")):
    """Play a bot or a network in the browser: the board served on localhost, every finished game
    appended to --ledger."""
    from gcpipe.analysis.serve import serve as run
    from gcpipe.config import player_book
    from gcpipe.errors import check_int

    check_int("--port", port, 0, 65535)
    run(side, opponent, ledger, port=port, name=name, book=player_book(config), announce=typer.echo)


# -- text of match results --------------------------------------------------------------------
def format_match(result) -> str:
    """One line per cell: wins each way, the Guerrilla win rate with its 95% interval, mean plies."""
    s = result.summary
    low, high = s["guerrilla_win_rate_ci95"]
    return (f"{s['cell']}: {s['games']} games, Guerrilla {s['guerrilla']} {s['guerrilla_wins']} - "
            f"COIN {s['coin']} {s['coin_wins']} (Guerrilla {_percent(s['guerrilla_win_rate'])}, "
            f"95% CI {_percent(low)}-{_percent(high)}), mean {s['mean_plies']:.1f} plies; "
            f"ledger {result.ledger}")


def format_crosstable(result) -> str:
    """The published "Gwins-Cwins" table: rows play Guerrilla, columns play COIN."""
    names = [p.name for p in result.players]
    rows = [["Guerrilla / COIN", *names]]
    for g in names:
        rows.append([g] + [f"{result.cells[(g, c)].summary['guerrilla_wins']}-"
                           f"{result.cells[(g, c)].summary['coin_wins']}" for c in names])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths))) for row in rows)


def format_compare(result) -> str:
    """The decision (SPRT), the candidate's results on each side, the pairs and the Elo estimate,
    then the self cells (fixed-size comparisons only)."""
    from gcpipe.engine import SIDE_NAMES

    s = result.summary
    candidate, baseline = s["candidate"], s["baseline"]
    lines = [f"{candidate} (candidate) vs {baseline} (baseline): {s['pairs']} game pairs ({s['games']} games)"]
    if result.sprt is not None:
        t = s["sprt"]
        lower, upper = t["bounds"]
        lines.append(f"  SPRT {result.sprt.describe()}: {t['decision']} after {s['pairs']} pairs, "
                     f"LLR {t['llr']:+.2f} (bounds {lower:.2f}, {upper:.2f})")
    for side in SIDE_NAMES:
        record = s[f"candidate_as_{side}"]
        low, high = record["win_rate_ci95"]
        label = f"candidate as {'Guerrilla' if side == 'guerrilla' else 'COIN'}:"
        lines.append(f"  {label:<23} {record['wins']}-{record['games'] - record['wins']} "
                     f"({_percent(record['win_rate'])}, 95% CI {_percent(low)}-{_percent(high)})")
    pairs = s["pair_results"]
    lines.append(f"  pairs: won both {pairs['won_both']}, split {pairs['split']}, lost both {pairs['lost_both']} "
                 f"(score {_percent(s['score'])})")
    lines.append(f"  Elo {s['elo']:+.1f} (95% CI {s['elo_ci95'][0]:+.1f} to {s['elo_ci95'][1]:+.1f}), "
                 f"nElo {s['nelo']:+.1f} (95% CI {s['nelo_ci95'][0]:+.1f} to {s['nelo_ci95'][1]:+.1f}), "
                 f"LOS {_percent(s['los'])}")
    if result.sprt is None:
        for name in (candidate, baseline):
            cell = result.cells[(name, name)].summary
            lines.append(f"  self cell {cell['cell']}: {cell['guerrilla_wins']}-{cell['coin_wins']} "
                         f"(Guerrilla {_percent(cell['guerrilla_win_rate'])})")
    lines.append(f"  summary: {result.summary_path}")
    return "\n".join(lines)


def _percent(rate: float) -> str:
    return f"{100 * rate:.1f}%"

