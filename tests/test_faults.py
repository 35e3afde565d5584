"""Faults end to end, the reliability guarantees: a second writer on a ledger or a run folder, a killed Snakemake
whose jobs must not write on, a config changed under a running pipeline, and damaged state on
disk (training states, checkpoints, ledgers).  Each scenario runs the real commands for a few
seconds and checks the exact outcome: the one-line refusal, what is kept, byte-identical results."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gcpipe.config import load_config
from gcpipe.errors import UserError
from gcpipe.match.ledger import LedgerWriter, game_seed, merge_shards, read_ledger
from gcpipe.train.config import make_config
from gcpipe.train.run import PREVIOUS_STATE_FILE, STATE_FILE, train

from processes import children, default_signals

GCPIPE = str(Path(sys.executable).parent / "gcpipe")
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
REPO = Path(__file__).resolve().parent.parent
needs_snakemake = pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake is not installed")

pytestmark = pytest.mark.usefixtures("one_thread")   # tests/conftest.py


def run(*args, cwd=None, timeout=120):
    return subprocess.run([GCPIPE, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=_env())


def run_here(*args):
    """`gcpipe` called in this process (the CLI group's one-line errors; not gcpipe/__main__.py's start-up,
    which `run` goes through): the result as `run` gives it."""
    from typer.testing import CliRunner

    from gcpipe.cli import app

    result = CliRunner().invoke(app, list(map(str, args)))
    assert isinstance(result.exception, (SystemExit, type(None))), result.exception   # (no traceback)
    return subprocess.CompletedProcess(["gcpipe", *map(str, args)], result.exit_code, result.stdout, result.stderr)


def start(*args, cwd=None):
    return subprocess.Popen([GCPIPE, *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=cwd, env=_env())


def _env():
    env = dict(os.environ)
    env.pop("GCPIPE_LAUNCHER", None)
    return env


def wait_for(condition, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def lines_of(path):
    return path.read_bytes().count(b"\n") if path.exists() else 0


def one_line_error(result, pattern):
    """The command failed with exit 2 and exactly one line, `gcpipe: error: ...`, matching `pattern`."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gcpipe: error: "), result.stderr
    assert re.search(pattern, lines[0]), lines[0]


def stop(process):
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)


TINY = dict(num_envs=8, horizon=16, minibatch_size=64, total_timesteps=8 * 2 * 16 * 6, checkpoint_interval=1,
            pool_size=4)


def tiny(**changes):
    return make_config(dict(TINY, **changes))


def tiny_config_text(**changes) -> str:
    """A pipeline config whose run `tiny` has TINY's settings with `changes`."""
    return "players: {r: {kind: random}}\nruns:\n  tiny: " + json.dumps(dict(TINY, **changes)) + "\n"


def test_training_on_cuda_where_torch_sees_no_gpu_is_one_line_before_any_step(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(tiny_config_text(device="cuda"))
    folder = tmp_path / "tiny"
    result = subprocess.run([GCPIPE, "train", "tiny", "--config", str(config), "--out", str(folder)],
                            capture_output=True, text=True, timeout=120, env={**_env(), "CUDA_VISIBLE_DEVICES": ""})
    one_line_error(result, r"run tiny: 'device' is cuda but torch sees no GPU here \(torch .*\); use cpu or auto$")
    assert not folder.exists()


# --- two writers ---------------------------------------------------------------------------

def test_a_second_match_on_the_same_ledger_is_refused_naming_the_first(tmp_path):
    ledger = tmp_path / "m__g.jsonl"
    # Seconds of games (MCTS 2000 against greedy: about 10 a second on one Zen 4 core), so that the
    # second command starts while the first still writes (30 games at MCTS 400 once finished first).
    args = ("m=mcts:2000", "greedy", "--games", 80, "--workers", 1, "--out", ledger, "--quiet")
    first = start("match", *args)
    try:
        wait_for(lambda: lines_of(ledger) >= 1, what="the first match's first game")
        second = run("match", *args)
        one_line_error(second, rf"ledger {ledger} is being written by process {first.pid}; wait for it")
        assert first.wait(timeout=120) == 0
    finally:
        stop(first)
    # One writer's games only: every game once, in order, and a rerun has nothing to add.
    assert [record["game"] for record in read_ledger(ledger)] == list(range(80))
    before = ledger.read_bytes()
    assert run("match", *args).returncode == 0 and ledger.read_bytes() == before


def test_a_merge_onto_a_ledger_a_match_is_writing_is_refused(tmp_path):
    """merge replaces its output whole: onto a ledger a match holds, the match's games would be lost."""
    shard = tmp_path / "r__g-0-4.jsonl"
    assert run("match", "random", "greedy", "--games", 4, "--workers", 1, "--out", shard, "--quiet").returncode == 0
    out = tmp_path / "r__g.jsonl"
    with LedgerWriter(out) as writer:           # as a running match holds it
        writer.extend(read_ledger(shard)[:2])
        with pytest.raises(UserError, match=rf"ledger {out} is being written by process {os.getpid()}; wait"):
            merge_shards([shard], out)
    assert [record["game"] for record in read_ledger(out)] == [0, 1]
    assert merge_shards([shard], tmp_path / "new" / "r__g.jsonl") == read_ledger(shard)   # (its folder made)


@pytest.mark.parametrize("command", ["match", "merge"])
def test_a_ledger_named_json_is_refused_before_its_summary_could_replace_it(tmp_path, command):
    shard = tmp_path / "s.jsonl"
    assert run("match", "random", "greedy", "--games", 2, "--workers", 1, "--out", shard, "--quiet").returncode == 0
    out = tmp_path / "cell.json"
    args = (["match", "random", "greedy", "--games", 2, "--workers", 1] if command == "match" else ["merge", shard])
    one_line_error(run(*args, "--out", out), rf"ledger {out} ends in .json, the name its summary takes beside it")
    assert not out.exists()


def test_a_second_training_of_the_same_run_folder_is_refused_naming_the_first(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(tiny_config_text(total_timesteps=2_560_000, checkpoint_interval=5))   # minutes long
    folder = tmp_path / "tiny"
    first = start("train", "tiny", "--config", config, "--out", folder, "--threads", 1)
    try:
        wait_for(lambda: (folder / STATE_FILE).exists(), what="the first training's first state")
        second = run("train", "tiny", "--config", config, "--out", folder, "--threads", 1)
        one_line_error(second, rf"run folder {folder} is being written by process {first.pid}; wait for it")
        assert first.poll() is None   # the refused second trainer touched nothing of the first's
    finally:
        stop(first)
    # The kernel dropped the killed holder's lock: a rerun takes over and continues.
    rerun = start("train", "tiny", "--config", config, "--out", folder, "--threads", 1)
    watchdog = threading.Timer(60, rerun.kill)
    watchdog.start()
    try:
        line = rerun.stderr.readline()
        # Killed between writing state.pt and its checksum, the first trainer leaves them unmatched:
        # the rerun says so and continues from the state before it.
        if line == ("tiny: state.pt is unusable: its bytes do not match state.pt.sha256 (damaged or cut short); "
                    "using state.prev.pt, the state before it\n"):
            line = rerun.stderr.readline()
        assert "tiny: continuing from its saved state at step" in line
    finally:
        watchdog.cancel()
        stop(rerun)


# --- a killed Snakemake --------------------------------------------------------------------

def built_engine(workdir):
    """A build record in `workdir`, newer than the sources, so the DAG uses the engine installed
    with the package instead of spending a minute recompiling it (the smoke DAG test builds).  It
    names that engine's behaviour fingerprint, which the jobs depend on."""
    from gcpipe.fingerprint import engine_fingerprint

    record = workdir / "results/engine/build.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"note": "tests: the engine installed with the package",
                                  "fingerprint": engine_fingerprint()}) + "\n")


def snakemake_env():
    return dict(_env(), PATH=f"{SNAKEMAKE.parent}{os.pathsep}{os.environ.get('PATH', '')}")


@needs_snakemake
def test_jobs_die_with_a_killed_snakemake_and_the_rerun_finishes_the_ledger(tmp_path):
    config = tmp_path / "slow.yaml"
    config.write_text("players:\n  m: {kind: mcts, iterations: 3000}\n  g: {kind: greedy}\n"
                      "matches: {field: [m, g], games: 12, shard_size: 12}\n")
    shard = tmp_path / "results/matches/shards/m__g/0-12.jsonl"
    # (The target before --configfile, which takes several values.)
    command = [str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--cores", "1",
               str(shard.with_suffix(".json").relative_to(tmp_path)), "--configfile", str(config)]
    env = snakemake_env()
    built_engine(tmp_path)
    snakemake = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: lines_of(shard) >= 1, timeout=90, what="the match job's first game")
        job = _match_job(shard)
        assert job is not None
        os.kill(snakemake.pid, signal.SIGKILL)
        snakemake.wait(timeout=30)
        # The job (reparented when Snakemake died) stops within moments instead of writing on.
        wait_for(lambda: not _alive(job), timeout=10, what="the orphaned match job to stop")
    finally:
        try:
            os.killpg(snakemake.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    played = lines_of(shard)
    time.sleep(1.0)
    assert lines_of(shard) == played < 12   # nobody writes to the ledger any more
    # The documented recovery: unlock, rerun; one writer finishes the missing games.
    subprocess.run([*command, "--unlock"], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    rerun = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert [record["game"] for record in read_ledger(shard)] == list(range(12))


def _match_job(ledger):
    """The PID of the `gcpipe match` process writing `ledger`, from /proc."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(arg.endswith(b"gcpipe") for arg in argv[:2]) and b"match" in argv and \
                    any(arg.decode(errors="replace").endswith(ledger.name) for arg in argv):
                return int(entry.name)
    return None


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --- a config changed under a running pipeline --------------------------------------------

@needs_snakemake
def test_a_dry_run_with_another_config_does_not_change_what_a_running_pipeline_reads(tmp_path):
    settings = "players:\n  m: {{kind: mcts, iterations: {}}}\n  g: {{kind: greedy}}\n" \
               "matches: {{field: [m, g], games: 6, shard_size: 2}}\n"
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(settings.format(300))
    second.write_text(settings.format(301))
    targets = ["results/matches/m__g.jsonl", "results/matches/g__m.jsonl"]
    env = snakemake_env()
    built_engine(tmp_path)

    def snakemake(config, *args):
        return [str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), *args, "--configfile", str(config)]

    running = subprocess.Popen(snakemake(first, "--cores", "1", *targets), cwd=tmp_path, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (tmp_path / "results/matches/shards/m__g/0-2.json").exists(), timeout=90,
                 what="the first shard")
        configs = sorted((tmp_path / "results/config").iterdir())
        # --rerun-incomplete: the running pipeline's current job has its outputs marked incomplete,
        # which a plain dry run reports as an error whenever it lands mid-job (it plans only).
        dry = subprocess.run(snakemake(second, "-n", "--rerun-incomplete", *targets), cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
        assert dry.returncode == 0, dry.stderr[-3000:]
        assert sorted((tmp_path / "results/config").iterdir()) == configs   # a dry run writes nothing
        _, stderr = running.communicate(timeout=300)
        assert running.returncode == 0, stderr[-3000:]
    finally:
        stop(running)
    # Every job of the first run read the first run's config: 300 iterations throughout.
    for target in targets:
        records = read_ledger(tmp_path / target)
        assert len(records) == 6
        assert {json.dumps(r["guerrilla_id" if r["guerrilla"] == "m" else "coin_id"]) for r in records} == \
            {json.dumps({"kind": "mcts", "iterations": 300, "exploration": 0.7, "rollout": "greedy"})}
    assert len(configs) == 1 and "iterations: 300" in configs[0].read_text()


# --- damaged state on disk -----------------------------------------------------------------

@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted 6-epoch run: the bytes every recovered run must reproduce."""
    return train("tiny", tiny(), tmp_path_factory.mktemp("whole") / "tiny", echo=lambda line: None)


def stopped_run(folder):
    """A run stopped after epoch 4: states of epochs 4 (state.pt) and 3 (state.prev.pt)."""
    train("tiny", tiny(max_epochs=4), folder, echo=lambda line: None)
    return folder


def zero_block(path, offset=4096, size=4096):
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(bytes(size))


@pytest.mark.parametrize("damage", ["truncate", "empty", "zero 4 KiB", "delete"])
def test_a_damaged_state_falls_back_to_the_previous_one_with_the_same_result(tmp_path, reference, damage):
    folder = stopped_run(tmp_path / "tiny")
    state = folder / STATE_FILE
    if damage == "truncate":
        os.truncate(state, state.stat().st_size // 2)
    elif damage == "empty":
        os.truncate(state, 0)
    elif damage == "zero 4 KiB":
        zero_block(state)
    else:
        state.unlink()
    lines = []
    train("tiny", tiny(), folder, echo=lines.append)
    if damage != "delete":
        assert any(f"{STATE_FILE} is unusable: its bytes do not match state.pt.sha256" in line
                   and f"using {PREVIOUS_STATE_FILE}" in line for line in lines), lines
    assert any("continuing from its saved state at step 768" in line for line in lines), lines
    assert (folder / "final.bin").read_bytes() == (reference / "final.bin").read_bytes()


def test_no_good_state_stops_with_what_restart_would_discard_and_keeps_the_checkpoints(tmp_path):
    folder = stopped_run(tmp_path / "tiny")
    zero_block(folder / STATE_FILE)
    os.truncate(folder / PREVIOUS_STATE_FILE, 100)
    checkpoints = sorted((folder / "checkpoints").iterdir())
    config = tmp_path / "c.yaml"
    config.write_text(tiny_config_text())
    result = run("train", "tiny", "--config", config, "--out", folder, "--threads", 1)
    one_line_error(result, rf"run folder {folder}: state\.pt is unusable: its bytes do not match state\.pt\.sha256 "
                           r"\(damaged or cut short\); state\.prev\.pt is unusable: .*`gcpipe train tiny --restart` "
                           r"would discard 4 checkpoint\(s\), state\.pt, state\.prev\.pt and start over$")
    assert sorted((folder / "checkpoints").iterdir()) == checkpoints


@pytest.mark.parametrize("damage, message", [
    ("no config.json", r"holds 4 checkpoint\(s\), state\.pt, state\.prev\.pt but no readable config\.json"),
    ("no metrics.csv", r"state\.pt is unusable: metrics\.csv, whose rows it continues, is missing"),
    ("metrics.csv cut short", r"state\.prev\.pt is unusable: metrics\.csv no longer holds the rows written before it"),
    ("another version's columns", r"state\.pt is unusable: metrics\.csv has another gcpipe version's columns .*; "
                                  r"state\.prev\.pt is unusable: metrics\.csv has another"),
])
def test_a_run_folder_missing_its_records_stops_instead_of_starting_over(tmp_path, damage, message, monkeypatch):
    from gcpipe.errors import UserError
    from gcpipe.train import run as run_module

    if damage == "another version's columns":   # stopped by a gcpipe that logged one column fewer
        monkeypatch.setattr(run_module, "METRIC_FIELDS", run_module.METRIC_FIELDS[:-1])
    folder = stopped_run(tmp_path / "tiny")
    monkeypatch.undo()
    checkpoints = {path.name: path.read_bytes() for path in (folder / "checkpoints").iterdir()}
    metrics = folder / "metrics.csv"
    if damage == "no config.json":
        (folder / "config.json").unlink()
    elif damage == "no metrics.csv":
        metrics.unlink()
    elif damage == "metrics.csv cut short":
        os.truncate(metrics, len(metrics.read_bytes().splitlines(keepends=True)[0]) + 5)
        size = metrics.stat().st_size
    with pytest.raises(UserError, match=message):
        train("tiny", tiny(), folder, echo=lambda line: None)
    assert {path.name: path.read_bytes() for path in (folder / "checkpoints").iterdir()} == checkpoints
    if damage == "metrics.csv cut short":   # not padded with NUL bytes up to the saved length
        assert metrics.stat().st_size == size and b"\0" not in metrics.read_bytes()


def test_a_run_stopped_between_its_first_checkpoint_and_first_state_starts_over_on_rerun(tmp_path, reference,
                                                                                            monkeypatch):
    """A full disk (or a kill) right after the first checkpoint: the rerun refused the folder, which
    held a checkpoint but no saved state, until --restart.  Later checkpoints without any state
    (states deleted by hand) are still refused."""
    import errno

    from gcpipe.train import run as run_module

    def full_disk(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    folder = tmp_path / "tiny"
    monkeypatch.setattr(run_module, "_save_state", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        train("tiny", tiny(), folder, echo=lambda line: None)
    monkeypatch.undo()
    first = folder / "checkpoints" / "0000000000000256.bin"
    assert sorted(folder.rglob("*.bin")) == [first] and not (folder / STATE_FILE).exists()
    lines = []
    train("tiny", tiny(), folder, echo=lines.append)
    assert lines[0] == (f"tiny: {first} was written but no saved state after it (the run stopped in between); "
                        f"starting over, which writes it again")
    assert (folder / "final.bin").read_bytes() == (reference / "final.bin").read_bytes()
    assert first.read_bytes() == (reference / "checkpoints" / first.name).read_bytes()

    # Refused where starting over would not write the checkpoint again: a rerun that stops sooner
    # (max_epochs, which the run's settings do not include), or a checkpoint other than the first.
    folder = tmp_path / "every3"
    monkeypatch.setattr(run_module, "_save_state", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        train("tiny", tiny(checkpoint_interval=3), folder, echo=lambda line: None)
    monkeypatch.undo()
    with pytest.raises(UserError, match=r"has 1 checkpoint\(s\) but no saved state to continue from"):
        train("tiny", tiny(checkpoint_interval=3, max_epochs=2), folder, echo=lambda line: None)
    assert [path.name for path in folder.rglob("*.bin")] == ["0000000000000768.bin"]
    folder = stopped_run(tmp_path / "stopped")
    for state in (STATE_FILE, PREVIOUS_STATE_FILE):
        (folder / state).unlink()
    with pytest.raises(UserError, match=r"has 4 checkpoint\(s\) but no saved state to continue from; `gcpipe train "
                                        r"tiny --restart` would discard them"):
        train("tiny", tiny(), folder, echo=lambda line: None)
    for checkpoint in sorted((folder / "checkpoints").glob("*.bin"))[:-1]:
        checkpoint.unlink()
    with pytest.raises(UserError, match=r"has 1 checkpoint\(s\) but no saved state to continue from"):
        train("tiny", tiny(), folder, echo=lambda line: None)


def test_a_full_disk_is_one_line_naming_the_file(tmp_path, monkeypatch):
    """A write's or fsync's OSError carries no file name: the line said only "No space left on device"."""
    import errno
    import tempfile

    from gcpipe.io import atomic_write_bytes

    ledger = tmp_path / "m.jsonl"
    match = ("import sys\n"
             f"sys.argv = ['gcpipe', 'match', 'random', 'greedy', '--games', '5', '--out', {str(ledger)!r}]\n"
             "from gcpipe.__main__ import main\n"
             "main()")
    code = ("import errno, os\n"
            "def fsync(fd): raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
            "os.fsync = fsync\n") + match
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env())
    assert (result.returncode, result.stderr) == (2, f"gcpipe: error: {ledger}: No space left on device\n")
    # A write that fails (here beyond a file-size limit) leaves the rest of the line in the buffer,
    # which closing the ledger tries again: that second error, without a name, was the one shown.
    ledger.unlink()
    limited = ("import resource, signal\n"
               "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
               "resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))\n") + match
    result = subprocess.run([sys.executable, "-c", limited], capture_output=True, text=True, timeout=60, env=_env())
    assert (result.returncode, result.stderr) == (2, f"gcpipe: error: {ledger}: File too large\n")
    # Where stderr itself is on the full disk (a job's log), the status still says it: a traceback
    # about the unprintable line, itself unprintable, and status 1 before.
    with open("/dev/full", "w") as full:
        result = subprocess.run([GCPIPE, "match", "random", "greedy", "--games", "5", "--out", "/proc/x/y.jsonl"],
                                stdout=subprocess.DEVNULL, stderr=full, timeout=60, env=_env())
    assert result.returncode == 2

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def no_inodes(dir, prefix, suffix):   # the temp file's random name, which says nothing to a user
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"{os.path.abspath(dir)}/{prefix}x1y2z3w4{suffix}")

    for patch in ((os, "fsync", full_disk), (tempfile, "mkstemp", no_inodes)):
        monkeypatch.setattr(*patch)
        for path in (tmp_path / "state.pt", Path("state.pt")):   # mkstemp names the temp file absolutely
            with monkeypatch.context() as inside:
                inside.chdir(tmp_path)
                with pytest.raises(OSError) as raised:
                    atomic_write_bytes(path, b"state")
            assert (raised.value.errno, raised.value.filename) == (errno.ENOSPC, str(path))
        monkeypatch.undo()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["m.jsonl"]   # no temp file left


def test_stdout_on_a_full_disk_is_named_and_a_closed_pipe_ends_quietly(tmp_path):
    ledger = tmp_path / "m.jsonl"
    with open("/dev/full", "w") as full:
        results = [subprocess.run([GCPIPE, *args], stdout=full, stderr=subprocess.PIPE,
                                  text=True, timeout=60, env=_env())
                   for args in (["match", "random", "greedy", "--games", "5", "--out", str(ledger), "--quiet"],
                                ["--help"], ["match", "--help"])]
    # The match's games are written; the line said "No space left on device", the help gave a traceback.
    assert [(result.returncode, result.stderr) for result in results] == [
        (2, "gcpipe: error: standard output: No space left on device\n")] * 3
    assert len(read_ledger(ledger)) == 5
    # `| head` that has read what it wanted: no "gcpipe: error: Broken pipe", the results kept.
    for args in (["match", "random", "greedy", "--games", "300", "--out", str(ledger), "--quiet"], ["--help"],
                 ["match", "--help"]):
        reader, writer = os.pipe()
        os.close(reader)
        result = subprocess.run([GCPIPE, *args], stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60,
                                env=_env())
        os.close(writer)
        assert (result.returncode, result.stderr) == (1, "")
    assert len(read_ledger(ledger)) == 300


def test_a_hostile_start_is_one_line_before_any_work(tmp_path):
    def gcpipe(*args, before=None, **kwargs):
        return subprocess.run([GCPIPE, *args], preexec_fn=before, capture_output=True, timeout=60, env=_env(),
                              **kwargs)

    # Closed standard streams: stderr closed made the progress meter raise on None (a 0-byte ledger,
    # status 1) and sent error lines to stdout (into `> out.yaml`); stdin closed broke `play`.
    ledger = tmp_path / "m.jsonl"
    closed = gcpipe("match", "random", "greedy", "--games", "5", "--out", str(ledger), before=lambda: os.close(2))
    assert (closed.returncode, len(read_ledger(ledger)), ledger.with_suffix(".json").exists()) == (0, 5, True)
    with open(tmp_path / "out.yaml", "wb") as out:
        missing = subprocess.run([GCPIPE, "config", str(tmp_path / "none.yaml")], stdout=out,
                                 preexec_fn=lambda: os.close(2), timeout=60, env=_env())
    assert (missing.returncode, (tmp_path / "out.yaml").read_bytes()) == (2, b"")
    played = gcpipe("play", before=lambda: os.close(0))
    assert (played.returncode, played.stdout.splitlines()[-1]) == (0, b"your move> Game abandoned.")
    # A name that is not UTF-8 (compare, values) failed in a traceback after all its games, at the
    # summary's write; a working directory that is gone, in torch's loading.
    unnamed = gcpipe("compare", "random", "greedy", "--games", "5", "--out", os.fsencode(tmp_path) + b"/cmp\xff")
    assert (unnamed.returncode, unnamed.stderr.decode()) == (2, (
        f"gcpipe: error: argument '{tmp_path}/cmp\\xff' is not UTF-8 text, which names and paths must be "
        "(gcpipe's files are UTF-8); rename it\n"))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["m.json", "m.jsonl", "out.yaml"]
    gone = tmp_path / "gone"
    gone.mkdir()
    homeless = gcpipe("match", "random", "greedy", "--games", "5", "--out", str(ledger),
                      before=lambda: (os.chdir(gone), os.rmdir(gone)))
    assert (homeless.returncode, homeless.stderr) == (2, b"gcpipe: error: the working directory cannot be read "
                                                         b"(No such file or directory); cd into an existing folder\n")
    # An output folder that is a file: "f.txt: File exists" read as if the output were there already.
    (tmp_path / "f.txt").write_text("")
    filed = gcpipe("elo", str(ledger), "--out", str(tmp_path / "f.txt"))
    assert (filed.returncode, filed.stderr.decode()) == (
        2, f"gcpipe: error: {tmp_path / 'f.txt'} is a file (or a broken link), not a folder; give a folder there\n")


def test_a_damaged_final_checkpoint_is_written_again_not_taken_as_trained(tmp_path, reference):
    folder = tmp_path / "tiny"
    train("tiny", tiny(), folder, echo=lambda line: None)
    final = folder / "final.bin"
    good = final.read_bytes()
    zero_block(final)
    # Whatever plays it refuses it: the sidecar says what the bytes were.
    result = run("match", f"net:{final}", "greedy", "--games", 1, "--out", tmp_path / "x.jsonl")
    one_line_error(result, rf"checkpoint {final} is damaged: its bytes do not match final\.bin\.sha256")
    for damage in (lambda: zero_block(final), lambda: os.truncate(final, 1000)):
        damage()
        lines = []
        train("tiny", tiny(), folder, echo=lines.append)
        assert "is unusable" in lines[0] and "writing it again from the saved state" in lines[0], lines
        assert final.read_bytes() == good == (reference / "final.bin").read_bytes()


def test_a_rerun_names_checkpoints_damaged_or_lost_after_they_were_written(tmp_path, reference):
    """The saved state is past them, so a rerun cannot write them again: it said nothing (exit 0,
    "nothing to do"), leaving files every player refuses."""
    for stop_after in (0, 4):   # a finished run (max_epochs 0: no limit), a stopped one resumed
        folder = tmp_path / f"tiny{stop_after}"
        train("tiny", tiny(max_epochs=stop_after), folder, echo=lambda line: None)
        first, second, third, fourth = sorted((folder / "checkpoints").glob("*.bin"))[:4]
        os.truncate(first, 1000)
        second.unlink()
        third.with_name(third.name + ".sha256").write_text("garbage\n")
        fourth.with_name(fourth.name + ".sha256").unlink()   # as files from before sidecars: played unverified
        lines = []
        train("tiny", tiny(), folder, echo=lines.append)
        named = [line for line in lines if "cannot write them again" in line]
        assert named == [f"tiny: checkpoint {first} has 1000 bytes, which is no known layout; accepted sizes: "
                         f"587264 (legacy), 586240 (5c), 587808 (5c-bias); checkpoint {second} is missing; "
                         f"checkpoint {third} is damaged: its bytes do not match {third.name}.sha256 (damaged or cut "
                         f"short); the saved state, past them, cannot write them again: `gcpipe train tiny "
                         f"--restart` would train the run again to write them"], lines
        assert (folder / "final.bin").read_bytes() == (reference / "final.bin").read_bytes()
    # Rows no run writes name no checkpoint, and no traceback: a field beyond csv's limit, a step of
    # 300 digits (its file name too long), a negative one.
    with open(folder / "metrics.csv", "a") as metrics:
        metrics.write("x" * 200_000 + "\n6," + "9" * 300 + "\n6,-1536\n")
    lines = []
    train("tiny", tiny(), folder, echo=lines.append)
    assert lines[0] == f"tiny: already trained ({folder / 'final.bin'}), nothing to do"


def test_temp_files_of_killed_writes_are_removed_by_the_next_writer(tmp_path):
    folder = stopped_run(tmp_path / "tiny")
    stale = [folder / ".state.pt.abc123.tmp", folder / "checkpoints" / ".0000000000000768.bin.x1.tmp"]
    for path in stale:
        path.write_bytes(b"half a file")
    train("tiny", tiny(), folder, echo=lambda line: None)
    assert not any(path.exists() for path in stale)
    ledger = tmp_path / "r__g.jsonl"
    summary_temp = tmp_path / ".r__g.json.zz9.tmp"
    summary_temp.write_text("{")
    assert run("match", "r=random", "greedy", "--games", 2, "--out", ledger, "--quiet").returncode == 0
    assert not summary_temp.exists()


@pytest.mark.parametrize("damage, message", [
    ("zero bytes", r":2: not valid JSON"),
    ("CRLF", r":1: not in the ledger's exact form"),
    ("seed", r":2: game 1 has seed 12345, but the ledger's roster positions 0/1 give \d+"),
    ("plies", r":2: plies must be an integer in 1\.\.127"),
])
def test_a_damaged_ledger_is_refused_by_match_merge_and_elo_alike(tmp_path, damage, message):
    ledger = tmp_path / "r__g.jsonl"
    assert run("match", "r=random", "greedy", "--games", 3, "--out", ledger, "--quiet").returncode == 0
    lines = ledger.read_bytes().splitlines(keepends=True)
    if damage == "zero bytes":
        lines[1] = bytes(len(lines[1]) - 1) + b"\n"
    elif damage == "CRLF":
        lines = [line.replace(b"\n", b"\r\n") for line in lines]
    elif damage == "seed":
        record = json.loads(lines[1])
        lines[1] = json.dumps({**record, "seed": 12345}, separators=(",", ":")).encode() + b"\n"
    else:
        record = json.loads(lines[1])
        lines[1] = json.dumps({**record, "plies": 500}, separators=(",", ":")).encode() + b"\n"
    ledger.write_bytes(b"".join(lines))
    for command in (["match", "r=random", "greedy", "--games", 3, "--out", ledger],
                    ["merge", ledger, "--out", tmp_path / "merged.jsonl"],
                    ["elo", ledger, "--out", tmp_path / "elo"]):
        one_line_error(run(*command), rf"^gcpipe: error: {ledger}{message}")


# --- resource exhaustion ---------------------------------------------------------------------

def test_a_huge_match_starts_playing_at_once_in_bounded_memory(tmp_path):
    ledger = tmp_path / "r__g.jsonl"
    process = start("match", "r=random", "greedy", "--games", 4_000_000_000, "--workers", 1, "--out", ledger,
                    "--quiet")
    try:
        wait_for(lambda: lines_of(ledger) >= 1000, timeout=30, what="the first thousand games")
        rss_kib = int(next(line.split()[1] for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
                           if line.startswith("VmRSS:")))
        assert rss_kib < 1_000_000   # planning every game index up front took tens of GB
    finally:
        stop(process)
    one_line_error(run("match", "random", "greedy", "--first-game", 2**32 - 1, "--games", 2, "--out", ledger),
                   r"--first-game \+ --games must stay within 4,294,967,296 game indices")


@pytest.mark.parametrize("matches, message", [
    ("{games: 10000000000}", r"matches\.games: 10000000000 is greater than the maximum of 100000000"),
    ("{games: 100000000, shard_size: 1000}",
     r"matches: cell r__r would be 100,000 shards of 1,000 games \(at most 10,000 jobs a cell\)"),
])
def test_the_match_plan_is_bounded(tmp_path, matches, message):
    config = tmp_path / "c.yaml"
    config.write_text(f"players: {{r: {{kind: random}}}}\nmatches: {matches}\n")
    one_line_error(run("config", config), message)


# --- one line, not a traceback -----------------------------------------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A regular file to put paths under, a ledger, a checkpoint, a metrics file and a config."""
    folder = tmp_path_factory.mktemp("files")
    (folder / "plain").write_text("a file, not a folder\n")
    assert run("match", "r=random", "greedy", "--games", 2, "--out", folder / "r__g.jsonl").returncode == 0
    from gcpipe.nn.checkpoint import save
    from gcpipe.nn.model import MinGRUPolicy

    save(MinGRUPolicy(), folder / "net.bin", "5c")
    (folder / "metrics.csv").write_text("epoch,global_step,sps\n1,10,5.0\n")
    (folder / "c.yaml").write_text(tiny_config_text())
    return folder


OUTPUT_COMMANDS = {
    "match": lambda f, out: ["match", "random", "greedy", "--games", 1, "--out", out / "x.jsonl"],
    "tournament": lambda f, out: ["tournament", "random", "greedy", "--games", 1, "--out", out],
    "elo": lambda f, out: ["elo", f / "r__g.jsonl", "--out", out],
    "merge": lambda f, out: ["merge", f / "r__g.jsonl", "--out", out / "m.jsonl"],
    "train": lambda f, out: ["train", "tiny", "--config", f / "c.yaml", "--out", out, "--threads", 1],
    "ckpt convert": lambda f, out: ["ckpt", "convert", f / "net.bin", out / "n.bin", "--layout", "5c-bias"],
    "plot-training": lambda f, out: ["plot-training", f / "metrics.csv", "--out", out / "p.png"],
}


@pytest.mark.parametrize("command", OUTPUT_COMMANDS)
@pytest.mark.parametrize("where", ["under a regular file", "/proc"])
def test_an_unwritable_output_path_is_one_line(files, command, where):
    out = files / "plain" / "sub" if where == "under a regular file" else Path("/proc/gcpipe-x")
    result = run(*OUTPUT_COMMANDS[command](files, out))
    one_line_error(result, rf"^gcpipe: error: (/proc|{files}/plain)\S*: (Not a directory|No such file or directory|"
                           rf"File exists)$")


@pytest.mark.parametrize("cells, message", [
    ('[{"guerrilla": "a", "coin": "b", "guerrilla_wins": null, "coin_wins": 3}]', r"got None"),   # (a process)
    ('[{"guerrilla": "a", "coin": "b", "guerrilla_wins": "7", "coin_wins": 3}]', r"got '7'"),
    ('[{"guerrilla": "a", "coin": "b", "guerrilla_wins": NaN, "coin_wins": 3}]', r"got nan"),
    ('[{"guerrilla": "a", "coin": "b", "guerrilla_wins": 1e400, "coin_wins": 3}]', r"got inf"),
    ('[{"guerrilla": "a", "coin": "b", "guerrilla_wins": 10000000000000, "coin_wins": 3}]', r"got 10000000000000"),
    ('[{"guerrilla": "a", "coin": "b", "guerrilla_wins": 2.0, "coin_wins": 3}]', r"got 2\.0"),
    ('[{"guerrilla": "a", "coin": "b", "guerrilla_wins": true, "coin_wins": 3}]', r"got True"),
    ('[{"guerrilla": "a", "coin": "zed", "guerrilla_wins": 1, "coin_wins": 3}]',
     r"cell a vs zed: player 'zed' is not in the table's players \(a, b\)$"),
])
def test_bad_cross_table_counts_and_players_are_one_line(tmp_path, cells, message):
    table = tmp_path / "t.json"
    table.write_text(f'{{"players": ["a", "b"], "cells": {cells}}}')
    gcpipe = run if message == "got None" else run_here   # (the same path; one process is enough)
    one_line_error(gcpipe("elo", "--crosstable", table, "--out", tmp_path / "out"),
                   rf"^gcpipe: error: {table}: .*{message}")


def test_other_bad_arguments_are_one_line(tmp_path, files):
    """In this process where the command's own check says it; in a process where the process matters
    (a thread count that crashed torch, the parser's lines naming `gcpipe`, an OSError's line)."""
    binary = tmp_path / "t.md"
    binary.write_bytes(b"| Guerrilla / COIN | a |\n\xff\xfe\n")
    one_line_error(run_here("elo", "--crosstable", binary, "--out", tmp_path / "o"),
                   rf"{binary}: not UTF-8 text \(byte 25\)$")
    one_line_error(run_here("elo", files / "r__g.jsonl", "--out", tmp_path / "o", "--anchor", "mean:1e308"),
                   r"bad anchor 'mean:1e308': the value must be within ±1e\+06")
    one_line_error(run_here("bench", "train", "--horizon", 0), r"--horizon must be an integer >= 1, got 0$")
    one_line_error(run_here("bench", "train", "--run", "candidate"), r"--run and --config go together$")
    one_line_error(run_here("bench", "train", "--run", "candidate", "--config", REPO / "config/config.yaml",
                            "--epochs", 1),
                   r"bench train measures PPO; this run's algorithm is 'distill'$")
    one_line_error(run_here("merge", files / "r__g.jsonl", "--out", f"{tmp_path}/dir/"),
                   r"--out \S+/dir/ is a folder; give the ledger's file name")
    one_line_error(run_here("merge", files / "r__g.jsonl", "--games", 0, "--out", tmp_path / "m.jsonl"),
                   r"--games must be an integer >= 1, got 0$")
    # torch's set_num_threads crashed (a segfault, no message) far above any core count.
    one_line_error(run("train", "tiny", "--config", files / "c.yaml", "--out", tmp_path / "t", "--threads", 100000),
                   r"--threads must be an integer in 1\.\.1024, got 100000$")
    one_line_error(run_here("bench", "train", "--threads", 0), r"--threads must be an integer in 1\.\.1024, got 0$")
    not_utf8 = tmp_path / "metrics.csv"
    not_utf8.write_bytes(b"global_step,sps\n1,2\nx\xe9\n")
    one_line_error(run_here("plot-training", not_utf8, "--out", tmp_path / "p.png"),
                   rf"metrics file {not_utf8} is not UTF-8 text \(byte 21\)$")
    # What the argument parser refuses is one line too (it drew a box of several).
    one_line_error(run("match", "random", "greedy", "--games", "1e3", "--out", tmp_path / "x.jsonl"),
                   r"Invalid value for '--games': .* \(see gcpipe match --help\)$")
    one_line_error(run("match", "random", "--out", tmp_path / "x.jsonl"),
                   r"Missing argument 'C'\. \(see gcpipe match --help\)$")
    # An output that is a folder is named, not the temp file written beside it.
    one_line_error(run("config", REPO / "config/smoke.yaml", "--out", tmp_path), rf"^gcpipe: error: {tmp_path}: Is a directory$")
    # Players of a field on one roster position would replay each other's seeds (as the config refuses).
    one_line_error(run_here("tournament", "random@3", "greedy@3", "--games", 1, "--workers", 1,
                            "--out", tmp_path / "t"),
                   r"players random and greedy share roster position 3, so their cells would replay the same seeds")
    assert not (tmp_path / "t").exists()
    # provenance records a config the pipeline accepts.
    duplicate = tmp_path / "dup.yaml"
    duplicate.write_text("players:\n  random: {kind: random}\n  random: {kind: greedy}\nmatches:\n  field: [random]\n")
    one_line_error(run_here("provenance", "--config", duplicate, "--build", tmp_path / "build.json",
                       "--out", tmp_path / "p.json"), rf"{duplicate}:3: key 'random' is given twice in one mapping")
    duplicate.write_text("")
    one_line_error(run_here("provenance", "--config", duplicate, "--build", tmp_path / "build.json",
                       "--out", tmp_path / "p.json"), rf"config {duplicate} is not a mapping of keys to values$")



def test_a_fifo_or_device_given_as_a_file_is_refused_without_blocking_or_replacing_it(tmp_path, files):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # Read: the open blocked until a writer came (the timeout below ended these runs).
    for args, message in [
        (["config", fifo], rf"cannot read config {fifo}: a FIFO, not a regular file$"),
        (["match", f"net:{fifo}", "greedy", "--games", 1, "--out", tmp_path / "x.jsonl"],
         rf"checkpoint {fifo} is a FIFO, not a \.bin file$"),
        (["elo", fifo, "--out", tmp_path / "e"], rf"{fifo}: cannot read ledger \(a FIFO, not a regular file\)$"),
        (["elo", "--crosstable", fifo, "--out", tmp_path / "e"],
         rf"{fifo}: cannot read cross table \(a FIFO, not a regular file\)$"),
        (["plot-training", fifo, "--out", tmp_path / "p.png"],
         rf"cannot read metrics file {fifo}: a FIFO, not a regular file$"),
    ]:
        one_line_error(run(*args, timeout=60), message)
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "s.sock"))   # its open fails (ENXIO): the message says what it is
        one_line_error(run("config", tmp_path / "s.sock"), r"s\.sock: a socket, not a regular file$")
    # Written: a ledger on /dev/null lost its games (then "Invalid argument" from the fsync, no path),
    # and an atomic write replaced the FIFO, or as root /dev/null itself, with a regular file.
    for out, kind in [("/dev/null", "a device"), (fifo, "a FIFO")]:
        one_line_error(run("match", "random", "greedy", "--games", 1, "--out", out, timeout=60),
                       rf"^gcpipe: error: {out}: {kind}, not a regular file$")
    one_line_error(run("config", REPO / "config/smoke.yaml", "--out", fifo, timeout=60),
                   rf"^gcpipe: error: {fifo}: a FIFO, not a regular file$")
    # Refused before the work: calibrate's games, a tournament's earlier cells.
    one_line_error(run("calibrate", files / "net.bin", "--games", 10**6, "--out", fifo, timeout=60),
                   rf"^gcpipe: error: {fifo}: a FIFO, not a regular file$")
    (tmp_path / "t").mkdir()
    os.mkfifo(tmp_path / "t" / "greedy__greedy.jsonl")
    one_line_error(run("tournament", "random", "greedy", "--games", 1, "--out", tmp_path / "t", timeout=60),
                   r"t/greedy__greedy\.jsonl: a FIFO, not a regular file$")
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["greedy__greedy.jsonl"]
    assert fifo.is_fifo()
    assert not (tmp_path / "e").exists() and not (tmp_path / "x.jsonl").exists()

def test_sizes_beyond_what_can_run_are_refused_before_any_work(tmp_path, files):
    """Games held at once are bounded (MAX_GAMES_AT_ONCE), and counts and seeds beyond C's types are
    named: calibrate's 10**12 games ended in a MemoryError traceback, bench engine's seed in an
    OverflowError one, values built its 10**12 seeds for hours."""
    huge = 10**12
    for args, message in [
        (["calibrate", files / "net.bin", "--games", huge, "--out", tmp_path / "c.json"],
         r"--games must be an integer in 10\.\.1000000, got 1000000000000$"),
        (["values", files / "net.bin", "--games", huge, "--out", tmp_path / "v"],
         r"--games must be an integer in 1\.\.1000000, got 1000000000000$"),
        (["bench", "search", "--games", huge], r"--games must be an integer in 1\.\.1000000, got 1000000000000$"),
        (["bench", "search", "--workers", "1,0"], r"--workers must be an integer in 1\.\.1024, got 0$"),
        (["bench", "net", "--games", 4, "--workers", 5], r"--workers must be an integer in 1\.\.4, got 5$"),
        (["bench", "engine", "--seed", 2**32], r"a seed is an unsigned 32-bit integer, got 4294967296$"),
        (["bench", "engine", "--envs", 2**31], r"--envs must be an integer in 1\.\.2147483647, got 2147483648$"),
        (["bench", "mcts", "--iterations", huge], r"--iterations must be an integer in 1\.\.10000000, got 1000000000000$"),
        # The tournament has no --first-game to name.
        (["tournament", "random", "greedy", "--games", huge, "--out", tmp_path / "t"],
         r"--games must be an integer in 1\.\.4294967296, got 1000000000000$"),
    ]:
        one_line_error(run(*args, timeout=60), message)
    assert not (tmp_path / "t").exists() and not (tmp_path / "v").exists()


def test_a_run_s_sparring_mcts_is_bounded_by_the_config_check_as_a_player_s():
    with pytest.raises(UserError, match=r"mcts_iterations: 10000001 is greater than the maximum of 10000000"):
        tiny(mcts_iterations=10**7 + 1)


def test_a_file_name_too_long_is_refused_before_any_game(tmp_path):
    # Cells are named G__C: the ledger of the first cell fitted, the later one's did not.
    long = "b" * 117
    one_line_error(run("tournament", "random", f"{long}=greedy", "--games", 2, "--out", tmp_path / "t"),
                   rf"^gcpipe: error: {tmp_path}/t/{long}__{long}\.jsonl: File name too long$")
    assert not (tmp_path / "t").exists()
    one_line_error(run("compare", "random", f"{long}=greedy", "--games", 2, "--out", tmp_path / "c"),
                   rf"{long}__{long}\.jsonl: File name too long$")
    # This ledger's name fits (245 bytes) but not the temp file its summary is written through.
    ledger = tmp_path / ("m" * 239 + ".jsonl")
    one_line_error(run("match", "random", "greedy", "--games", 2, "--out", ledger),
                   rf"^gcpipe: error: {ledger}: File name too long$")
    assert not ledger.exists()


def test_running_out_of_memory_or_ctrl_c_while_loading_is_one_line(tmp_path):
    def python(code):
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env())

    exhausted = python("import gcpipe.config, gcpipe.cli\n"
                       "def exhausted(path): raise MemoryError('Unable to allocate 7.28 TiB')\n"
                       "gcpipe.config.load_config = exhausted\n"
                       f"gcpipe.cli.app(['config', {str(REPO / 'config/smoke.yaml')!r}])")
    assert (exhausted.returncode, exhausted.stderr) == (
        2, "gcpipe: error: out of memory (Unable to allocate 7.28 TiB); ask for less\n")
    # torch's allocator says it in a RuntimeError (a 67-line traceback for a training's huge buffers).
    torch_exhausted = python("import gcpipe.config, gcpipe.cli\n"
                             "def exhausted(path): raise RuntimeError('[enforce fail at alloc_cpu.cpp:127] err == 0. "
                             "DefaultCPUAllocator: can\\'t allocate memory: you tried to allocate 7680 bytes.')\n"
                             "gcpipe.config.load_config = exhausted\n"
                             f"gcpipe.cli.app(['config', {str(REPO / 'config/smoke.yaml')!r}])")
    assert (torch_exhausted.returncode, torch_exhausted.stderr) == (
        2, "gcpipe: error: out of memory ([enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
           "allocate memory: you tried to allocate 7680 bytes.); ask for less\n")
    # Ctrl-C while typer, numpy and the engine load (the first ~0.1 s): the entry point's import.
    interrupted = python("import builtins, sys\n"
                         "real = builtins.__import__\n"
                         "def loading(name, *args, **kwargs):\n"
                         "    if name == 'gcpipe.cli': raise KeyboardInterrupt\n"
                         "    return real(name, *args, **kwargs)\n"
                         "builtins.__import__ = loading\n"
                         "from gcpipe.__main__ import main\n"
                         "main()")
    assert (interrupted.returncode, interrupted.stderr) == (130, "gcpipe: interrupted\n")


def test_ctrl_c_reaches_only_the_parent_of_worker_processes(tmp_path):
    """Ctrl-C signals the whole process group: workers interrupted inside the result queue's put
    held its lock, and the match hung in the pool's terminate() for good (the ledger locked); others
    printed tracebacks beside `gcpipe: interrupted`."""
    import signal

    from gcpipe.lifetime import worker_pool

    def ignores_sigint(pid):
        status = Path(f"/proc/{pid}/status").read_text()
        return bool(int(re.search(r"SigIgn:\s*([0-9a-f]+)", status)[1], 16) & 1 << (signal.SIGINT - 1))

    before = signal.getsignal(signal.SIGINT)
    with worker_pool(2) as pool:
        assert pool.map(abs, range(-3, 1)) == [3, 2, 1, 0]
        assert all(ignores_sigint(worker.process.pid) for worker in pool._workers)
    assert signal.getsignal(signal.SIGINT) is before and signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()
    match = subprocess.Popen([GCPIPE, "match", "mcts:100", "greedy", "--games", "3000", "--workers", "2",
                              "--out", tmp_path / "m.jsonl", "--quiet"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, start_new_session=True, env=_env(),
                             preexec_fn=default_signals)   # (a background test run ignores SIGINT)
    wait_for(lambda: lines_of(tmp_path / "m.jsonl") >= 1, what="the first game")
    os.killpg(match.pid, signal.SIGINT)
    try:
        assert (match.wait(timeout=60), match.stderr.read()) == (130, "gcpipe: interrupted\n")
    finally:
        stop(match)


def test_a_worker_killed_from_outside_stops_the_match_with_one_line_and_a_rerun_finishes_it(tmp_path):
    """A pool worker killed alone (the kernel's out-of-memory killer, a `kill -9`): its task's
    result never came, and the match waited for it forever with its ledger locked."""
    games = ("--games", "120", "--workers", "2", "--quiet")
    match = subprocess.Popen([GCPIPE, "match", "mcts:1000", "greedy", *games, "--out", tmp_path / "m.jsonl"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        wait_for(lambda: lines_of(tmp_path / "m.jsonl") >= 2, what="the first games")
        victim = children(match.pid)[0]
        os.kill(victim, signal.SIGKILL)
        stderr = match.communicate(timeout=60)[1]
    finally:
        stop(match)
    assert (match.returncode, stderr) == (2, f"gcpipe: error: worker process {victim} was killed by SIGKILL (what the "
                                             "kernel's out-of-memory killer sends); a rerun continues from what was "
                                             "saved\n")
    assert 2 <= lines_of(tmp_path / "m.jsonl") < 120
    assert run("match", "mcts:1000", "greedy", *games, "--out", tmp_path / "m.jsonl").returncode == 0
    assert run("match", "mcts:1000", "greedy", *games, "--out", tmp_path / "whole.jsonl").returncode == 0
    assert (tmp_path / "m.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()


class _Unrebuildable(Exception):
    def __init__(self, what, why):   # pickle rebuilds an exception from its args: ("what: why",) here
        super().__init__(f"{what}: {why}")


def _fail(task):
    from gcpipe.errors import MissingExtraError

    if task == "raise":
        raise UserError("task 2 went wrong")
    if task == "extra":   # a UserError that pickle cannot rebuild (its __init__ takes two arguments)
        raise MissingExtraError("OpenSpiel", "openspiel")
    if task == "exit":
        sys.exit(3)
    if task == "odd":
        raise _Unrebuildable("odd", "not rebuilt")
    if task == "unpicklable":
        return lambda: None
    if task == "slow":
        time.sleep(0.5)
        return "slow"
    return task * 2


def _broken_start():
    raise OSError(28, "No space left on device")


def test_the_worker_pool_returns_results_in_order_and_raises_what_a_worker_met():
    from gcpipe.lifetime import WorkerDied, worker_pool

    with worker_pool(2) as pool:
        assert pool.map(_fail, [1, 2, 3, 4, 5]) == [2, 4, 6, 8, 10]
        assert pool.map(_fail, ["slow", 1, 2]) == ["slow", 2, 4]   # in task order, not in the order they end
        assert pool.starmap(divmod, [(7, 2), (9, 4)]) == [(3, 1), (2, 1)]
        with pytest.raises(UserError, match="^task 2 went wrong$"):
            pool.map(_fail, [1, "raise", 3])
        with pytest.raises(AttributeError, match="^Can't pickle local object"):   # a result that cannot travel
            pool.map(_fail, ["unpicklable"])
        with pytest.raises(UserError, match="^OpenSpiel is not installed; it comes with gcpipe's 'openspiel'"):
            pool.map(_fail, ["extra"])   # still one line from the CLI, not a traceback
        with pytest.raises(RuntimeError, match="^SystemExit in a worker: 3$"):   # not this process's exit
            pool.map(_fail, ["exit"])
        with pytest.raises(RuntimeError, match="^_Unrebuildable in a worker: odd: not rebuilt$"):
            pool.map(_fail, ["odd", "slow"])
        # Every worker still serves, and a task's answer is its own, not the stale one of the task the
        # failed map left running (the next map got it).
        assert pool.map(_fail, [6, 7]) == [12, 14]
        first = pool.imap(_fail, [1, "slow"])
        assert next(first) == 2
        with pytest.raises(RuntimeError, match="serving another imap"):   # it would take the first's answers
            pool.map(_fail, [8])
        first.close()
        assert pool.map(_fail, [8]) == [16]
        # A worker killed while it waits for a task: the next map says so (it hung before).
        os.kill(pool._workers[1].process.pid, signal.SIGKILL)
        pool._workers[1].process.join()
        with pytest.raises(WorkerDied, match=r"^worker process \d+ was killed by SIGKILL"):
            pool.map(_fail, [1, 2, 3])
    with worker_pool(2, _broken_start) as pool:   # Pool started a new worker after each failed start, forever
        with pytest.raises(OSError, match="No space left on device"):
            pool.map(_fail, [1, 2])


@pytest.mark.parametrize("module, owner, name, argv", [
    ("typer.core", "TyperGroup", "make_context", ["config", "config/smoke.yaml"]),   # 130 and no word
    ("typer.main", None, "get_command", ["config", "config/smoke.yaml"]),            # a typer traceback
    ("typer.core", "TyperGroup", "make_context", ["--help"]),                        # no command starts
    ("gcpipe.torch_env", None, "before_torch", ["config", "config/smoke.yaml"]),     # the CLI's modules load
])
def test_ctrl_c_while_the_command_starts_is_one_line(module, owner, name, argv):
    """A SIGINT delivered (for real, not raised) at each step of the start-up before the command's
    own handling: typer building the command and parsing its arguments, the modules loading."""
    target = f"importlib.import_module({module!r})" + (f".{owner}" if owner else "")
    code = ("import importlib, os, signal, sys\n"
            f"target = {target}\n"
            f"real = getattr(target, {name!r})\n"
            "def interrupted(*args, **kwargs):\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    return real(*args, **kwargs)\n"
            f"setattr(target, {name!r}, interrupted)\n"
            f"sys.argv = ['gcpipe', *{argv!r}]\n"
            "from gcpipe.__main__ import main\n"
            "main()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env(),
                            cwd=REPO, preexec_fn=default_signals)
    assert (result.returncode, result.stderr) == (130, "gcpipe: interrupted\n")


def test_ctrl_c_after_the_command_leaves_its_exit_status():
    """Python's teardown restores the default SIGINT action: a Ctrl-C there killed the finished
    command with no word (status -2), or printed a traceback from an exit handler."""
    code = ("import atexit, os, signal, sys\n"
            "atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))\n"
            f"sys.argv = ['gcpipe', 'config', {str(REPO / 'config/smoke.yaml')!r}]\n"
            "from gcpipe.__main__ import main\n"
            "main()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env(),
                            preexec_fn=default_signals)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("players:")


def test_a_malformed_launcher_token_is_ignored(tmp_path):
    """GCPIPE_LAUNCHER (set by the Snakefile) naming no possible PID: the job runs unwatched (an
    OverflowError traceback before)."""
    for pid in ("99999999999999999999", "9" * 5000):   # 5000 digits: beyond int()'s string limit
        env = dict(_env(), GCPIPE_LAUNCHER=f"{socket.gethostname()}:{pid}:1")
        result = subprocess.run([GCPIPE, "match", "random", "greedy", "--games", "2", "--out", tmp_path / "x.jsonl"],
                                capture_output=True, text=True, timeout=60, env=env)
        assert result.returncode == 0, result.stderr
        assert len(read_ledger(tmp_path / "x.jsonl")) == 2


# --- smaller holes -----------------------------------------------------------------------------

def test_roster_positions_are_0_to_15_and_the_published_seeds_stay(tmp_path):
    from gcpipe.config import validate_config
    from gcpipe.errors import UserError
    from gcpipe.match import game_seed

    # (0, 16) and (1, 0) gave the same seeds: a*16 + b is a pair index only for positions 0..15.
    with pytest.raises(UserError, match=r"players\.x\.roster: 16 is greater than the maximum of 15"):
        validate_config({"players": {"x": {"kind": "random", "roster": 16}}})
    many = {f"p{k}": {"kind": "random"} for k in range(17)}
    with pytest.raises(UserError, match=r"players\.p16: its roster position is 16 \(its place in `players`\)"):
        validate_config({"players": many})
    one_line_error(run("match", "random@16", "greedy", "--games", 1, "--out", tmp_path / "x.jsonl"),
                   r"@N must be a roster position 0\.\.15")
    one_line_error(run("match", "random", "greedy", "--roster-g", 17, "--games", 1, "--out", tmp_path / "x.jsonl"),
                   r"--roster-g must be a roster position 0\.\.15")
    with pytest.raises(ValueError, match="roster position 16 is outside 0..15"):
        game_seed(0, 16, 0)
    with pytest.raises(ValueError, match="game index 4294967296 is outside"):
        game_seed(0, 0, 2**32)   # would wrap to game 0's seed
    # Published positions (random 0, greedy 1, MCTS 2K 3, ...): the formula is unchanged.
    assert game_seed(3, 1, 7) == 3098996971 and game_seed(15, 15, 123456) == 2191602805


def test_duplicate_yaml_keys_are_refused_by_every_reader(tmp_path):
    config = tmp_path / "dup.yaml"
    config.write_text("players:\n  m: {kind: mcts, iterations: 300}\n  m: {kind: mcts, iterations: 301}\n")
    one_line_error(run("config", config), rf"config {config}:3: key 'm' is given twice in one mapping")
    config.write_text("players:\n  r: {kind: random}\nmatches:\n  games: 10\n  games: 20\n")
    one_line_error(run("config", config), rf"config {config}:5: key 'games' is given twice")
    if SNAKEMAKE.exists():   # Snakemake's own YAML reader keeps the last value: the Snakefile reads it again
        result = subprocess.run([str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n",
                                 "elo_table", "--configfile", str(config)], capture_output=True, text=True,
                                timeout=120, env=snakemake_env())
        assert result.returncode != 0
        assert f"gcpipe: error: config {config}:5: key 'games' is given twice" in result.stdout + result.stderr


def test_yaml_merge_keys_share_settings_and_a_key_beside_them_overrides(tmp_path):
    config = tmp_path / "merge.yaml"
    config.write_text("players:\n  r: {kind: random}\nruns:\n  a: &a {total_timesteps: 2048, num_envs: 4, seed: 1}\n"
                      "  b:\n    <<: *a\n    seed: 2\n")
    runs = load_config(config)["runs"]
    assert (runs["b"]["total_timesteps"], runs["b"]["num_envs"], runs["b"]["seed"], runs["a"]["seed"]) == (2048, 4, 2, 1)
    config.write_text("players:\n  r: {kind: random}\nruns:\n  a: &a {seed: 1}\n  b:\n    <<: *a\n    seed: 2\n    seed: 3\n")
    one_line_error(run("config", config), rf"config {config}:8: key 'seed' is given twice")


def test_engine_calls_with_impossible_values_are_refused():
    from gcpipe.engine import Game, GameBatch, IllegalActionError, VecEnv
    from gcpipe.errors import UserError

    batch = GameBatch(2)
    batch.reset(0, 1)
    before = batch.game(0)
    for actions in ([0.9], [2**40]):
        with pytest.raises(IllegalActionError, match="actions are integers 0..255"):
            batch.apply([0], actions)   # 0.9 played action 0; 2**40 raised a raw OverflowError
    with pytest.raises(IndexError, match="integers within 0..1"):
        batch.apply([2**40], [0])
    assert batch.game(0) == before
    with pytest.raises(ValueError, match="only by ply_cap or timeout, not 'coins_cleared'"):
        Game(1).declare_coin_win("coins_cleared")
    with pytest.raises(ValueError, match="only by ply_cap or timeout"):
        batch.declare_coin_win([0], "stalemate")
    for settings, name in ((dict(num_envs=2**40), "num_envs"), (dict(num_envs=2, max_episode_length=2**40),
                                                                "max_episode_length"),
                           (dict(num_envs=2, opponent="mcts", mcts_iterations=10**7 + 1), "mcts_iterations")):
        with pytest.raises(UserError, match=f"{name} must be an integer in 1.."):
            VecEnv(**settings)
    # A running game whose side to move has no move is no state the rules reach.
    stones = [g for g in range(49) if g not in (0, 48)]
    dead_end = Game.from_position(stones=stones, coins=[0], stones_placed=47).serialize()
    with pytest.raises(UserError, match="a running game whose side to move has no legal action"):
        Game.deserialize(dead_end)


def test_absurd_checkpoint_weights_are_warned_about(tmp_path):
    import numpy as np

    from gcpipe.nn.checkpoint import LAYOUTS

    path = tmp_path / "huge.bin"
    np.full(LAYOUTS["5c"] // 4, 1e38, "<f4").tofile(path)
    result = run("match", f"net:{path}", "greedy", "--games", 1, "--out", tmp_path / "x.jsonl")
    assert f"gcpipe: warning: checkpoint {path}: tensor enc.W holds a weight of magnitude 1e+38" in result.stderr


# --- settings that cannot change the result ------------------------------------------------------

def test_evaluation_settings_do_not_change_the_weights_or_retrain(tmp_path, reference):
    lines = []
    evaluated = train("tiny", tiny(eval_interval=1, eval_games=4), tmp_path / "tiny", echo=lines.append)
    assert (evaluated / "final.bin").read_bytes() == (reference / "final.bin").read_bytes()
    train("tiny", tiny(eval_interval=2, eval_games=8), evaluated, echo=lines.append)
    assert "nothing to do" in lines[-1]


@needs_snakemake
def test_the_pipeline_does_not_retrain_for_evaluation_settings(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(tiny_config_text(eval_interval=0))
    built_engine(tmp_path)
    target = "results/runs/tiny/final.bin"

    def snakemake(*args):
        return subprocess.run([str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), *args,
                               "--configfile", str(config)], capture_output=True, text=True, timeout=300,
                              env=snakemake_env(), cwd=tmp_path)

    first = snakemake("--cores", "1", target)
    assert first.returncode == 0, first.stderr[-3000:]
    config.write_text(tiny_config_text(eval_interval=2, eval_games=10))
    again = snakemake("-n", target)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout
    config.write_text(tiny_config_text(eval_interval=0, seed=7))
    assert "train" in snakemake("-n", target).stdout   # a setting that changes the weights does retrain


def test_merge_and_elo_refuse_a_ledger_that_a_match_is_writing(tmp_path):
    """merge printed "74 games from 2 shard(s)" over a shard still being played; elo too read it."""
    shard = tmp_path / "r__g.jsonl"
    assert run("match", "random", "greedy", "--games", 4, "--workers", 1, "--out", shard, "--quiet").returncode == 0
    with LedgerWriter(shard):               # as a running match holds it
        for args in (["merge", shard, "--out", tmp_path / "m.jsonl"], ["elo", shard, "--out", tmp_path / "elo"]):
            refused = run(*args)
            assert (refused.returncode, refused.stderr) == (2, (
                f"gcpipe: error: ledger {shard} is being written by process {os.getpid()}; wait for it to finish "
                "(its games are not all played yet)\n"))
    assert not (tmp_path / "m.jsonl").exists() and not (tmp_path / "elo").exists()
    assert run("merge", shard, "--out", tmp_path / "m.jsonl").returncode == 0   # once it is done


def test_a_ledger_path_must_end_in_jsonl(tmp_path):
    """--out s/x.txt and --out s/x.jsonl shared the summary s/x.json; --out newdir/ wrote a file newdir."""
    for out in ("x.txt", "x", ".jsonl"):
        one_line_error(run("match", "random", "greedy", "--games", 2, "--out", tmp_path / out),
                       rf"^gcpipe: error: ledger {tmp_path / out} does not end in \.jsonl; name it so")
    for command in (["match", "random", "greedy", "--games", 2], ["merge", tmp_path / "a.jsonl"]):
        one_line_error(run(*command, "--out", f"{tmp_path}/newdir/"),
                       rf"^gcpipe: error: --out {tmp_path}/newdir/ is a folder; give the ledger's file name")
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_a_forged_game_in_a_ledger_is_not_counted(tmp_path):
    """A line with a valid seed added after game 9: `--games 10` reported 11 games."""
    ledger = tmp_path / "r__g.jsonl"
    assert run("match", "random", "greedy", "--games", 11, "--workers", 1, "--out", ledger, "--quiet").returncode == 0
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(b"".join(lines[:10]) + lines[10].replace(b'"game":10,', b'"game":57,').replace(
        str(game_seed(0, 1, 10)).encode(), str(game_seed(0, 1, 57)).encode()))
    assert [record["game"] for record in read_ledger(ledger)][-1] == 57    # a valid record
    refused = run("match", "random", "greedy", "--games", 10, "--out", ledger)
    assert (refused.returncode, refused.stderr) == (2, (
        f"gcpipe: error: {ledger} holds game(s) 57, outside the games 0-9 asked for (a match's summary is of "
        "exactly the games asked for); ask for the games it holds (--first-game, --games), or give another --out\n"))
    replaced = run("match", "random", "greedy", "--games", 10, "--out", ledger, "--replace-others", "--quiet")
    assert replaced.returncode == 0 and "10 games" in replaced.stdout, replaced.stdout
    assert ledger.read_bytes() == b"".join(lines[:10])


def test_an_integer_beyond_python_s_digit_limit_is_one_line(tmp_path):
    """A 146-line traceback (ValueError: Exceeds the limit (4300 digits) for integer string conversion)."""
    config = tmp_path / "c.yaml"
    config.write_text("players: {m: {kind: mcts, iterations: " + "9" * 5000 + "}}\n")
    one_line_error(run("config", config), rf"^gcpipe: error: config {config}:1: a number of 5,000 characters, beyond "
                                          r"any setting's range \(and beyond the 4,300 digits Python reads\)$")
    ledger = tmp_path / "r__g.jsonl"
    assert run("match", "random", "greedy", "--games", 2, "--workers", 1, "--out", ledger, "--quiet").returncode == 0
    first, second = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(first.replace(b'"game":0,', b'"game":' + b"9" * 5000 + b",") + second)
    for args in (["merge", ledger, "--out", tmp_path / "m.jsonl"], ["match", "random", "greedy", "--games", 2,
                                                                    "--out", ledger]):
        one_line_error(run(*args), rf"^gcpipe: error: {ledger}:1: a number of over 4,300 digits, which no valid "
                                   r"record holds$")
