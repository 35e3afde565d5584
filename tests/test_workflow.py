"""The workflow layer: config validation (schema + cross-section checks), the match plan,
provenance and training plots, and the Snakefile itself (lint, dry runs of every shipped config,
the SLURM profile, bad input stopping the DAG). The smoke DAG end to end (about two minutes) is
skipped only when GCPIPE_SKIP_SMOKE_DAG=1."""
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engines import BOTS, environment
from gcpipe.config import config_text, load_config, validate_config
from gcpipe.errors import UserError
from gcpipe.match.ledger import read_ledger
from gcpipe.players import roster_positions
from gcpipe.schema import SCHEMA_PATH, shown
from gcpipe.workflow import (Cell, check_pipeline, check_results_folder, match_plan, prepare_results, review_analyst,
                             shards)

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "config"
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
needs_snakemake = pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake is not installed")


def small_config(**sections):
    config = {"players": {"random": {"kind": "random"}, "greedy": {"kind": "greedy"}}}
    config.update(sections)
    return config


# --- config validation -------------------------------------------------------------------

def test_defaults_are_filled_in():
    config = validate_config(small_config(players={"r": {"kind": "random"},
                                                    "m": {"kind": "mcts", "roster": 3}}))
    assert config["players"]["m"] == {"kind": "mcts", "roster": 3, "iterations": 256,
                                      "exploration": 0.7, "rollout": "greedy"}
    assert config["matches"] == {"games": 1000, "max_games_with": {}, "shard_size": 1000,
                                 "field": ["r", "m"]}
    assert config["elo"] == {"anchor": "mean:1500", "ordo": False, "order": ["r", "m"]}
    assert config["report"] == {"games": []}
    assert config["engine"] == {"native": False}
    assert config["runs"] == {}


def test_filled_defaults_are_not_shared_between_configs():
    first = validate_config(small_config())
    first["matches"]["max_games_with"]["random"] = 5
    assert validate_config(small_config())["matches"]["max_games_with"] == {}


def test_integer_settings_written_as_floats_become_ints():
    # The docs' tip for YAML (docs/pipeline.md) (1e8 is text): 1.0e+8. Such a float of the match plan's counts broke
    # the DAG's shard arithmetic in a traceback, and `gcpipe config` printed games: 1000.0.
    config = validate_config(small_config(
        players={"m": {"kind": "mcts", "iterations": 2.0e+3, "exploration": 1.0, "roster": 3.0},
                 "g": {"kind": "greedy"}},
        matches={"games": 1.0e+3, "max_games_with": {"m": 1.5e+2}, "shard_size": 1.0e+2},
        runs={"r": {"total_timesteps": 1.0e+6, "learning_rate": 1.0}}))
    values = [config["players"]["m"]["iterations"], config["players"]["m"]["roster"],
              config["matches"]["games"], config["matches"]["max_games_with"]["m"],
              config["matches"]["shard_size"], config["runs"]["r"]["total_timesteps"]]
    assert values == [2000, 3, 1000, 150, 100, 1000000]
    assert all(type(value) is int for value in values)
    assert type(config["players"]["m"]["exploration"]) is float   # a number setting stays a float
    assert "games: 1000\n" in config_text(config)
    assert [(cell.name, cell.games) for cell in match_plan(config)][:2] == [("m__m", 150), ("m__g", 150)]
    assert shards(config["matches"]["max_games_with"]["m"], config["matches"]["shard_size"]) == [(0, 100), (100, 50)]


def test_run_settings_are_filled_in_as_the_trainer_reads_them():
    from gcpipe.train.config import TrainConfig, make_config

    config = validate_config(small_config(runs={"r": {"seed": 3}}))
    # `ranks` and `mcts_iterations_from` have no default: absent, a run is one process with its sparring
    # MCTS at mcts_iterations throughout, and existing configs resolve to the same text.
    assert list(config["runs"]["r"]) == ["seed"] + [f.name for f in dataclasses.fields(TrainConfig)
                                                    if f.name not in ("seed", "ranks", "mcts_iterations_from")]
    assert (config["runs"]["r"]["seed"], config["runs"]["r"]["horizon"], config["runs"]["r"]["side"]) == (3, 64, "random")
    assert make_config(config["runs"]["r"]) == make_config({"seed": 3})


def test_a_pipeline_device_is_the_device_of_every_run_without_its_own():
    config = validate_config(small_config(device="auto", runs={"a": {}, "b": {"device": "cpu"}}))
    assert (config["runs"]["a"]["device"], config["runs"]["b"]["device"]) == ("auto", "cpu")
    assert validate_config(small_config(runs={"a": {}}))["runs"]["a"]["device"] == "cpu"


def test_the_review_analyst_is_the_configs_or_the_cells_network():
    players = {"r": {"kind": "random"}, "n": {"kind": "net", "path": "n.bin"}, "s": {"kind": "search", "run": "x"}}
    config = {"players": players, "report": {}}
    assert [review_analyst(config, cell) for cell in ("n__s", "r__s", "r__r")] == ["n", "s", None]
    config["report"]["analyst"] = "s"
    assert review_analyst(config, "n__r") == "s"


@pytest.mark.parametrize("change, message", [
    (lambda c: c.pop("players"), "missing key 'players'"),
    (lambda c: c.update(player={}), "unknown key 'player' (allowed: engine, players, device, runs, matches, elo, report)"),
    (lambda c: c.update(device="gpu"), "device: 'gpu' is not one of cpu, cuda, auto"),
    (lambda c: c.update(players={}), "players: must not be empty"),
    (lambda c: c["players"].update(x={"kind": "robot"}),
     "players.x.kind: 'robot' is not one of random, greedy, mcts, net, search, openspiel"),
    (lambda c: c["players"].update(o={"kind": "openspiel", "max_simulations": 0}),
     "players.o.max_simulations: 0 is less than the minimum of 1"),
    (lambda c: c["players"].update(o={"kind": "openspiel", "algorithm": "cfr"}),
     "players.o.algorithm: 'cfr' is not one of mcts"),
    (lambda c: c["players"].update(x={"roster": 2}), "players.x: missing key 'kind'"),
    (lambda c: c["players"].update(x="random"), "players.x: must be a mapping, got 'random'"),
    (lambda c: c["players"].update(m={"kind": "mcts", "iteration": 5}),
     "players.m: unknown key 'iteration' (allowed: kind, roster, iterations, exploration, rollout)"),
    (lambda c: c["players"].update(m={"kind": "mcts", "iterations": 0}),
     "players.m.iterations: 0 is less than the minimum of 1"),
    (lambda c: c["players"].update(m={"kind": "mcts", "rollout": "smart"}),
     "players.m.rollout: 'smart' is not one of random, greedy"),
    (lambda c: c["players"].update(n={"kind": "net"}),
     "players.n: needs exactly one of 'path' (a checkpoint file) or 'run' (a training run)"),
    (lambda c: c["players"].update(n={"kind": "net", "path": "a.bin", "run": "r"}),
     "players.n: needs exactly one of 'path' (a checkpoint file) or 'run' (a training run)"),
    (lambda c: c["players"].update(m={"kind": "mcts", "exploration": float("inf")}),
     "players.m.exploration: must be a finite number, got inf"),
    (lambda c: c["players"].update(n={"kind": "net", "path": "a.bin", "sha256": "abc"}),
     "players.n.sha256: 'abc' has the wrong form: 64 hexadecimal digits"),
    (lambda c: c["players"].update(n={"kind": "net", "run": "nowhere"}),
     "players.n: run 'nowhere' is not configured under runs (runs: none)"),
    (lambda c: c["players"].update({"a__b": {"kind": "random"}}),
     "players: name 'a__b' has the wrong form: Letters, digits, '.', '-' and single '_', "
     "starting with a letter or digit"),
    (lambda c: c["players"]["greedy"].update(roster=0),
     "players random and greedy share roster position 0, so their cells would replay the same "
     "seeds; give one of them another `roster`"),
    (lambda c: c["players"]["greedy"].update(roster=-1),
     "players.greedy.roster: -1 is less than the minimum of 0"),
    (lambda c: c.update(matches={"field": ["random", "nobody"]}),
     "matches.field[1]: unknown player 'nobody' (players: random, greedy)"),
    (lambda c: c.update(matches={"field": ["random", "random"]}),
     "matches.field: lists an entry twice: ['random', 'random']"),
    (lambda c: c.update(matches={"games": "many"}), "matches.games: must be an integer, got 'many'"),
    (lambda c: c.update(matches={"shard_size": 0}), "matches.shard_size: 0 is less than the minimum of 1"),
    (lambda c: c.update(matches={"max_games_with": {"nobody": 5}}),
     "matches.max_games_with: unknown player 'nobody' (players: random, greedy)"),
    (lambda c: c.update(elo={"anchor": "median:1500"}),
     "elo.anchor: 'median:1500' has the wrong form: 'mean:VALUE' (mean of all (player, side) "
     "entries) or 'PLAYER/SIDE:VALUE'"),
    (lambda c: c.update(elo={"anchor": "nobody/coin:1000"}),
     "elo.anchor: player 'nobody' is not in the match field (random, greedy)"),
    (lambda c: c.update(elo={"order": ["greedy", "mcts"]}),
     "elo.order[1]: 'mcts' is not in the match field (random, greedy)"),
    # These two passed the checks and stopped the elo job, after every game was played.
    (lambda c: c.update(elo={"order": ["greedy"]}),
     "elo.order: it lists the field's players in table order, all of them; missing: random"),
    (lambda c: c.update(elo={"anchor": "mean:2000000"}),
     "elo.anchor: 'mean:2000000': the value must be within ±1e+06, as `gcpipe elo --anchor` takes it"),
    # Sizes held at once are bounded as everywhere (a torch traceback allocating 7.7 TB before).
    (lambda c: c.update(runs={"r": {"num_envs": 2_000_000}}),
     "runs.r.num_envs: 2000000 is greater than the maximum of 1000000"),
    (lambda c: c.update(runs={"r": {"horizon": 10**9}}),
     "runs.r.horizon: 1000000000 is greater than the maximum of 65536"),
    (lambda c: c.update(runs={"r": {"total_timesteps": 10**30}}),
     "runs.r.total_timesteps: 1000000000000000000000000000000 is greater than the maximum of 1000000000000000"),
    (lambda c: c.update(elo={"anchor": "median:" + "1" * 5000}),   # a value is shown cut to a line
     "elo.anchor: 'median:" + "1" * 192 + "... (5,009 characters) has the wrong form"),
    (lambda c: c.update(runs={"r": {"horizn": 8}}), "runs.r: unknown key 'horizn' (allowed: "),
    (lambda c: c.update(runs={"r": {"layout": "5d"}}), "runs.r.layout: '5d' is not one of 5c, 5c-bias, legacy"),
    (lambda c: c.update(runs={"r": {"side": True}}), "runs.r.side: True is not one of random, guerrilla, coin"),
    (lambda c: c.update(runs={"r": {"horizon": True}}), "runs.r.horizon: must be an integer, got True"),
    # Checks only the trainer knows (here: whole BPTT segments per minibatch) come from it.
    (lambda c: c.update(runs={"r": {"horizon": 60}}),
     "runs.r: 'minibatch_size' (8192) must be a multiple of 'horizon' (60): minibatches are whole segments"),
    (lambda c: c.update(engine={"native": "yes"}), "engine.native: must be true or false, got 'yes'"),
    (lambda c: c.update(runs={"r": {"init_run": "q"}}), "runs.r.init_run: 'q' is not a configured run (runs: r)"),
    (lambda c: c.update(runs={"r": {"init_run": "s"}, "s": {"init_run": "r"}}),
     "runs.r.init_run: the runs start from each other in a circle (r -> s -> r)"),
    (lambda c: c.update(runs={"r": {"algorithm": "distill", "teacher_runs": {"guerrilla": "s", "coin": "q"}},
                              "s": {}}),
     "runs.r.teacher_runs.coin: 'q' is not a configured run (runs: r, s)"),
    (lambda c: c.update(runs={"r": {"algorithm": "distill", "teacher_runs": {"guerrilla": "s", "coin": "t"},
                                    "teacher_search": {"guerrilla": True, "coin": False}}, "s": {}, "t": {}}),
     "runs.r.teacher_search.guerrilla: the search reads the value rows of run 's' as +-1 outcomes, which algorithm ppo"),
    (lambda c: c.update(runs={"r": {"init_run": "s"},
                              "s": {"algorithm": "distill", "teacher_runs": {"guerrilla": "t", "coin": "r"}}, "t": {}}),
     "runs.r.init_run: the runs start from each other in a circle (r -> s -> r)"),
    # Teachers without `algorithm: distill` trained PPO from scratch, silently.
    (lambda c: c.update(runs={"r": {"teacher_runs": {"guerrilla": "nosuch", "coin": "nosuch"}}}),
     "runs.r: 'teacher_runs' and 'teacher_search' are distillation's; set 'algorithm' distill (got ppo), or leave "
     "them out"),
    (lambda c: c.update(runs={"r": {"algorithm": "expert", "teacher_search": {"guerrilla": True, "coin": False}}}),
     "runs.r: 'teacher_runs' and 'teacher_search' are distillation's; set 'algorithm' distill (got expert)"),
    (lambda c: c.update(runs={"r": {"init_run": "s"}, "s": {"layout": "5c-bias"}}),
     "runs.r.init_run: run 's' writes layout 5c-bias, which does not fit layout 5c (bias vectors)"),
    (lambda c: c.update(report={"games": ["random__nobody"]}),
     "report.games[0]: 'random__nobody' is not a cell of the match plan (cells are GUERRILLA__COIN of field "
     "players, e.g. random__random)"),
    (lambda c: c.update(report={"analyst": "random"}),
     "report.analyst: 'random' is not a net or search player of `players` (none)"),
    (lambda c: c.update(elo={"ordo": "yes"}), "elo.ordo: must be true or false, got 'yes'"),
    (lambda c: c["players"].update(s={"kind": "search"}),
     "players.s: needs exactly one of 'path' (a checkpoint file) or 'run' (a training run)"),
    (lambda c: c["players"].update(s={"kind": "search", "run": "q"}),
     "players.s: run 'q' is not configured under runs (runs: none)"),
])
def test_bad_config_is_one_line_naming_the_key(change, message):
    config = small_config()
    change(config)
    with pytest.raises(UserError) as caught:
        validate_config(config, source="my.yaml")
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(f"my.yaml: {message}")


@pytest.mark.parametrize("text, message", [
    # YAML 1.1 read these as 8 and 90, quietly: another roster position, another MCTS.
    ("players:\n  a: {kind: random, roster: 010}\n", "config {}:2: 010 is an octal or base-60 number to YAML"),
    ("players:\n  a: {kind: mcts, iterations: 1:30}\n", "config {}:2: 1:30 is an octal or base-60 number to YAML"),
    ("players: {a: {kind: random}}\nelo: {order: " + "[" * 500 + "]" * 500 + "}\n",   # a RecursionError traceback
     "config {} nests its lists or mappings too deeply to read"),
])
def test_a_config_that_yaml_reads_otherwise_than_it_looks_is_refused(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as refused:
        load_config(path)
    assert str(refused.value).startswith(message.format(path))
    path.write_text("players:\n  a: {kind: random, roster: 0x0a}\nruns: {r: {seed: 1_000}}\n")   # unambiguous
    assert (load_config(path)["players"]["a"]["roster"], load_config(path)["runs"]["r"]["seed"]) == (10, 1000)


def test_load_config_reports_missing_and_malformed_files(tmp_path):
    with pytest.raises(UserError, match=r"^config .*nope\.yaml does not exist$"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("players: [unclosed\n")
    with pytest.raises(UserError, match=r"^config .*bad\.yaml is not valid YAML: "):
        load_config(bad)
    bad.write_text("- just\n- a list\n")
    with pytest.raises(UserError, match=r"bad\.yaml: the config must be a mapping of keys to values, got list"):
        load_config(bad)


# Every config shipped in config/ (schema.yaml is the schema they follow, not a config).
@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.yaml") if p.name != "schema.yaml"))
def test_shipped_configs_are_valid(name):
    config = load_config(CONFIGS / name)
    assert set(config["matches"]["field"]) <= set(config["players"])


def test_default_config_is_the_documented_field():
    config = load_config(CONFIGS / "config.yaml")
    assert config["matches"]["field"] == ["random", "greedy", "baseline", "mcts2k", "candidate", "search"]
    assert roster_positions(config["players"]) == {"random": 0, "greedy": 1, "baseline": 2, "mcts2k": 3, "candidate": 5,
                                                   "search": 6}
    runs = config["runs"]
    candidate = runs["candidate"]
    assert (candidate["algorithm"], candidate["init_run"], candidate["layout"]) == ("distill", "guerrilla-teacher", "5c")
    assert candidate["teacher_runs"] == {"guerrilla": "guerrilla-teacher", "coin": "coin-teacher"}
    assert config["players"]["search"]["run"] == "expert"
    assert (runs["expert"]["algorithm"], runs["expert"]["init_run"]) == ("expert", "candidate")
    # The expert iteration is reference.yaml's first, from the candidate of each config.
    assert runs["expert"] == load_config(CONFIGS / "reference.yaml")["runs"]["expert"]
    baseline = runs["baseline"]
    assert (baseline["selfplay"], baseline["opponent"], baseline["layout"]) == (False, "greedy", "legacy")
    for teacher in ("guerrilla-teacher", "coin-teacher"):
        assert (runs[teacher]["layout"], runs[teacher]["selfplay"], runs[teacher]["algorithm"]) == ("5c", True, "ppo")
    # The teachers differ only in the COIN's rewards, the length of the run and the search the
    # Guerrilla spars against (the COIN teacher's Guerrilla is not distilled, so it keeps the cheaper one).
    differ = {key for key in runs["guerrilla-teacher"] if runs["guerrilla-teacher"][key] != runs["coin-teacher"][key]}
    assert differ == {"reward_shaping", "coin_mobility_reward", "total_timesteps", "mcts_iterations"}
    assert (runs["guerrilla-teacher"]["mcts_iterations"], runs["coin-teacher"]["mcts_iterations"]) == (256, 64)
    plan = match_plan(config)
    assert len(plan) == 36
    games = {(cell.guerrilla, cell.coin): cell.games for cell in plan}
    # The smaller cap of the two players applies: MCTS 2K's 100, then the search player's 200.
    assert {n for pair, n in games.items() if "mcts2k" in pair} == {100}
    assert {n for pair, n in games.items() if "search" in pair and "mcts2k" not in pair} == {200}
    assert {n for pair, n in games.items() if not {"mcts2k", "search"} & set(pair)} == {1000}


def test_distill_config_is_the_default_recipe_at_full_budget():
    default, distill = (load_config(CONFIGS / name)["runs"] for name in ("config.yaml", "distill.yaml"))
    assert distill["guerrilla-teacher"] == default["guerrilla-teacher"]
    assert distill["distilled"] == {**default["candidate"], "expert_iterations": 200}
    assert distill["coin-teacher"] == {**default["coin-teacher"], "total_timesteps": 100_000_000}
    assert (default["coin-teacher"]["total_timesteps"], default["candidate"]["expert_iterations"]) == (40_000_000, 60)


def test_strongest_config_is_the_default_recipe_with_the_seed_47_mcts_512_teacher():
    default, strongest = (load_config(CONFIGS / name) for name in ("config.yaml", "strongest.yaml"))
    runs = strongest["runs"]
    assert set(runs) == {"guerrilla-teacher", "coin-teacher", "candidate"}
    assert runs["coin-teacher"] == default["runs"]["coin-teacher"]
    assert runs["candidate"] == default["runs"]["candidate"]
    assert runs["guerrilla-teacher"] == {**default["runs"]["guerrilla-teacher"], "mcts_iterations": 512,
                                         "bot_fraction": {"guerrilla": 0.2, "coin": 0.1}, "seed": 47}
    # The candidate's cells against MCTS 10K replay the games of docs/results.md: rosters 8 and 10.
    positions = roster_positions(strongest["players"])
    assert (positions["candidate"], positions["mcts10k"]) == (8, 10)
    games = {cell.name: cell.games for cell in match_plan(strongest)}
    assert (games["candidate__mcts10k"], games["mcts10k__candidate"], games["candidate__greedy"]) == (300, 300, 1000)


def test_reference_config_is_the_published_field():
    config = load_config(CONFIGS / "reference.yaml")
    players = config["players"]
    assert (players["mcts2k"]["iterations"], players["mcts10k"]["iterations"]) == (2000, 10000)
    assert roster_positions(players)["mcts2k"] == 3 and roster_positions(players)["mcts10k"] == 4
    assert players["puffer40"]["sha256"] == "f58615069b9a0e50105dd54b4729d366d602fe14b957a0042e4dc88089120398"
    assert config["runs"]["candidate"]["total_timesteps"] == 100_000_000
    runs = config["runs"]
    assert (players["expert-search"]["run"], runs["expert-long"]["init_run"], runs["expert"]["init_run"]) == \
        ("expert-long", "expert", "candidate")
    # The chain starts from a PPO network of the default's Guerrilla teacher's settings.
    assert runs["candidate"] == load_config(CONFIGS / "config.yaml")["runs"]["guerrilla-teacher"]
    assert {cell.games for cell in match_plan(config)} == {1000} and len(match_plan(config)) == 49


# --- the player section comes from the player kinds -------------------------------------

def test_player_entries_accept_what_the_kinds_declare():
    from gcpipe.players import KINDS

    config = validate_config({"players": {name: {"kind": name} for name in ("random", "greedy", "mcts")}})
    assert config["players"]["mcts"] == {"kind": "mcts", **{key: value["default"] for key, value in
                                                           KINDS["mcts"].schema["properties"].items()}}
    with pytest.raises(UserError, match=r"^config: players\.g: unknown key 'iterations' \(allowed: kind, roster\)$"):
        validate_config({"players": {"g": {"kind": "greedy", "iterations": 5}}})


def test_schema_file_is_found_beside_the_package():
    assert SCHEMA_PATH == REPO / "config" / "schema.yaml"


# --- match plan ----------------------------------------------------------------------------

def test_match_plan_caps_cells_of_expensive_players():
    config = validate_config({"players": {"a": {"kind": "random"}, "b": {"kind": "greedy"},
                                          "m": {"kind": "mcts"}},
                              "matches": {"games": 50, "max_games_with": {"m": 10, "b": 30}}})
    assert match_plan(config) == [
        Cell("a", "a", 50), Cell("a", "b", 30), Cell("a", "m", 10),
        Cell("b", "a", 30), Cell("b", "b", 30), Cell("b", "m", 10),
        Cell("m", "a", 10), Cell("m", "b", 10), Cell("m", "m", 10)]
    assert Cell("a", "m", 10).name == "a__m"


def test_shards_cover_every_game_once():
    assert shards(10, 4) == [(0, 4), (4, 4), (8, 2)]
    assert shards(8, 8) == [(0, 8)]
    assert shards(3, 100) == [(0, 3)]


def test_roster_defaults_to_the_index_in_players():
    config = validate_config({"players": {"a": {"kind": "random"}, "b": {"kind": "greedy", "roster": 7},
                                          "c": {"kind": "greedy"}}})
    assert roster_positions(config["players"]) == {"a": 0, "b": 7, "c": 2}


# --- checks on disk before the DAG starts ----------------------------------------------

def test_unwritable_results_folder_stops_the_pipeline(tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("a file where the results folder should be")
    with pytest.raises(UserError, match=r"^results folder .*results/ is not writable: "):
        prepare_results(config_text(validate_config(small_config())), blocker)
    # The check while planning (dry runs too) writes nothing and says the same.
    with pytest.raises(UserError, match=rf"^results folder {blocker}/ is not writable: {blocker} is not a writable folder"):
        check_results_folder(blocker)
    assert sorted(os.listdir(tmp_path)) == ["results"]


def test_net_player_file_is_checked_before_the_pipeline(tmp_path):
    config = validate_config({"players": {"r": {"kind": "random"},
                                          "p": {"kind": "net", "path": str(tmp_path / "missing.bin")}}})
    with pytest.raises(UserError, match=r"^config: players\.p: checkpoint .*missing\.bin does not exist$"):
        check_pipeline(config)
    wrong_size = tmp_path / "wrong.bin"
    wrong_size.write_bytes(b"\0" * 1000)
    config["players"]["p"]["path"] = str(wrong_size)
    with pytest.raises(UserError, match=r"^config: players\.p: checkpoint .*wrong\.bin has 1000 bytes, which is no known layout"):
        check_pipeline(config)


def test_search_player_file_is_checked_before_the_pipeline(tmp_path):
    config = validate_config({"players": {"r": {"kind": "random"},
                                          "s": {"kind": "search", "path": str(tmp_path / "missing.bin")}}})
    with pytest.raises(UserError, match=r"^config: players\.s: checkpoint .*missing\.bin does not exist$"):
        check_pipeline(config)


def test_net_player_outside_the_field_is_not_checked(tmp_path):
    config = validate_config({"players": {"r": {"kind": "random"},
                                          "p": {"kind": "net", "path": str(tmp_path / "missing.bin")}},
                              "matches": {"field": ["r"]}})
    check_pipeline(config)


def test_pipeline_rejects_runs_that_stop_before_final_bin(tmp_path):
    config = validate_config(small_config(runs={"r": {"max_epochs": 3}}))
    with pytest.raises(UserError, match=r"^config: runs\.r\.max_epochs stops training before final\.bin"):
        check_pipeline(config)


# --- provenance and training curves ------------------------------------------------------

def test_provenance_records_config_build_versions_and_digests(tmp_path):
    from gcpipe.provenance import write_provenance

    (tmp_path / "config.yaml").write_text("players:\n  random: {kind: random}\n")
    (tmp_path / "build.json").write_text('{"cflags": ["-O3"], "native": false}\n')
    (tmp_path / "table.md").write_bytes(b"| a |\n")
    out = tmp_path / "provenance.json"
    record = write_provenance(out, tmp_path / "config.yaml", tmp_path / "build.json", [tmp_path / "table.md"])
    first = out.read_bytes()
    write_provenance(out, tmp_path / "config.yaml", tmp_path / "build.json", [tmp_path / "table.md"])
    assert out.read_bytes() == first
    assert list(record) == ["gcpipe", "git", "python", "packages", "engine", "config", "artifacts_sha256"]
    assert record["config"] == {"players": {"random": {"kind": "random"}}}
    assert record["engine"] == {"cflags": ["-O3"], "native": False}
    assert record["artifacts_sha256"] == {str(tmp_path / "table.md"): hashlib.sha256(b"| a |\n").hexdigest()}
    assert record["packages"]["numpy"] and "torch" in record["packages"]
    assert json.loads(first) == record


def test_provenance_names_a_missing_build_record(tmp_path):
    from gcpipe.provenance import provenance

    (tmp_path / "config.yaml").write_text("players: {}\n")
    with pytest.raises(UserError, match=r"^engine build record .*build\.json does not exist$"):
        provenance(tmp_path / "config.yaml", tmp_path / "build.json")


METRICS = ("epoch,global_step,sps,policy_loss,value_loss,entropy,games_as_guerrilla,wins_as_guerrilla,"
           "games_as_coin,wins_as_coin,eval_win_rate_as_guerrilla\n"
           "1,1000,5000.0,0.1,0.5,2.0,10,2,10,5,\n"
           "2,2000,5100.0,0.05,0.4,1.9,12,6,8,6,0.25\n")


def test_training_plot_is_a_deterministic_png(tmp_path):
    from gcpipe.report import plot_training

    metrics = tmp_path / "metrics.csv"
    metrics.write_text(METRICS)
    plot_training(metrics, tmp_path / "a.png", "run")
    plot_training(metrics, tmp_path / "b.png", "run")
    data = (tmp_path / "a.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert data == (tmp_path / "b.png").read_bytes()
    assert b"matplotlib" not in data


def test_training_win_rates_are_wins_over_games_by_side():
    from gcpipe.report import _series

    columns = {"global_step": [1.0, 2.0], "wins_as_coin": [5.0, 6.0], "games_as_coin": [10.0, 0.0]}
    rates = _series(columns, ("wins_as_coin", "games_as_coin"))
    assert rates[0] == 0.5 and rates[1] != rates[1]  # no COIN games: NaN, not a division error
    assert _series(columns, "sps") is None


@pytest.mark.parametrize("text, message", [
    ("epoch,sps\n1,2\n", r"is not a training metrics file: no 'global_step' column"),
    ("epoch,global_step\n", r"has no rows: the run logged no epoch yet"),
    ("global_step,sps\n1,fast\n", r"metrics\.csv:2: column sps: 'fast' is not a number"),
    ("global_step,sps\n1\n", r"metrics\.csv:2: 1 fields, the header has 2"),
])
def test_bad_metrics_file_is_named(tmp_path, text, message):
    from gcpipe.report import read_metrics

    (tmp_path / "metrics.csv").write_text(text)
    with pytest.raises(UserError, match=message):
        read_metrics(tmp_path / "metrics.csv")


# --- the Snakefile ---------------------------------------------------------------------------

def snakemake(*args, workdir, timeout=120, env=None, snakefile=REPO / "Snakefile"):
    env = dict(env or os.environ, PATH=f"{SNAKEMAKE.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run([str(SNAKEMAKE), "-s", str(snakefile), "-d", str(workdir), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=workdir)


def job_counts(output: str) -> dict[str, int]:
    """The "Job stats" table of a dry run, as {rule: count}."""
    lines = output.split("Job stats:")[1].splitlines()[3:]
    counts = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


@needs_snakemake
def test_snakemake_lint_is_clean(tmp_path):
    result = snakemake("--lint", workdir=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_snakemake
def test_dry_run_of_the_default_config(tmp_path):
    result = snakemake("-n", "elo_table", workdir=tmp_path)
    assert result.returncode == 0, result.stderr
    # The main job makes everything the report shows: training curves and the game viewer too.
    assert job_counts(result.stdout) == {"build_engine": 1, "match": 36, "train": 5, "merge": 36, "elo": 1,
                                         "provenance": 1, "report": 5, "games": 4, "elo_table": 1}
    # A dry run writes nothing (not even the resolved config its jobs would read).
    assert not (tmp_path / "results").exists()


@needs_snakemake
def test_a_pipeline_device_is_given_on_the_command_line_and_checked(tmp_path):
    """A GPU user's switch, `--config device=auto`, plans the same jobs; a bad value is one line."""
    auto = snakemake("-n", "elo_table", "--config", "device=auto", workdir=tmp_path)
    assert auto.returncode == 0, auto.stderr
    assert job_counts(auto.stdout)["train"] == 5
    bad = snakemake("-n", "elo_table", "--config", "device=gpu", workdir=tmp_path)
    assert bad.returncode != 0 and "device: 'gpu' is not one of cpu, cuda, auto" in bad.stdout + bad.stderr


@needs_snakemake
def test_dry_run_of_the_smoke_config_shards_large_cells(tmp_path):
    result = snakemake("-n", "all", "--configfile", str(CONFIGS / "smoke.yaml"), workdir=tmp_path)
    assert result.returncode == 0, result.stderr
    # 25 cells: the 16 without MCTS have 12 games (shards 0-8, 8-4), the 9 with MCTS have 6.
    assert job_counts(result.stdout) == {"build_engine": 1, "match": 41, "train": 5, "merge": 25, "report": 5,
                                         "elo": 1, "games": 2, "provenance": 1, "all": 1}
    assert "results/matches/shards/random__baseline/8-4.json" in result.stdout
    # The smoke config replaced the default rather than being merged into it.
    assert "mcts2k" not in result.stdout


@needs_snakemake
def test_dry_run_of_the_distill_config(tmp_path):
    result = snakemake("-n", "elo_table", "--configfile", str(CONFIGS / "distill.yaml"), workdir=tmp_path)
    assert result.returncode == 0, result.stderr
    assert job_counts(result.stdout) == {"build_engine": 1, "match": 25, "train": 3, "merge": 25, "elo": 1,
                                         "provenance": 1, "report": 3, "games": 2, "elo_table": 1}


@needs_snakemake
def test_a_distilled_run_waits_for_its_teachers(tmp_path):
    config = tmp_path / "distill.yaml"
    config.write_text("players:\n  greedy: {kind: greedy}\n  d: {kind: net, run: d}\n"
                      "runs:\n  g: {}\n  c: {}\n"
                      "  d: {algorithm: distill, teacher_runs: {guerrilla: g, coin: c}, init_run: c}\n"
                      "matches: {games: 2}\n")
    result = snakemake("-n", "elo_table", "--configfile", str(config), workdir=tmp_path)
    assert result.returncode == 0, result.stderr
    inputs = {block.split("output: ")[1].split()[0]: block.split("input: ")[1].splitlines()[0]
              for block in result.stdout.split("rule train:")[1:]}
    # (The build record comes through the build_engine checkpoint: <TBD> until the build has run.)
    assert inputs["results/runs/d/final.bin"] == "<TBD>, results/runs/c/final.bin, results/runs/g/final.bin"


@needs_snakemake
def test_a_run_of_several_ranks_books_their_threads_and_slurm_tasks(tmp_path):
    """ranks 3: 2 threads per rank, and the SLURM executor's tasks and mpi resources (the job's
    gcpipe starts the ranks with srun); a run of one rank books what it always did."""
    config = tmp_path / "ranks.yaml"
    config.write_text("players:\n  p: {kind: net, run: p}\n  e: {kind: net, run: e}\n"
                      "runs:\n  p: {}\n  e: {algorithm: expert, ranks: 3}\nmatches: {games: 2}\n")
    result = snakemake("-n", "--cores", "8", "elo_table", "--configfile", str(config), workdir=tmp_path)
    assert result.returncode == 0, result.stderr
    jobs = {block.split("output: ")[1].split()[0]: block for block in result.stdout.split("rule train:")[1:]}
    three, one = jobs["results/runs/e/final.bin"], jobs["results/runs/p/final.bin"]
    assert "threads: 6\n" in three and "tasks=3, mpi=srun," in three
    assert "threads: 2\n" in one and "tasks=" not in one and "mpi=" not in one


@needs_snakemake
def test_a_search_player_of_a_run_waits_for_its_training(tmp_path):
    config = tmp_path / "search.yaml"
    config.write_text("players:\n  greedy: {kind: greedy}\n  s: {kind: search, run: cand, simulations: 4}\n"
                      "runs:\n  cand: {algorithm: expert, expert_iterations: 1}\nmatches: {games: 2}\n")
    result = snakemake("-n", "elo_table", "--configfile", str(config), workdir=tmp_path)
    assert result.returncode == 0, result.stderr
    inputs = {block.split("output: ")[1].split()[0]: block.split("input: ")[1].splitlines()[0]
              for block in result.stdout.split("rule match:")[1:]}
    assert inputs["results/matches/shards/s__greedy/0-2.json"] == "<TBD>, results/runs/cand/final.bin"
    assert inputs["results/matches/shards/greedy__s/0-2.json"] == "<TBD>, results/runs/cand/final.bin"


@needs_snakemake
def test_slurm_profile_dry_run(tmp_path):
    profile = tmp_path / "profiles"
    shutil.copytree(REPO / "profiles", profile)
    result = snakemake("--profile", str(profile / "slurm"), "-n", "elo_table", workdir=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "mem_mb=32000" in result.stdout and "runtime=2880" in result.stdout


@needs_snakemake
@pytest.mark.parametrize("config_text, message", [
    ("players:\n  random: {kind: random}\nmatches:\n  field: [random, ghost]\n",
     "matches.field[1]: unknown player 'ghost' (players: random)"),
    ("players:\n  p: {kind: net, path: nowhere.bin}\n",
     "players.p: checkpoint nowhere.bin does not exist"),
    ("matches:\n  games: 10\n", "missing key 'players'"),
    # The self-cell's files (N__N.jsonl) beyond the file-name limit: Snakemake stopped mid-DAG on them.
    (f"players:\n  random: {{kind: random}}\n  {'g' * 124}: {{kind: greedy}}\n",
     f"matches: the cell of players {'g' * 124!r} and {'g' * 124!r}: its file GUERRILLA__COIN.jsonl would have a "
     "name of 256 bytes, beyond the 255 a file name may have; shorten the player names"),
    (f"players: {{random: {{kind: random}}}}\nruns:\n  {'r' * 252}: {{}}\n",
     f"runs.{shown('r' * 252)}: its file logs/train/RUN.log would have a name of 256 bytes, beyond the 255 a file name "
     "may have; shorten the run's name"),
])
def test_bad_input_stops_the_dag_before_any_job(tmp_path, config_text, message):
    config = tmp_path / "bad.yaml"
    config.write_text(config_text)
    result = snakemake("--cores", "1", "elo_table", "--configfile", str(config), workdir=tmp_path)
    assert result.returncode != 0
    assert f"gcpipe: error: {config}: {message}" in result.stdout + result.stderr
    assert not (tmp_path / "results" / "engine").exists()


@needs_snakemake
def test_a_bad_config_override_is_named_as_one(tmp_path):
    # The line named only the --configfile, which held no such value.
    config = tmp_path / "good.yaml"
    config.write_text("players: {random: {kind: random}, greedy: {kind: greedy}}\n")
    result = snakemake("-n", "--cores", "1", "elo_table", "--configfile", str(config), "--config", "device=gpu",
                       workdir=tmp_path)
    assert result.returncode != 0
    assert (f"gcpipe: error: {config} with --config device: device: 'gpu' is not one of cpu, cuda, auto"
            in result.stdout + result.stderr)


@pytest.mark.skipif(os.environ.get("GCPIPE_SKIP_SMOKE_DAG") == "1",
                    reason="GCPIPE_SKIP_SMOKE_DAG=1 skips the smoke DAG end to end")
def test_smoke_dag_end_to_end(tmp_path, edited_engines):
    smoke = str(CONFIGS / "smoke.yaml")
    result = snakemake("--cores", "2", "elo_table", "--configfile", smoke, workdir=tmp_path, timeout=1200)
    assert result.returncode == 0, result.stderr[-4000:]
    results = tmp_path / "results"
    ratings = json.loads((results / "elo" / "ratings.json").read_text())
    field = ["random", "baseline", "mcts", "candidate", "search"]
    assert sorted({(e["player"], e["side"]) for e in ratings["ratings"]}) == sorted(
        (p, s) for p in field for s in ("guerrilla", "coin"))
    assert [e["player"] for e in json.loads((results / "elo" / "ordo.json").read_text())["ratings"]] != []
    for cell in match_plan(load_config(CONFIGS / "smoke.yaml")):
        lines = (results / "matches" / f"{cell.name}.jsonl").read_text().splitlines()
        assert [json.loads(line)["game"] for line in lines] == list(range(cell.games))
    for png in ["elo/ratings.png", "elo/crosstable.png", "elo/superiority.png", "elo/ordo.png",
                "runs/baseline/training.png", "runs/guerrilla-teacher/training.png", "runs/coin-teacher/training.png",
                "runs/candidate/training.png", "runs/expert/training.png"]:
        assert (results / png).read_bytes().startswith(b"\x89PNG")
    reviews = 0
    for cell in ("candidate__baseline", "baseline__candidate"):
        for view in ("guerrilla_win.svg", "coin_win.svg"):
            assert (results / "games" / cell / view).read_text().startswith("<svg ")
        for view in ("guerrilla_win.html", "coin_win.html"):   # reviewed by the cell's Guerrilla, a net
            page = (results / "games" / cell / view).read_text()
            reviewed = f'"analyst":"{cell.partition("__")[0]} (net ' in page
            assert page.startswith("<!DOCTYPE html>") and (reviewed or f'"title":"{cell}: no ' in page), view
            reviews += reviewed
    assert reviews > 0
    provenance = json.loads((results / "provenance.json").read_text())
    assert provenance["config"] == load_config(CONFIGS / "smoke.yaml")
    assert provenance["engine"]["cflags"]

    # The HTML report works right after the main job (docs/pipeline.md's order), with every part in it.
    report = snakemake("--report", "results/report.html", "--configfile", smoke, workdir=tmp_path, timeout=300)
    assert report.returncode == 0, report.stderr[-4000:]
    html = (results / "report.html").read_text()
    for name in ("training.png", "ratings.png", "superiority.png", "headtohead.csv", "ordo.csv",
                 "guerrilla_win.svg", "coin_win.svg", "guerrilla_win.html", "coin_win.html", "provenance.json"):
        assert name in html, name

    # Nothing changed: nothing to do (`all` is the main job's outputs).
    again = snakemake("-n", "all", "--configfile", smoke, workdir=tmp_path)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout

    # Same config, seeds and checkpoints: the ledgers, tables and pictures come back byte for byte.
    # Replayed: a cell of every player kind (net, search, MCTS, random), sharded and not; the
    # tables and pictures from them. (All 25 cells again would double the suite's longest test.)
    def digests():
        return {str(p.relative_to(results)): hashlib.sha256(p.read_bytes()).hexdigest()
                for folder in ("matches", "elo", "games") for p in sorted((results / folder).rglob("*.*"))
                if "shards" not in p.parts}
    before = digests()
    for cell in ("candidate__baseline", "search__mcts", "random__candidate"):
        shutil.rmtree(results / "matches" / "shards" / cell)
        for suffix in (".json", ".jsonl"):
            (results / "matches" / f"{cell}{suffix}").unlink()
    for folder in ("elo", "games"):
        shutil.rmtree(results / folder)
    rerun = snakemake("--cores", "2", "elo_table", "--configfile", smoke, workdir=tmp_path, timeout=1200)
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    # Shards of 8: the two 12-game cells play two each, the 6-game MCTS cell one.
    assert {rule: job_counts(rerun.stderr)[rule] for rule in ("match", "merge", "elo")} == {"match": 5, "merge": 3, "elo": 1}
    assert digests() == before

    # A retrained network supersedes its cells.  The plan for a reseeded candidate retrains it and the
    # expert run that starts from it, and plays every shard of their cells again.  The rerun for a
    # reseeded expert (fewer cells than the candidate's) retrains only it and plays its cells afresh
    # over the old shard ledgers (they were refused before --replace-others).
    def reseed(run, seed, name):
        config = yaml.safe_load((CONFIGS / "smoke.yaml").read_text())
        config["runs"][run]["seed"] = seed
        (tmp_path / name).write_text(yaml.safe_dump(config, sort_keys=False))
        return tmp_path / name

    def cells_of(config, *players):
        return [cell for cell in match_plan(load_config(config)) if set(players) & {cell.guerrilla, cell.coin}]

    candidate = reseed("candidate", 43, "candidate.yaml")
    plan = snakemake("-n", "elo_table", "--configfile", str(candidate), workdir=tmp_path)
    shard_size = load_config(candidate)["matches"]["shard_size"]
    cells = cells_of(candidate, "candidate", "search")
    assert {rule: job_counts(plan.stdout)[rule] for rule in ("train", "match", "merge")} == {
        "train": 2, "match": sum(-(-cell.games // shard_size) for cell in cells), "merge": len(cells)}
    reseeded = reseed("expert", 9, "reseeded.yaml")
    retrained = snakemake("--cores", "2", "elo_table", "--configfile", str(reseeded), workdir=tmp_path, timeout=1200)
    assert retrained.returncode == 0, retrained.stderr[-4000:]
    assert job_counts(retrained.stderr)["train"] == 1
    after = digests()
    changed = {name for name in before if before[name] != after[name] and name.endswith(".jsonl")}
    assert changed == {f"matches/{cell.name}.jsonl" for cell in cells_of(reseeded, "search")}

    # An engine change.  The DAG run from an edited copy of the checkout (tests/engines.py; the
    # edit's new date, as an edit leaves it): its build job, then the plan.  The greedy bot's
    # tie-break changes games: every training and every game is planned again.
    def with_engine(copy, *args):
        if args == ("build_engine",):
            (copy / BOTS).touch()
        env = environment(copy, CC=str(edited_engines["compiler"]))
        result = snakemake("--cores", "2", *args, "--configfile", str(reseeded), workdir=tmp_path, env=env,
                           timeout=1200, snakefile=copy / "Snakefile")
        assert result.returncode == 0, result.stderr[-4000:]
        return result

    tie_break, neutral = edited_engines["tie_break"], edited_engines["neutral"]
    with_engine(tie_break, "build_engine")
    plan = with_engine(tie_break, "-n", "elo_table")
    assert {rule: job_counts(plan.stdout)[rule] for rule in ("train", "match")} == {"train": 5, "match": 41}
    assert "Params have changed since last execution" in plan.stdout
    # One shard played for real: its ledger, of the engine before, is played again by this one.
    shard = results / "matches" / "shards" / "random__mcts" / "0-6.jsonl"
    with_engine(tie_break, str(shard.with_suffix(".json").relative_to(tmp_path)))
    new = json.loads((tie_break / "build.json").read_text())["fingerprint"]
    assert {record["engine"] for record in read_ledger(shard)} == {new}
    assert "playing afresh" in (results / "logs" / "match" / "random__mcts" / "0-6.log").read_text()
    # A comment and reordered declarators change no game: the build runs, and of the rest only the
    # shard just played by the other engine (and what reads it) runs again, to the same bytes.
    with_engine(neutral, "build_engine")
    plan = with_engine(neutral, "-n", "elo_table")
    assert job_counts(plan.stdout) == {"match": 1, "merge": 1, "elo": 1, "provenance": 1, "elo_table": 1}
    with_engine(neutral, "elo_table")
    assert digests() == after



@needs_snakemake
def test_every_run_reruns_what_a_killed_run_left_incomplete(tmp_path):
    """After kill -9 of a local Snakemake run, --unlock and the README's plain command stopped with
    IncompleteFilesException.  The workflow profile, which Snakemake applies to every run of the
    Snakefile, sets --rerun-incomplete (safe: trainings and matches continue from what they saved)."""
    assert yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text()) == {"rerun-incomplete": True}
    result = snakemake("-n", "elo_table", "--configfile", str(CONFIGS / "smoke.yaml"), workdir=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"Using workflow specific profile {REPO / 'profiles' / 'default'} for setting" in result.stderr
