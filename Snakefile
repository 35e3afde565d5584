"""gcpipe workflow: build the engine, train the configured runs, play every cell of the match
field (large cells in game-index shards, merged), fit the side-specific Elo table.

    snakemake --cores 8 elo_table                      # the default config/config.yaml
    snakemake --cores 2 all --configfile config/smoke.yaml  # the tiny CI field
    snakemake --report results/report.html              # after a run: tables, plots, curves, games

Each rule runs one `gcpipe` subcommand. Every job reads the resolved config (defaults filled
in) of the invocation that planned it, results/config/<digest>.yaml (content-addressed, so
another invocation cannot change it under a running job; a dry run writes nothing); each
rule's `params` carry exactly the settings its job depends on, so a config change reruns only
the jobs it concerns.  Jobs stop when this Snakemake process dies (GCPIPE_LAUNCHER).
"""
import json
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from gcpipe import paths
from gcpipe.config import config_text, input_runs, read_config_file, validate_config
from gcpipe.elo import ORDO_FILES, OUTPUT_FILES
from gcpipe.engine.build import CSRC
from gcpipe.errors import UserError
from gcpipe.lifetime import LAUNCHER_ENV, launcher_token
from gcpipe.match.pool import usable_cores
from gcpipe.match.viewer import REVIEW_FILES, VIEW_FILES
from gcpipe.players import roster_positions
from gcpipe.schema import NAME_PATTERN
from gcpipe.train.config import result_settings
from gcpipe.workflow import (RECORD_FORMAT, check_pipeline, check_results_folder, checkpoint_of, match_plan,
                             prepare_results, recorded_fingerprint, resolved_config, review_analyst, shards,
                             train_mpi, train_tasks, train_threads)


# The default config sits beside this Snakefile (so `--directory` can put results/ anywhere).
# A --configfile replaces it rather than being merged into it (Snakemake's default), so no
# player or run of the default leaks into another field.
if not workflow.overwrite_configfiles:

    configfile: f"{workflow.basedir}/config/config.yaml"


envvars:
    "PATH",


# Jobs run the `gcpipe` installed beside the Python running this workflow (the project's
# venv) even when that venv is not activated; under --use-conda the env's own comes first.
if (Path(sys.executable).parent / "gcpipe").exists():
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
# Jobs watch the process that runs them (this one; in a cluster job, the job's own Snakemake) and
# stop when it is gone, rather than write on as orphans next to a rerun (gcpipe/lifetime.py).
os.environ[LAUNCHER_ENV] = launcher_token()


# `--cores` is a budget, not the machine: `snakemake --cores 8` on a 2-core laptop would run four
# 2-thread jobs at once, and oversubscribed torch/OpenMP threads slow training several-fold.  A
# local run therefore also books CPU-bound jobs against the cores this process may use (the
# `cpus` resource; `--resources cpus=N` overrides).  Cluster executors place jobs themselves:
# a run that submits jobs has `--jobs` (nodes) set.  (Not `workflow.local_exec`: the executor is
# chosen after the Snakefile is read, so it is still True here and would hold a SLURM run to the
# submit host's cores, one job at a time on a 2-core login node.)
LOCAL_CPUS = usable_cores()
if workflow.resource_settings.nodes is None and "cpus" not in workflow.global_resources:
    workflow.register_resource("cpus", LOCAL_CPUS)


report: "report/workflow.rst"


# Bad config or inputs stop the workflow here, before the DAG is built or any job starts.
# (--config overrides named too: Snakemake reads their nested values as text, which the schema then refuses)
CONFIG_SOURCE = " with ".join(filter(None, [", ".join(map(str, workflow.overwrite_configfiles or workflow.configfiles)),
                                            f"--config {' '.join(workflow.config_settings.config)}"
                                            if workflow.config_settings.config else ""])) or "config"
try:
    for path in workflow.overwrite_configfiles or workflow.configfiles:
        read_config_file(path)   # what Snakemake's YAML reader lets through: a key given twice
    validate_config(config, source=CONFIG_SOURCE)
    check_pipeline(config, source=CONFIG_SOURCE)
    check_results_folder(paths.RESULTS)
except UserError as error:
    raise WorkflowError(f"gcpipe: error: {error}") from None

# Not a rule's output or a job's input: a new file would be newer than every output and rerun
# them all.  Nor a param, which would rerun every job on any config change: jobs get its path
# in their environment (this process's, inherited by the jobs it starts; a cluster job's own
# Snakemake resolves the same config to the same file), and their params carry the settings
# they depend on.
CONFIG_TEXT = config_text(config)
CONFIG = str(resolved_config(CONFIG_TEXT))
os.environ.update(GCPIPE_RESOLVED_CONFIG=CONFIG)


# Before the first job of a run; never in a dry run, which writes nothing.
onstart:
    try:
        prepare_results(CONFIG_TEXT)
    except UserError as error:
        raise WorkflowError(f"gcpipe: error: {error}") from None

BUILD = str(paths.ENGINE_BUILD)
PLAYERS = config["players"]
RUNS = list(config["runs"])
CELLS = {cell.name: cell for cell in match_plan(config)}
ROSTER = roster_positions(PLAYERS)
# The software of every job under --use-conda (without it: the `gcpipe` on PATH).
SOFTWARE = "envs/gcpipe.yaml"
ELO_FILES = OUTPUT_FILES + (ORDO_FILES if config["elo"]["ordo"] else ())
ELO_OUTPUTS = [str(paths.ELO / name) for name in ELO_FILES]
LOGS, BENCHMARKS = paths.LOGS, paths.BENCHMARKS
ELO_CAPTIONS = {
    "ratings.csv": "report/ratings.rst",
    "crosstable.csv": "report/crosstable.rst",
    "ratings.png": "report/ratings_plot.rst",
    "crosstable.png": "report/crosstable_plot.rst",
    "superiority.csv": "report/superiority.rst",
    "superiority.png": "report/superiority_plot.rst",
    "headtohead.csv": "report/headtohead.rst",
    "ordo.csv": "report/ordo.rst",
    "ordo.png": "report/ordo_plot.rst",
}
GAME_VIEWS = list(VIEW_FILES.values()) + list(REVIEW_FILES.values())
# What the main job makes: everything the HTML report shows, so `snakemake --report` works after it.
MAIN_OUTPUTS = [
    *ELO_OUTPUTS,
    str(paths.PROVENANCE),
    *(str(paths.run_dir(run) / "training.png") for run in RUNS),
    *(str(paths.games_dir(cell) / view) for cell in config["report"]["games"] for view in GAME_VIEWS),
]

NAME = NAME_PATTERN.removeprefix("^").removesuffix("$")


wildcard_constraints:
    run=NAME,
    guerrilla=NAME,
    coin=NAME,
    first=r"\d+",
    games=r"\d+",


localrules:
    all,
    elo_table,
    merge,
    provenance,
    games,


def input_checkpoints_of(run):
    """The final.bins a run reads (gcpipe.config.input_runs): most runs read none."""
    return sorted({str(paths.final_checkpoint(source)) for _, source in input_runs(config["runs"][run])})


def field_checkpoints():
    return sorted({path for name in config["matches"]["field"] for path in checkpoint_of(PLAYERS[name])})


def shard_summaries(wildcards):
    cell = CELLS[f"{wildcards.guerrilla}__{wildcards.coin}"]
    return [str(paths.shard_summary(cell.name, first, games))
            for first, games in shards(cell.games, config["matches"]["shard_size"])]


def engine_build(wildcards):
    """The build record, once the build job (if any) is done; its date does not rerun a job."""
    return ancient(checkpoints.build_engine.get().output[0])


def engine_fingerprint(wildcards):
    """The behaviour fingerprint of the engine the jobs run (gcpipe/fingerprint.py): a param of
    every job that plays or trains, so a change of behaviour reruns exactly them."""
    try:
        return recorded_fingerprint(checkpoints.build_engine.get().output[0])
    except UserError as error:
        raise WorkflowError(f"gcpipe: error: {error}") from None


def ledger_of(summary):
    """The ledger `gcpipe match` writes beside a summary (X.json <- X.jsonl)."""
    return summary.removesuffix(".json") + ".jsonl"


rule all:
    input:
        MAIN_OUTPUTS,


rule elo_table:
    input:
        MAIN_OUTPUTS,


# A checkpoint: the jobs that play or train read the fingerprint its record holds (their `engine`
# param), so the DAG is evaluated again once the build is done.  An edit of csrc/ rebuilds the
# engine; the jobs whose fingerprint changed run again (a changed param), and an edit that changes
# no behaviour (a comment, a speed-up) leaves every result as it is (the record is `ancient` to
# them: its new date alone reruns nothing).
checkpoint build_engine:
    input:
        # The sources the build compiles: those of the installed (editable) gcpipe checkout.
        sorted(str(path) for path in CSRC.glob("*.[ch]")),
        str(CSRC.parent / "gcpipe" / "engine" / "_build.py"),
    output:
        BUILD,
    params:
        native="--native" if config["engine"]["native"] else "",
        # The record's contents (a build record without the fingerprint is rebuilt once).
        record=RECORD_FORMAT,
    conda:
        SOFTWARE
    log:
        str(LOGS / "build_engine.log"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    shell:
        "gcpipe build {params.native} --record {output} > {log} 2>&1"


rule train:
    input:
        engine_build,
        lambda wildcards: input_checkpoints_of(wildcards.run),
    output:
        # Only final.bin: metrics.csv, checkpoints/ and state.pt stay when a job fails, so the
        # rerun of a killed training continues from its last saved state.
        str(paths.final_checkpoint("{run}")),
    params:
        # Settings that cannot change the weights (evaluation, max_epochs) do not retrain a run.
        settings=lambda wildcards: json.dumps(result_settings(config["runs"][wildcards.run]), sort_keys=True),
        engine=engine_fingerprint,
        folder=lambda wildcards, output: str(Path(output[0]).parent),
    conda:
        SOFTWARE
    log:
        str(LOGS / "train" / "{run}.log"),
    benchmark:
        str(BENCHMARKS / "train" / "{run}.tsv")
    threads: lambda wildcards: train_threads(config["runs"][wildcards.run])
    resources:
        cpus=lambda wildcards, threads: min(threads, LOCAL_CPUS),
        mem_mb=8000,
        runtime=240,
        # A run of several ranks: one SLURM job of that many tasks (absent for one rank).
        tasks=lambda wildcards: train_tasks(config["runs"][wildcards.run]),
        mpi=lambda wildcards: train_mpi(config["runs"][wildcards.run]),
    shell:
        "gcpipe train {wildcards.run} --config $GCPIPE_RESOLVED_CONFIG --out {params.folder} --threads {threads} > {log} 2>&1"


rule match:
    input:
        engine_build,
        lambda wildcards: checkpoint_of(PLAYERS[wildcards.guerrilla]),
        lambda wildcards: checkpoint_of(PLAYERS[wildcards.coin]),
    output:
        # The summary, written when the shard is complete.  The ledger beside it is not a declared
        # output, so a failed or killed job's ledger survives and the rerun plays only the missing games;
        # one of other players (a retrained network, a changed setting) is played afresh (--replace-others).
        str(paths.shard_summary("{guerrilla}__{coin}", "{first}", "{games}")),
    params:
        ledger=lambda wildcards, output: ledger_of(output[0]),
        # The players' settings and roster positions fix every game's seed and play; the job
        # reads both from the config (the roster positions by the same rule, roster_positions).
        players=lambda wildcards: json.dumps([PLAYERS[wildcards.guerrilla], PLAYERS[wildcards.coin]], sort_keys=True),
        roster=lambda wildcards: [ROSTER[wildcards.guerrilla], ROSTER[wildcards.coin]],
        # The games' engine: a shard of another engine is played again (--replace-others).
        engine=engine_fingerprint,
    conda:
        SOFTWARE
    log:
        str(LOGS / "match" / "{guerrilla}__{coin}" / "{first}-{games}.log"),
    benchmark:
        str(BENCHMARKS / "match" / "{guerrilla}__{coin}" / "{first}-{games}.tsv")
    threads: 2
    resources:
        cpus=lambda wildcards, threads: min(threads, LOCAL_CPUS),
        mem_mb=2000,
        runtime=120,
    shell:
        "gcpipe match {wildcards.guerrilla} {wildcards.coin} --config $GCPIPE_RESOLVED_CONFIG"
        " --first-game {wildcards.first} --games {wildcards.games} --workers {threads} --out {params.ledger} --replace-others > {log} 2>&1"


rule merge:
    input:
        shard_summaries,
    output:
        ledger=str(paths.ledger("{guerrilla}__{coin}")),
        summary=str(paths.ledger("{guerrilla}__{coin}").with_suffix(".json")),
    params:
        ledgers=lambda wildcards, input: " ".join(ledger_of(summary) for summary in input),
        games=lambda wildcards: CELLS[f"{wildcards.guerrilla}__{wildcards.coin}"].games,
    conda:
        SOFTWARE
    log:
        str(LOGS / "merge" / "{guerrilla}__{coin}.log"),
    shell:
        "gcpipe merge {params.ledgers} --games {params.games} --out {output.ledger} > {log} 2>&1"


rule elo:
    input:
        [str(paths.ledger(name)) for name in CELLS],
    output:
        [
            report(str(paths.ELO / name), caption=ELO_CAPTIONS[name], category="Elo")
            if name in ELO_CAPTIONS
            else str(paths.ELO / name)
            for name in ELO_FILES
        ],
    params:
        anchor=config["elo"]["anchor"],
        order=",".join(config["elo"]["order"]),
        ordo="--ordo" if config["elo"]["ordo"] else "",
        folder=lambda wildcards, output: str(Path(output[0]).parent),
    conda:
        SOFTWARE
    log:
        str(LOGS / "elo.log"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    shell:
        "gcpipe elo {input} --out {params.folder} --anchor {params.anchor} --order {params.order} {params.ordo}"
        " --config $GCPIPE_RESOLVED_CONFIG > {log} 2>&1"


def _analyst_checkpoint(cell):
    analyst = review_analyst(config, cell)
    return checkpoint_of(PLAYERS[analyst]) if analyst else []


def _analyst_option(cell):
    analyst = review_analyst(config, cell)
    return f"--analyst {analyst} --config $GCPIPE_RESOLVED_CONFIG" if analyst else ""


rule games:
    input:
        ledger=str(paths.ledger("{guerrilla}__{coin}")),
        # The replay plays the recorded players again; the analyst's network reviews the games.
        checkpoints=lambda wildcards: checkpoint_of(PLAYERS[wildcards.guerrilla]) + checkpoint_of(PLAYERS[wildcards.coin])
        + _analyst_checkpoint(f"{wildcards.guerrilla}__{wildcards.coin}"),
    output:
        [
            report(
                str(paths.games_dir("{guerrilla}__{coin}") / view),
                caption="report/review.rst" if view.endswith(".html") else "report/games.rst",
                category="Games",
                subcategory="{guerrilla}__{coin}",
            )
            for view in GAME_VIEWS
        ],
    params:
        folder=lambda wildcards, output: str(Path(output[0]).parent),
        analyst=lambda wildcards: _analyst_option(f"{wildcards.guerrilla}__{wildcards.coin}"),
    conda:
        SOFTWARE
    log:
        str(LOGS / "games" / "{guerrilla}__{coin}.log"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    shell:
        "gcpipe view {input.ledger} --out {params.folder} --html {params.analyst} > {log} 2>&1"


rule report:
    input:
        str(paths.final_checkpoint("{run}")),
    output:
        report(
            str(paths.run_dir("{run}") / "training.png"),
            caption="report/training.rst",
            category="Training",
            subcategory="{run}",
        ),
    conda:
        SOFTWARE
    params:
        # Written by the training job beside final.bin (not a declared output: see rule train).
        metrics=lambda wildcards: str(paths.run_dir(wildcards.run) / "metrics.csv"),
    log:
        str(LOGS / "report" / "{run}.log"),
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "gcpipe plot-training {params.metrics} --title {wildcards.run} --out {output} > {log} 2>&1"


rule provenance:
    input:
        build=BUILD,
        artifacts=[*field_checkpoints(), *ELO_OUTPUTS],
    output:
        report(str(paths.PROVENANCE), caption="report/provenance.rst", category="Provenance"),
    params:
        # The record names the config: a new one (another digest) rewrites it.
        config=CONFIG,
    conda:
        SOFTWARE
    log:
        str(LOGS / "provenance.log"),
    shell:
        "gcpipe provenance --config {params.config} --build {input.build} --out {output}"
        " {input.artifacts} > {log} 2>&1"
