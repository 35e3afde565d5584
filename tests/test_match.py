"""Match runner: players, seeds (rules.md §8), network players (§9) through the player protocol,
ledger resume after kill -9, worker-count invariance and the match/tournament commands
(compare: test_compare.py)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from gcpipe.cli import app
from gcpipe.engine import SIDE_NAMES, Game, GameBatch
from gcpipe.engine.bots import Bot, BotSpec
from gcpipe.errors import UserError
from gcpipe.match import game_seed, match, run_match
from gcpipe.match.ledger import read_ledger
from gcpipe.match.replay import play_game, replay_record
from gcpipe.nn.checkpoint import save
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.nn.player import NetworkPlayer
from gcpipe.players import PlayerBook, define, parse_spec, play_games

from processes import children

GCPIPE = str(Path(sys.executable).parent / "gcpipe")


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    """Two random standard-5c checkpoints and one legacy (actor-only) checkpoint."""
    folder = tmp_path_factory.mktemp("nets")
    paths = {}
    for name, layout, seed in (("alpha", "5c", 1), ("beta", "5c", 2), ("old", "legacy", 3)):
        model = MinGRUPolicy(128, 2, bias=layout == "legacy", generator=torch.Generator().manual_seed(seed))
        if layout == "legacy":
            with torch.no_grad():
                model.decoder.weight[-1].zero_()   # legacy files have no value head to keep
        paths[name] = folder / f"{name}.bin"
        save(model, paths[name], layout)
    return paths


# -- seeds and players ------------------------------------------------------------------------
def test_game_seed_formula():
    assert game_seed(0, 0, 0) == 1
    # ((0x9E3779B9 * ((3*16 + 1)*100003 + 7)) mod 2^32) | 1
    assert game_seed(3, 1, 7) == (2654435769 * 4900154) % 2**32 | 1 == 3098996971
    assert game_seed(1, 0, 99) == 999915323
    assert game_seed(15, 15, 123456) == 2191602805


def test_short_specs():
    random_player = parse_spec("random")
    assert (random_player.name, random_player.identity, random_player.roster) == ("random", {"kind": "random"}, None)
    mcts = parse_spec("mcts:2000")
    assert mcts.name == "mcts2000"
    assert mcts.identity == {"kind": "mcts", "iterations": 2000, "exploration": 0.7, "rollout": "greedy"}
    assert parse_spec("mcts:2000:0.7:greedy").identity == mcts.identity
    assert parse_spec("mcts:50:0.5:random").name == "mcts50-c0.5-random"
    named = parse_spec("strong=mcts:10000@4")
    assert (named.name, named.roster, named.settings["iterations"]) == ("strong", 4, 10000)
    assert parse_spec("mcts:10::random").settings == {"iterations": 10, "exploration": 0.7, "rollout": "random"}
    # A config entry gives the same player (and the same exploration type) as the spec.
    entry = define("m", {"kind": "mcts", "iterations": 2000, "exploration": 1})
    assert entry.identity == parse_spec("mcts:2000:1.0").identity
    assert entry.identity["exploration"] == 1.0 and isinstance(entry.identity["exploration"], float)


def test_the_commands_help_lists_every_kind_s_short_spec():
    from gcpipe.cli import _PLAYER_HELP
    from gcpipe.players import KINDS

    listed = _PLAYER_HELP.split(": ", 1)[1].split("; ")[0]
    assert listed == ", ".join(cls.spec_usage() for cls in KINDS.values())


def test_net_spec_identity(nets):
    player = parse_spec(f"net:{nets['alpha']}")
    assert player.name == "alpha"
    assert player.identity["kind"] == "net" and player.identity["layout"] == "5c"
    assert player.identity["full_turn"] is True and len(player.identity["sha256"]) == 64
    assert parse_spec(f"net:{nets['old']}").identity["full_turn"] is False


@pytest.mark.parametrize("spec, message", [
    ("foo", "unknown player 'foo': not a config player; short specs are random, greedy, "
            "mcts[:ITERATIONS[:EXPLORATION[:ROLLOUT]]], net:PATH, search:PATH:SIMULATIONS, "
            "openspiel:mcts[:MAX_SIMULATIONS[:UCT_C[:N_ROLLOUTS]]]"),
    ("random:3", "player spec 'random:3': random takes no settings"),
    ("greedy:", "player spec 'greedy:': greedy takes no settings"),
    ("mcts:0", "player spec 'mcts:0': iterations: 0 is less than the minimum of 1"),
    ("mcts:20000000", "player spec 'mcts:20000000': iterations: 20000000 is greater than the maximum of 10000000"),
    ("mcts:abc", "player spec 'mcts:abc': iterations must be a whole number, got 'abc'"),
    ("mcts:100:x", "player spec 'mcts:100:x': exploration must be a number, got 'x'"),
    ("mcts:100:-1", "player spec 'mcts:100:-1': exploration: -1.0 is less than the minimum of 0"),
    ("mcts:100:nan", "player spec 'mcts:100:nan': exploration: must be a finite number, got nan"),
    ("mcts:100:inf", "player spec 'mcts:100:inf': exploration: must be a finite number, got inf"),
    ("mcts:100:0.7:smart", "player spec 'mcts:100:0.7:smart': rollout: 'smart' is not one of random, greedy"),
    ("mcts:1:2:random:4", "player spec 'mcts:1:2:random:4': mcts takes at most ITERATIONS:EXPLORATION:ROLLOUT"),
    ("net:", "player spec 'net:': write net:PATH"),
    ("a__b=greedy", "player name 'a__b' is not usable: letters, digits, '.', '-' and single '_', starting with "
                    "a letter or digit"),
])
def test_bad_specs_fail_with_one_line(spec, message):
    with pytest.raises(UserError) as caught:
        parse_spec(spec)
    assert str(caught.value) == message


def test_missing_checkpoint_is_named():
    with pytest.raises(UserError, match=r"^player spec 'net:/no/such/file.bin': checkpoint /no/such/file.bin does not exist$"):
        parse_spec("net:/no/such/file.bin")


def test_wrong_size_and_sha_mismatch(tmp_path, nets):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\0" * 1000)
    with pytest.raises(UserError, match="1000 bytes"):
        parse_spec(f"net:{junk}")
    with pytest.raises(UserError, match=r"^players\.p: checkpoint .* has SHA-256 [0-9a-f]{64}, expected 0{64}$"):
        define("p", {"kind": "net", "path": str(nets["alpha"]), "sha256": "0" * 64})


def test_net_player_of_a_training_run(tmp_path, nets, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="does not exist"):
        define("base", {"kind": "net", "run": "r1"})
    (tmp_path / "results" / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "results" / "runs" / "r1" / "final.bin").write_bytes(nets["alpha"].read_bytes())
    player = define("base", {"kind": "net", "run": "r1", "full_turn": False})
    assert player.identity == {"kind": "net", "path": "results/runs/r1/final.bin",
                               "sha256": parse_spec(f"net:{nets['alpha']}").identity["sha256"], "layout": "5c",
                               "full_turn": False}


def test_roster_positions_of_a_field():
    book = PlayerBook({"random": {"kind": "random"}, "greedy": {"kind": "greedy"},
                       "mcts2k": {"kind": "mcts", "iterations": 2000, "roster": 3}})
    field = book.field(["mcts2k", "greedy", "mcts:5", "mcts2k"])
    assert [(p.name, p.roster) for p in field] == [("mcts2k", 3), ("greedy", 1), ("mcts5", 2)]
    assert [p.roster for p in PlayerBook().field(["greedy", "random"])] == [0, 1]
    with pytest.raises(UserError, match="both named"):
        PlayerBook().field(["x=greedy", "x=random"])


def test_config_file_players(tmp_path):
    from gcpipe.config import player_book

    config = tmp_path / "config.yaml"
    config.write_text("players:\n  random: {kind: random}\n  m: {kind: mcts, iterations: 10, roster: 7}\n")
    book = player_book(config)
    assert [(p.name, p.roster, p.kind) for p in book.field(["m", "random"])] == [("m", 7, "mcts"), ("random", 0, "random")]


# -- network players ---------------------------------------------------------------------------
def _replay(seed: int, guerrilla, coin) -> Game:
    """One game played by hand from rules.md §8-§9 with Game, NetworkPlayer (one slot) and Bot:
    the reference for the players' protocol implementation and the batched loop."""
    game = Game(seed)
    sides = (guerrilla, coin)
    for side in sides:
        if isinstance(side, NetworkPlayer):
            side.start(1)
    while not game.is_terminal():
        mover, waiter = sides[game.current_player()], sides[1 - game.current_player()]
        obs = game.observation()[None]
        if isinstance(waiter, NetworkPlayer) and waiter.full_turn:
            waiter.forward(np.zeros(1, np.int64), obs)          # output discarded
        if isinstance(mover, NetworkPlayer):
            action = game.sample_action(mover.forward(np.zeros(1, np.int64), obs)[0])
        else:
            action = mover.choose(game)
        game.apply_action(action)
    return game


@pytest.mark.parametrize("net_side, bot_spec, games", [("guerrilla", "greedy", 24), ("coin", "mcts:20", 6)])
def test_net_vs_bot_games_replay_from_their_seeds(tmp_path, nets, net_side, bot_spec, games):
    net_spec = f"net:{nets['alpha']}"
    specs = (net_spec, bot_spec) if net_side == "guerrilla" else (bot_spec, net_spec)
    result = match(*specs, games, out=tmp_path / "cell.jsonl", workers=1, progress=False)
    records = read_ledger(result.ledger)
    assert [r["game"] for r in records] == list(range(games))
    # Two references: each game by hand from the rules with Game, NetworkPlayer and Bot (_replay),
    # and one game at a time through the protocol (gcpipe.match.replay).
    guerrilla, coin = PlayerBook().field(list(specs))
    bot_player = parse_spec(bot_spec)
    net, bot = NetworkPlayer(str(nets["alpha"])), Bot(BotSpec(bot_player.kind, **bot_player.settings))
    for record in records:
        assert record["seed"] == game_seed(0, 1, record["game"])
        game = _replay(record["seed"], *((net, bot) if net_side == "guerrilla" else (bot, net)))
        assert (SIDE_NAMES[game.winner], game.plies, game.end_reason) == \
               (record["winner"], record["plies"], record["end"])
        assert play_game(guerrilla, coin, record["seed"]).agrees_with(record)
        assert replay_record(record).agrees_with(record)
    assert result.summary["games"] == games


def test_results_do_not_depend_on_slots(nets):
    guerrilla, coin = PlayerBook().field([f"net:{nets['alpha']}", f"net:{nets['old']}"])
    seeds = np.array([game_seed(0, 1, g) for g in range(12)], np.uint32)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # as in the runner's workers
    try:
        outcomes = [tuple(a.tolist() for a in vars(play_games(guerrilla.runtime(), coin.runtime(), seeds, slots)).values())
                    for slots in (1, 5, 12)]
    finally:
        torch.set_num_threads(threads)
    assert outcomes[0] == outcomes[1] == outcomes[2]
    assert len(set(outcomes[0][1])) > 3      # the games differ from each other


def test_full_turn_nets_step_every_ply_actor_only_nets_their_own(tmp_path, nets, monkeypatch):
    steps = {"forward": 0, "moves": 0}
    forward, advance, sample = NetworkPlayer.forward, NetworkPlayer.advance, GameBatch.sample

    def counting(step):
        def counted(self, slots, obs):
            steps["forward"] += len(slots)
            return step(self, slots, obs)
        return counted

    def counting_sample(self, idx, logits):
        steps["moves"] += len(idx)
        return sample(self, idx, logits)

    monkeypatch.setattr(NetworkPlayer, "forward", counting(forward))
    monkeypatch.setattr(NetworkPlayer, "advance", counting(advance))
    monkeypatch.setattr(GameBatch, "sample", counting_sample)
    for name, full_turn in (("alpha", True), ("old", False)):
        steps.update(forward=0, moves=0)
        result = match(f"net:{nets[name]}", "greedy", 10, out=tmp_path / f"{name}.jsonl", workers=1, progress=False)
        total_plies = sum(r["plies"] for r in read_ledger(result.ledger))
        assert result.summary["guerrilla_id"]["full_turn"] is full_turn
        if full_turn:
            assert steps["forward"] == total_plies          # the net steps on every ply
        else:
            assert steps["forward"] == steps["moves"] < total_plies   # only on its own moves


# -- ledgers: worker invariance, resume, mismatches ------------------------------------------------
def test_worker_count_does_not_change_the_ledger(tmp_path, nets):
    # The search cells: a game's plies must not depend on the games sharing its batch (each player
    # observes the position as it stands before any move of the ply).
    for guerrilla, coin, games in (("random", "greedy", 300), (f"net:{nets['alpha']}", f"net:{nets['beta']}", 60),
                                   (f"search:{nets['alpha']}:4", f"net:{nets['old']}", 16),
                                   ("greedy", f"search:{nets['beta']}:4", 16)):
        one = match(guerrilla, coin, games, out=tmp_path / "w1" / "cell.jsonl", workers=1, progress=False)
        two = match(guerrilla, coin, games, out=tmp_path / "w2" / "cell.jsonl", workers=2, progress=False)
        assert one.ledger.read_bytes() == two.ledger.read_bytes()
        assert one.summary_path.read_bytes() == two.summary_path.read_bytes()
        for folder in ("w1", "w2"):
            for path in (tmp_path / folder).iterdir():
                path.unlink()


def _match_command(out: Path, workers: int) -> list[str]:
    # MCTS 300, not 60: the 30 games last about a second, time for the kill test to see the first
    # four written and kill the match before the last (at 60 they took a fifth of that).
    return [GCPIPE, "match", "mcts:300", "greedy", "--games", "30", "--workers", str(workers),
            "--out", str(out), "--quiet"]


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie lingers where nothing reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_resume_after_kill_is_byte_identical(tmp_path):
    reference = tmp_path / "reference" / "cell.jsonl"
    subprocess.run(_match_command(reference, 1), check=True, capture_output=True)
    assert len(read_ledger(reference)) == 30

    resumed = tmp_path / "resumed" / "cell.jsonl"
    process = subprocess.Popen(_match_command(resumed, 2), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (resumed.exists() and resumed.read_bytes().count(b"\n") >= 4):
            assert process.poll() is None and time.monotonic() < deadline, "the match ended before it was killed"
            time.sleep(0.005)
        workers = children(process.pid)
        os.kill(process.pid, signal.SIGKILL)     # the match process only: its workers must follow it
        process.wait()
        deadline = time.monotonic() + 10
        while any(map(_running, workers)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(workers) == 2 and not any(map(_running, workers))
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)   # whatever is left of this test's process group
        except ProcessLookupError:
            pass
        process.wait()
    killed_at = resumed.read_bytes().count(b"\n")
    assert 4 <= killed_at < 30
    with open(resumed, "ab") as handle:       # what a kill in the middle of a write leaves
        handle.write(b'{"cell":"mcts300__greedy","guerr')
    finished = subprocess.run(_match_command(resumed, 2), check=True, capture_output=True, text=True)
    assert resumed.read_bytes() == reference.read_bytes()
    assert resumed.with_suffix(".json").read_bytes() == reference.with_suffix(".json").read_bytes()
    assert "30 games" in finished.stdout

    again = subprocess.run(_match_command(resumed, 1), check=True, capture_output=True, text=True)
    assert again.stdout == finished.stdout
    assert resumed.read_bytes() == reference.read_bytes()


def test_extending_a_cell_appends_the_missing_games(tmp_path):
    guerrilla, coin = PlayerBook().field(["greedy", "random"])
    out = tmp_path / "cell.jsonl"
    assert run_match(guerrilla, coin, 50, out=out, workers=1, progress=False).played == 50
    assert run_match(guerrilla, coin, 80, out=out, workers=2, progress=False).played == 30
    assert run_match(guerrilla, coin, 80, out=out, workers=2, progress=False).played == 0
    whole = tmp_path / "whole.jsonl"
    run_match(guerrilla, coin, 80, out=whole, workers=1, progress=False)
    assert out.read_bytes() == whole.read_bytes()


def test_a_ledger_of_other_players_or_seeds_is_refused(tmp_path):
    out = tmp_path / "cell.jsonl"
    match("greedy", "random", 10, out=out, workers=1, progress=False)
    with pytest.raises(UserError, match="other roster positions"):
        match("greedy", "random", 20, out=out, workers=1, roster_g=5, progress=False)
    with pytest.raises(UserError, match="holds cell greedy__random"):
        match("greedy", "greedy", 20, out=out, workers=1, progress=False)
    with pytest.raises(UserError, match="another guerrilla player"):
        match("greedy=mcts:5", "random", 20, out=out, workers=1, progress=False)


def test_replace_others_plays_a_superseded_ledger_afresh(tmp_path, capsys):
    # The DAG's case: a shard ledger of a network that has since been retrained.
    out, fresh = tmp_path / "cell.jsonl", tmp_path / "fresh.jsonl"
    match("greedy", "random", 10, out=out, workers=1, progress=False)
    result = match("greedy=mcts:5", "random", 6, out=out, workers=1, progress=False, replace_others=True)
    assert result.played == 6
    assert "playing afresh: " in capsys.readouterr().err
    match("greedy=mcts:5", "random", 6, out=fresh, workers=1, progress=False)
    assert out.read_bytes() == fresh.read_bytes()
    assert out.with_suffix(".json").read_bytes() == fresh.with_suffix(".json").read_bytes()
    # Its own games are kept as ever: a second call plays none.
    assert match("greedy=mcts:5", "random", 6, out=out, workers=1, progress=False, replace_others=True).played == 0


# -- commands ------------------------------------------------------------------------------------
def test_tournament_prints_the_published_random_greedy_cells(tmp_path):
    result = CliRunner().invoke(app, ["tournament", "random", "greedy", "--games", "100", "--quiet",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.split("\n")[:3] == ["Guerrilla / COIN  random  greedy",
                                             "random              8-92   0-100",
                                             "greedy              98-2   33-67"]
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == [
        "greedy__greedy.jsonl", "greedy__random.jsonl", "random__greedy.jsonl", "random__random.jsonl"]


def test_cli_errors_are_one_line(tmp_path):
    result = CliRunner().invoke(app, ["match", "greedy", "nonsense", "--games", "5", "--out", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "gcpipe: error: unknown player 'nonsense': not a config player; short specs are random, greedy, "
        "mcts[:ITERATIONS[:EXPLORATION[:ROLLOUT]]], net:PATH, search:PATH:SIMULATIONS, "
        "openspiel:mcts[:MAX_SIMULATIONS[:UCT_C[:N_ROLLOUTS]]]"]
    assert not (tmp_path / "x.jsonl").exists()


def test_ctrl_c_is_one_line_and_exit_code_130(monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("gcpipe.match.match", interrupted)
    result = CliRunner().invoke(app, ["match", "greedy", "random", "--games", "5"])
    assert result.exit_code == 130
    assert result.output.strip().splitlines() == ["gcpipe: interrupted"]
