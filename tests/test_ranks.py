"""One training run over several processes (gcpipe/train/ranks.py): expert iteration,
distillation and PPO over several ranks on this machine write the bytes of one process; a rank killed mid-run
stops the run with one line and the rerun ends with the bytes of a run never stopped; launches
that cannot work are one line before any game."""
import csv
import io
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from gcpipe.errors import UserError
from gcpipe.train.config import make_config
from gcpipe.train.ranks import Launch, first_node, launch_from, srun_allocation
from gcpipe.train.run import train
from test_distill import DISTILL, teachers  # noqa: F401 (a fixture)
from test_expert import EXPERT

pytestmark = pytest.mark.usefixtures("one_thread")   # tests/conftest.py

TIMINGS = ("wall_time", "sps", "rollout_seconds", "update_seconds")


def _rows(folder: Path) -> list[dict]:
    rows = list(csv.DictReader((folder / "metrics.csv").read_text().splitlines()))
    return [{k: v for k, v in row.items() if k not in TIMINGS} for row in rows]


def _trainer_state(folder: Path) -> bytes:
    """state.pt's trainer part (weights, optimiser, random streams, replay games), as torch writes it."""
    buffer = io.BytesIO()
    torch.save(torch.load(folder / "state.pt", weights_only=False)["ppo"], buffer)
    return buffer.getvalue()


def assert_same_run(one: Path, other: Path) -> None:
    """The files of two run folders: checkpoints, final.bin, config.json, the trainer's saved state
    and metrics.csv (timings aside) byte for byte."""
    names = sorted(path.name for path in (one / "checkpoints").glob("*.bin"))
    assert names and names == sorted(path.name for path in (other / "checkpoints").glob("*.bin"))
    for name in [f"checkpoints/{name}" for name in names] + ["final.bin", "config.json"]:
        assert (one / name).read_bytes() == (other / name).read_bytes(), name
    assert _trainer_state(one) == _trainer_state(other)
    assert _rows(one) == _rows(other)


def test_expert_iteration_over_two_ranks_writes_the_bytes_of_one_process(tmp_path):
    settings = dict(EXPERT, expert_iterations=3, bot_fraction=0.25, opponent="greedy")
    alone = train("x", make_config(settings), tmp_path / "one")
    two = train("x", make_config(dict(settings, ranks=2)), tmp_path / "two")
    assert_same_run(alone, two)
    assert len(_rows(two)) == 3


def test_distillation_over_two_ranks_writes_the_bytes_of_one_process(tmp_path, teachers):  # noqa: F811
    settings = dict(DISTILL, expert_iterations=2, distill_student_fraction=0.5)
    alone = train("d", make_config(settings), tmp_path / "one")
    two = train("d", make_config(dict(settings, ranks=2)), tmp_path / "two")
    assert_same_run(alone, two)


def _free_port() -> int:
    """A port free now, below Linux's ephemeral range (32768 up), from which the kernel hands out the
    ports of other processes' connections: none takes it before the test's rank 0 binds it (another
    test picking the same one at random is the only way to lose it)."""
    while True:
        port = random.randrange(12000, 32000)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def _config_file(tmp_path: Path, settings: dict, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"players": {"g": {"kind": "greedy"}}, "runs": {"x": settings}}))
    return path


def _rank(rank: int, size: int, port: int, config: Path, out: Path, **env) -> subprocess.Popen:
    """Rank `rank` of `size` as torchrun starts one: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT."""
    environ = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(size), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), **env}
    return subprocess.Popen([sys.executable, "-m", "gcpipe", "train", "x", "--config", str(config), "--out", str(out),
                             "--threads", "1"], env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_a_rank_killed_mid_run_stops_it_in_one_line_and_the_rerun_ends_with_the_same_bytes(tmp_path):
    settings = dict(EXPERT, expert_iterations=8, ranks=2)
    config = _config_file(tmp_path, settings)
    port = _free_port()
    learner, other = (_rank(rank, 2, port, config, tmp_path / "run") for rank in (0, 1))
    metrics = tmp_path / "run" / "metrics.csv"
    deadline = time.monotonic() + 300
    while (not metrics.exists() or len(metrics.read_text().splitlines()) < 2) and learner.poll() is None:
        assert time.monotonic() < deadline, "the run wrote no metrics row"
        time.sleep(0.02)
    other.kill()   # SIGKILL: no handler of its own to set
    other.communicate()
    _, err = learner.communicate(timeout=300)
    assert learner.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"gcpipe: error: rank 1 (PID {other.pid} on {socket.gethostname()}) stopped"), err
    assert lines[0].endswith("stopping the run (the saved state is kept: a rerun continues from it)"), err
    assert not (tmp_path / "run" / "final.bin").exists()
    # The rerun, started by gcpipe itself this time, continues from the saved state.
    rerun = subprocess.run([sys.executable, "-m", "gcpipe", "train", "x", "--config", str(config), "--out",
                            str(tmp_path / "run"), "--threads", "2"], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert "continuing from its saved state" in rerun.stderr
    alone = train("x", make_config(dict(settings, ranks=1)), tmp_path / "alone")
    assert_same_run(alone, tmp_path / "run")


def test_a_rank_started_by_gcpipe_that_is_killed_is_named_with_its_signal(tmp_path):
    config = _config_file(tmp_path, dict(EXPERT, expert_iterations=8, ranks=2))
    learner = subprocess.Popen([sys.executable, "-m", "gcpipe", "train", "x", "--config", str(config), "--out",
                                str(tmp_path / "run"), "--threads", "2"], stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "run" / "metrics.csv"
    deadline = time.monotonic() + 300
    while not metrics.exists() or len(metrics.read_text().splitlines()) < 2:
        assert time.monotonic() < deadline and learner.poll() is None, "the run wrote no metrics row"
        time.sleep(0.02)
    children = Path(f"/proc/{learner.pid}/task/{learner.pid}/children").read_text().split()
    ranks = [int(pid) for pid in children if "gcpipe.train.ranks" in Path(f"/proc/{pid}/cmdline").read_text()]
    assert len(ranks) == 1
    os.kill(ranks[0], 9)
    _, err = learner.communicate(timeout=300)
    assert learner.returncode == 2, err
    assert err.strip().splitlines() == [
        f"gcpipe: error: rank 1 (PID {ranks[0]} on {socket.gethostname()}) stopped (killed by SIGKILL); stopping "
        f"the run (the saved state is kept: a rerun continues from it)"], err


def test_a_launcher_of_another_size_is_one_line_before_any_game(tmp_path):
    config = _config_file(tmp_path, dict(EXPERT, expert_iterations=1, ranks=2))
    run = _rank(0, 3, _free_port(), config, tmp_path / "run")
    _, err = run.communicate(timeout=120)
    assert run.returncode == 2
    assert err == "gcpipe: error: run x has ranks 2 but torchrun started 3 processes; set ranks: 3 or start 2\n"
    assert not (tmp_path / "run").exists()


def test_a_rank_without_launcher_and_a_run_of_one_rank_is_one_line(tmp_path):
    config = _config_file(tmp_path, dict(EXPERT, expert_iterations=1))
    run = _rank(1, 2, _free_port(), config, tmp_path / "run")
    _, err = run.communicate(timeout=120)
    assert err == "gcpipe: error: run x has ranks 1 but torchrun started 2 processes; set ranks: 2 or start 1\n"


def test_a_master_that_cannot_be_reached_is_one_line_in_bounded_time(tmp_path):
    config = _config_file(tmp_path, dict(EXPERT, expert_iterations=1, ranks=2))
    run = _rank(1, 2, _free_port(), config, tmp_path / "run", GCPIPE_CONNECT_TIMEOUT="3")
    _, err = run.communicate(timeout=300)
    assert run.returncode == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"gcpipe: error: rank 1 of 2 (torchrun): cannot reach the master at 127.0.0.1:"), err
    assert "within 3 s" in err
    assert not (tmp_path / "run").exists()


def test_ranks_of_other_settings_are_refused_before_any_game(tmp_path):
    port = _free_port()
    ranks = [_rank(rank, 2, port, _config_file(tmp_path, dict(EXPERT, expert_iterations=1, ranks=2, seed=rank),
                                               f"config{rank}.yaml"), tmp_path / "run") for rank in (0, 1)]
    errors = [rank.communicate(timeout=300)[1] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [2, 2]
    assert errors[0].startswith("gcpipe: error: rank 1 (PID "), errors[0]
    assert errors[0].endswith(") has another run record (resolved settings, init and teacher checkpoints) than "
                              "rank 0; every rank must run the same gcpipe on the same run\n"), errors[0]
    assert not (tmp_path / "run" / "metrics.csv").exists()


# PPO with bots (greedy and MCTS), frozen opponents in three banks and pool snapshots every second
# epoch, both slots trained, and short games (many end, in every rank's envs): 21 envs, uneven
# over 2 and 4 ranks.
PPO_RANKS = dict(num_envs=21, horizon=8, minibatch_size=32, bot_fraction=0.25, historical_fraction=0.3,
                 frozen_banks=3, opponent={"guerrilla": "greedy", "coin": "mcts"}, mcts_iterations=8,
                 total_timesteps=21 * 2 * 8 * 9, checkpoint_interval=2, seed=3, max_episode_length=12,
                 train_slot_1=True)


def test_ppo_over_ranks_writes_the_bytes_of_one_process_and_continues_at_another_number_of_ranks(tmp_path):
    """Two ranks stop after 5 epochs (their saved state is the 4th's); four ranks finish the run."""
    alone = train("p", make_config(PPO_RANKS), tmp_path / "one")
    rows = _rows(alone)
    assert sum(float(row["games"]) for row in rows) > 50 and sum(float(row["hist_n"]) for row in rows) > 10
    train("p", make_config(dict(PPO_RANKS, ranks=2, max_epochs=5)), tmp_path / "two", threads=2)
    assert len(_rows(tmp_path / "two")) == 5 and not (tmp_path / "two" / "final.bin").exists()
    train("p", make_config(dict(PPO_RANKS, ranks=4)), tmp_path / "two", threads=4)
    assert_same_run(alone, tmp_path / "two")


@pytest.mark.parametrize("settings, message", [
    (dict(ranks=22), "'ranks' (22) is more than 'num_envs' (21): a PPO rank steps at least one env"),
    (dict(ranks=2, device="cuda"), "'ranks' (2) steps PPO's rollouts in C on the CPU; set device cpu or auto and "
                                   "rollout_net c or auto"),
    (dict(ranks=2, rollout_net="torch"), "'ranks' (2) steps PPO's rollouts in C on the CPU"),
])
def test_ppo_ranks_that_cannot_work_are_refused(settings, message):
    with pytest.raises(UserError, match=re.escape(message)):
        make_config(dict(PPO_RANKS, **settings))


def test_ranks_are_neither_recorded_nor_a_result_setting(tmp_path):
    from gcpipe.train.config import result_settings

    assert "ranks" not in make_config(dict(EXPERT, ranks=3)).to_dict()
    assert result_settings({"seed": 1, "ranks": 3}) == {"seed": 1}


@pytest.mark.parametrize("environ, launch", [
    ({}, None),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_ID": "7"}, None),
    ({"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "29500",
      "TORCHELASTIC_USE_AGENT_STORE": "True"},
     Launch(1, 4, "h", 29500, "torchrun", True)),
    ({"SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "123457",
      "SLURM_STEP_NODELIST": "cn[007-008,012],gpu1", "SLURM_JOB_NODELIST": "other"},
     Launch(2, 4, "cn007", 23457, "srun")),
    ({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_JOB_ID": "5", "SLURM_NODELIST": "n1,n2",
      "MASTER_ADDR": "m", "MASTER_PORT": "4000"}, Launch(0, 2, "m", 4000, "srun")),
    # A job's batch script (no srun step) is no rank, whatever its allocation.
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "5", "SLURM_NODELIST": "n1,n2"}, None),
])
def test_the_launch_is_read_from_the_environment(environ, launch):
    assert launch_from(environ) == launch


@pytest.mark.parametrize("environ, message", [
    ({"RANK": "0", "WORLD_SIZE": "2"}, "RANK and WORLD_SIZE are set but MASTER_ADDR or MASTER_PORT is not"),
    ({"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "environment variable RANK is 'x'"),
    ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "gave rank 2 of 2 processes"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "70000"}, "port 70000 .* is not a TCP port"),
])
def test_a_launch_that_cannot_work_is_one_line(environ, message):
    with pytest.raises(UserError, match=message):
        launch_from(environ)


@pytest.mark.parametrize("nodes, first", [("n1", "n1"), ("node[003-005,9],gpu1", "node003"), ("a-[1-2]-ib,b", "a-1-ib"),
                                          ("x1,x2", "x1"), ("", "")])
def test_the_first_node_of_a_slurm_node_list(nodes, first):
    assert first_node(nodes) == first


def test_srun_starts_the_ranks_only_from_a_batch_script_of_enough_tasks(tmp_path, monkeypatch):
    (tmp_path / "srun").write_text("#!/bin/sh\n")
    (tmp_path / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    job = {"SLURM_JOB_ID": "5", "SLURM_NTASKS": "4"}
    assert srun_allocation(job, 4) and srun_allocation(job, 2)
    assert not srun_allocation(job, 8)                                    # too few tasks: started here
    assert not srun_allocation({**job, "SLURM_STEP_NUM_TASKS": "1"}, 2)   # inside `srun -n1`: started here
    assert not srun_allocation({"SLURM_NTASKS": "4"}, 2)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert not srun_allocation(job, 2)


FAKE_SRUN = """#!/bin/sh
# srun as far as start_with_srun uses it: --ntasks N copies of the command, SLURM's variables set.
n=1
while [ "$#" -gt 0 ]; do
  case "$1" in --ntasks|--cpus-per-task) [ "$1" = --ntasks ] && n=$2; shift 2;; --*) shift;; *) break;; esac
done
echo "$n tasks" >> "$FAKE_SRUN_CALLS"
i=0; pids=""
while [ $i -lt $n ]; do
  SLURM_PROCID=$i SLURM_STEP_NUM_TASKS=$n SLURM_STEP_NODELIST=localhost "$@" & pids="$pids $!"; i=$((i+1))
done
status=0; for p in $pids; do wait $p || status=1; done; exit $status
"""


def test_a_slurm_job_of_two_tasks_starts_its_ranks_with_srun_and_writes_the_bytes_of_one_process(tmp_path,
                                                                                                  monkeypatch):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "srun").write_text(FAKE_SRUN)
    (tmp_path / "bin" / "srun").chmod(0o755)
    settings = dict(EXPERT, expert_iterations=2)
    alone = train("x", make_config(settings), tmp_path / "one")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    for name, value in {"SLURM_JOB_ID": "5", "SLURM_NTASKS": "2", "SLURM_CPUS_PER_TASK": "1",
                        "FAKE_SRUN_CALLS": str(tmp_path / "calls")}.items():
        monkeypatch.setenv(name, value)
    two = train("x", make_config(dict(settings, ranks=2)), tmp_path / "two", threads=1)
    assert (tmp_path / "calls").read_text() == "2 tasks\n"
    assert_same_run(alone, two)


def test_a_rank_that_stops_answering_stops_the_run_in_one_line(tmp_path):
    """A rank stopped (SIGSTOP: it keeps its connections open) is found by the heartbeats."""
    config = _config_file(tmp_path, dict(EXPERT, expert_iterations=8, ranks=2))
    port = _free_port()
    learner, other = (_rank(rank, 2, port, config, tmp_path / "run", GCPIPE_RANK_TIMEOUT="3") for rank in (0, 1))
    metrics = tmp_path / "run" / "metrics.csv"
    deadline = time.monotonic() + 300
    while (not metrics.exists() or len(metrics.read_text().splitlines()) < 2) and learner.poll() is None:
        assert time.monotonic() < deadline, "the run wrote no metrics row"
        time.sleep(0.02)
    os.kill(other.pid, signal.SIGSTOP)
    try:
        _, err = learner.communicate(timeout=300)
    finally:
        other.kill()
        other.communicate()
    assert learner.returncode == 2, err
    assert err.strip().splitlines() == [
        f"gcpipe: error: rank 1 (PID {other.pid} on {socket.gethostname()}) has not answered for 3 s; stopping the "
        f"run (the saved state is kept: a rerun continues from it)"], err


def test_a_rank_with_no_game_in_an_iteration_still_gives_the_bytes_of_one_process(tmp_path):
    settings = dict(EXPERT, expert_iterations=2, selfplay_games=1, replay_games=2)
    alone = train("x", make_config(settings), tmp_path / "one")
    assert_same_run(alone, train("x", make_config(dict(settings, ranks=2)), tmp_path / "two"))
