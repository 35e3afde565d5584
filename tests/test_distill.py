"""Distillation (gcpipe/train/distill.py): each ply's target is the mover's teacher's policy, the
moves are the teachers' (or the student's) own samples, the student learns, a run resumes
exactly, and settings or teachers that cannot work are one line."""
import csv
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gcpipe.engine import COIN, GUERRILLA, NO_SIDE
from gcpipe.errors import UserError
from gcpipe.nn import checkpoint as ckpt
from gcpipe.nn.inference import CompiledNet, net_arrays
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.nn.player import NetworkPlayer
from gcpipe.players import define
from gcpipe.players import play_games as play_match_games
from gcpipe.players.network import NetPlayer
from gcpipe.search.player import SearchPlayer
from gcpipe.search.settings import make_settings
from gcpipe.train.config import make_config
from gcpipe.train.distill import Distillation, TeacherExpert, legal_softmax
from gcpipe.train.expert import game_seed, play_games
from gcpipe.train.run import train
from devices import DEVICES
from test_expert import assert_resumed_run_matches_an_uninterrupted_one

DISTILL = dict(algorithm="distill", teacher_runs={"guerrilla": "tg", "coin": "tc"}, selfplay_games=16,
               replay_games=32, expert_minibatch_rows=8, checkpoint_interval=1)
GREEDY = (define("greedy", {"kind": "greedy"}),) * 2

pytestmark = pytest.mark.usefixtures("one_thread")   # tests/conftest.py


def _teacher(seed: int, sharpness: float = 4.0) -> MinGRUPolicy:
    """A fresh net whose action logits are scaled up: a sharp policy, unlike a fresh student's."""
    model = MinGRUPolicy(generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        model.decoder.weight[:255] *= sharpness
    return model


@pytest.fixture
def teachers(tmp_path, monkeypatch):
    """Teacher runs tg (Guerrilla) and tc (COIN) in tmp_path/results/runs, the working folder."""
    monkeypatch.chdir(tmp_path)
    models = (_teacher(11), _teacher(12))
    for name, model in zip(("tg", "tc"), models):
        (tmp_path / "results" / "runs" / name).mkdir(parents=True)
        ckpt.save(model, tmp_path / "results" / "runs" / name / "final.bin", "5c")
    return models


def test_legal_softmax_matches_a_hand_computation():
    logits = np.zeros((1, 256), np.float32)
    logits[0, :3] = [0.0, math.log(2.0), 50.0]
    legal = np.zeros((1, 256), np.uint8)
    legal[0, :2] = 1                               # action 2 is illegal, however large its logit
    policy = legal_softmax(logits, legal)
    assert policy[0, :3].tolist() == pytest.approx([1 / 3, 2 / 3, 0.0], abs=1e-7)
    assert policy[0, 2:].sum() == 0.0 and policy.dtype == np.float32
    # exp(0) = 1 exactly, so two equal legal logits give exactly a half each; a row with no legal
    # action is all zero.
    both = np.zeros((2, 256), np.uint8)
    both[0, [7, 9]] = 1
    halves = legal_softmax(np.full((2, 256), 3.5, np.float32), both)
    assert halves[0, [7, 9]].tolist() == [0.5, 0.5] and halves[0].sum() == 1.0 and not halves[1].any()


def _replayed_targets(game, models) -> np.ndarray:
    """Each ply's policy of the mover's teacher, every teacher stepping on every ply of `game`."""
    players = [NetworkPlayer.from_net(CompiledNet(model), True) for model in models]
    for player in players:
        player.start(1)
    targets = np.zeros_like(game.targets)
    for t in range(game.plies):
        for side, player in zip((GUERRILLA, COIN), players):
            logits = player.forward(np.array([0]), game.obs[t:t + 1])
            if game.movers[t] == side:
                targets[t] = legal_softmax(logits, game.masks[t:t + 1])[0]
    return targets


@pytest.mark.parametrize("student_plays", [False, True])
def test_targets_are_the_movers_teacher_and_moves_are_the_players_own(student_plays):
    """Each ply's target is the policy of the mover's teacher given the whole game so far; the games
    are those of the teachers against each other (or of the student against itself), move for move."""
    models = (_teacher(11), _teacher(12))
    student = MinGRUPolicy(generator=torch.Generator().manual_seed(13))
    seeds = np.array([game_seed(5, 0, j) for j in range(6)], np.uint32)
    expert = TeacherExpert(tuple((net_arrays(model), True, None) for model in models),
                           net_arrays(student) if student_plays else None)
    games = play_games(expert, seeds, np.full(6, NO_SIDE), GREEDY)
    for game in games:
        assert game.searched.all()
        np.testing.assert_array_equal(game.targets, _replayed_targets(game, models))
    movers = (student, student) if student_plays else models
    players = [NetPlayer(NetworkPlayer.from_net(CompiledNet(model), True)) for model in movers]
    alone = play_match_games(*players, seeds)
    assert [g.plies for g in games] == alone.plies.tolist()
    assert [g.outcome > 0 for g in games] == (alone.winners == GUERRILLA).tolist()


def test_a_search_teacher_plays_and_labels_as_the_search_player():
    """With a search teaching the Guerrilla (expert iteration's PUCT, moves drawn in proportion to
    the visits), the games are the search player's against the COIN teacher through the match loop,
    move for move; each Guerrilla ply's target is the search's visit distribution over that ply's
    legal actions (whole visits of 16 simulations) and each COIN ply's the COIN teacher's policy,
    the COIN teacher stepping on every ply as if the search were a net."""
    models = (_teacher(11), _teacher(12))
    search = make_settings(simulations=16, variant="puct", value="outcome", temperature=1.0)
    seeds = np.array([game_seed(5, 0, j) for j in range(6)], np.uint32)
    expert = TeacherExpert(((net_arrays(models[0]), True, search), (net_arrays(models[1]), True, None)))
    games = play_games(expert, seeds, np.full(6, NO_SIDE), GREEDY)
    for game in games:
        coin = game.movers == COIN
        np.testing.assert_array_equal(game.targets[coin], _replayed_targets(game, models)[coin])
        visits = game.targets[~coin] * 16
        np.testing.assert_allclose(visits, np.round(visits), atol=1e-4)
        np.testing.assert_allclose(visits.sum(axis=1), 16, atol=1e-4)
        assert not (game.targets[~coin] * ~game.masks[~coin]).any()
    alone = play_match_games(SearchPlayer.from_net(CompiledNet(models[0]), search),
                             NetPlayer(NetworkPlayer.from_net(CompiledNet(models[1]), True)), seeds)
    assert [g.plies for g in games] == alone.plies.tolist()
    assert [g.outcome > 0 for g in games] == (alone.winners == GUERRILLA).tolist()


def test_bot_plies_carry_no_target_and_every_net_still_steps(teachers):
    config = make_config(dict(DISTILL, selfplay_games=8, bot_fraction=1.0, opponent="greedy",
                              distill_student_fraction=0.5))
    trainer = Distillation(config, tuple(ckpt.Checkpoint.from_model(m) for m in teachers))
    trainer.collect()
    assert [g.search_side for g in trainer.games] == [GUERRILLA, COIN] * 4
    for game in trainer.games:
        assert (game.searched == (game.movers == game.search_side)).all()
        expected = _replayed_targets(game, teachers)
        np.testing.assert_array_equal(game.targets[game.searched], expected[game.searched])


def test_games_do_not_depend_on_the_worker_count(teachers):
    config = make_config(dict(DISTILL, bot_fraction=0.25, opponent="greedy"))
    nets = tuple(ckpt.Checkpoint.from_model(m) for m in teachers)
    one, two = Distillation(config, nets, workers=1), Distillation(config, nets, workers=2)
    one.collect()
    two.collect()
    assert [g.obs.tobytes() + g.targets.tobytes() for g in one.games] == \
        [g.obs.tobytes() + g.targets.tobytes() for g in two.games]


@pytest.mark.parametrize("device", DEVICES)
def test_the_student_learns_its_teachers_in_a_ci_sized_run(teachers, tmp_path, device):
    """Twelve small iterations take the student's KL divergence from its teachers' policies (the
    log's approx_kl) to under a tenth of the fresh student's."""
    config = make_config(dict(DISTILL, expert_iterations=12, selfplay_games=64, replay_games=128,
                              expert_minibatch_rows=16, checkpoint_interval=12, device=device))
    train("ci", config, tmp_path / "ci")
    with open(tmp_path / "ci" / "metrics.csv") as handle:
        kl = [float(row["approx_kl"]) for row in csv.DictReader(handle)]
    assert kl[-1] < 0.1 * kl[0], kl


@pytest.mark.parametrize("device", DEVICES)
def test_resumed_run_matches_an_uninterrupted_one_and_another_teacher_trains_again(teachers, tmp_path, device):
    settings = dict(DISTILL, expert_iterations=4, device=device)
    assert_resumed_run_matches_an_uninterrupted_one(settings, tmp_path)
    before = (tmp_path / "straight" / "final.bin").read_bytes()
    ckpt.save(_teacher(14), tmp_path / "results" / "runs" / "tc" / "final.bin", "5c")
    lines = []
    train("x", make_config(settings), tmp_path / "straight", echo=lines.append)
    assert any("a teacher checkpoint" in line for line in lines), lines
    assert (tmp_path / "straight" / "final.bin").read_bytes() != before


def test_a_missing_teacher_is_one_line_before_any_step(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="run x, teacher_runs.guerrilla: checkpoint results/runs/tg/final.bin does not"):
        train("x", make_config(dict(DISTILL, expert_iterations=1)), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_search_teacher_without_value_rows_is_one_line_before_any_step(teachers, tmp_path):
    with pytest.warns(ckpt.CheckpointWarning, match="layout legacy has no value head"):
        ckpt.save(_teacher(14), tmp_path / "results" / "runs" / "tc" / "final.bin", "legacy")
    config = make_config(dict(DISTILL, expert_iterations=1, teacher_search={"guerrilla": False, "coin": True}))
    with pytest.raises(UserError, match="run x, teacher_search.coin: a search needs a standard 5c teacher with value "
                                        "rows; run tc's final.bin has layout legacy"):
        train("x", config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("settings, message", [
    (dict(teacher_runs={"guerrilla": "tg", "coin": ""}), "needs a teacher for each side; set 'teacher_runs' coin"),
    (dict(teacher_runs={"guerrilla": "", "coin": ""}), "set 'teacher_runs' guerrilla and coin to a run's name"),
    (dict(teacher_runs={"guerrilla": "tg"}), "teacher_runs: missing key 'coin'"),
    (dict(expert_value_mix=0.5), "'expert_value_mix' mixes in a search's value"),
    (dict(distill_student_fraction=1.5), "distill_student_fraction: 1.5 is greater than the maximum of 1"),
    (dict(layout="legacy"), "algorithm 'distill' trains both value rows, which layout legacy"),
    (dict(teacher_search={"guerrilla": True}), "teacher_search: missing key 'coin'"),
    (dict(teacher_search={"guerrilla": 1, "coin": False}), "teacher_search.guerrilla"),
])
def test_settings_that_cannot_work_are_refused(settings, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_config(dict(DISTILL, **settings))


def test_distill_kl_is_zero_on_the_side_whose_teacher_the_student_is(teachers, tmp_path):
    """benchmarks/distill_kl.py with the COIN teacher itself as the student: no divergence on the
    COIN's plies (every top move the teacher's), a large one on the Guerrilla's (another net)."""
    runs = tmp_path / "results" / "runs"
    done = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "benchmarks" / "distill_kl.py"),
                           str(runs / "tc" / "final.bin"), "--guerrilla-teacher", str(runs / "tg" / "final.bin"),
                           "--coin-teacher", str(runs / "tc" / "final.bin"), "--games", "8"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = dict((side, (float(kl), float(top))) for side, kl, top in
                 re.findall(r"^(\w+): KL ([\d.]+) nats per ply, teacher's top move ([\d.]+) %", done.stdout, re.M))
    assert found["COIN"] == (0.0, 100.0)
    assert found["Guerrilla"][0] > 1.0 and found["Guerrilla"][1] < 25.0   # 5.66 nats, 7.3 % here
