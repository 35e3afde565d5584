"""profiles/slurm on a live SLURM cluster (opt-in: `pytest -m cluster`; the default run leaves it
out).  The smoke DAG through the profile gives the same bytes as a local run (ledgers, Elo table,
trained checkpoints), and a training job cancelled mid-way with scancel continues from its saved
state when the profile's retry resubmits it.  A training job of two tasks (expert iteration, PPO)
runs its two ranks as one srun step and writes the bytes of a one-process run.

A one-node cluster on a Debian machine (root): profiles/slurm/testcluster.sh up; afterwards
profiles/slurm/testcluster.sh down.  The account and partition default to that cluster's
(GCPIPE_SLURM_ACCOUNT, GCPIPE_SLURM_PARTITION choose others).
"""
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from gcpipe.config import load_config
from gcpipe.workflow import match_plan

from processes import default_signals

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
SMOKE = REPO / "config" / "smoke.yaml"
ACCOUNT = os.environ.get("GCPIPE_SLURM_ACCOUNT", "gcpipe")
PARTITION = os.environ.get("GCPIPE_SLURM_PARTITION", "debug")

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module", autouse=True)
def cluster():
    if shutil.which("sbatch") is None:
        pytest.skip("SLURM is not installed: profiles/slurm/testcluster.sh up installs (Debian, as root) "
                    "and starts a one-node cluster")
    if subprocess.run(["sinfo", "-h"], capture_output=True).returncode != 0:
        pytest.skip("no SLURM cluster answers (sinfo failed): profiles/slurm/testcluster.sh up starts one")


def snakemake(workdir: Path, *args) -> subprocess.Popen:
    """Snakemake in `workdir`, its output in workdir/snakemake.log."""
    env = dict(os.environ, PATH=f"{SNAKEMAKE.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / "snakemake.log", "w") as log:
        return subprocess.Popen([str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "-d", str(workdir), *args],
                                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir,
                                preexec_fn=default_signals)   # it may be sent SIGTERM


def finish(process: subprocess.Popen, workdir: Path, timeout: float) -> str:
    """Waits for Snakemake; on timeout stops it (it cancels its jobs) and fails."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.terminate()
        process.wait(timeout=120)
        pytest.fail(f"snakemake in {workdir} took over {timeout:.0f} s:\n"
                    + (workdir / "snakemake.log").read_text()[-3000:])
    log = (workdir / "snakemake.log").read_text()
    assert process.returncode == 0, log[-3000:]
    return log


def smoke_config(folder: Path) -> Path:
    """The smoke config with the baseline trained for 128 epochs instead of 2 (a few seconds),
    so that the test can cancel it between its first saved state and its end every time."""
    config = yaml.safe_load(SMOKE.read_text())
    config["runs"]["baseline"]["total_timesteps"] = 128 * 1024
    path = folder / "smoke.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def slurm_args(config: Path):
    """The command of docs/cluster.md for the test cluster: the profile as shipped, sized for a 2-core node
    (and at the local run's training threads: trained weights depend on the thread count), with
    job states polled every 10 s instead of 40 so that the test ends sooner."""
    return ["--profile", str(REPO / "profiles" / "slurm"), "elo_table", "--configfile", str(config),
            "--default-resources", f"slurm_account={ACCOUNT}", f"slurm_partition={PARTITION}",
            "--set-threads", "train=2", "match=2", "--set-resources", "train:mem_mb=8000",
            "--slurm-init-seconds-before-status-checks", "10"]


def digests(results: Path) -> dict[str, str]:
    """Ledgers (shards too), tables, plots, the game viewer's pictures and the trained checkpoints."""
    files = [p for folder in ("matches", "elo", "games") for p in (results / folder).rglob("*.*")]
    files += (results / "runs").glob("*/final.bin")
    return {str(p.relative_to(results)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(files)}


def running_job(comment_prefix: str) -> str | None:
    """The id of the running job whose comment (rule and wildcards, set by the executor) starts so."""
    queue = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"], capture_output=True, text=True).stdout
    return next((job for job, comment in (line.split("|", 1) for line in queue.splitlines())
                 if comment.startswith(comment_prefix)), None)


def test_smoke_dag_through_slurm_matches_a_local_run_and_resumes_a_cancelled_job(tmp_path):
    config = smoke_config(tmp_path)
    start = time.monotonic()
    local_log = finish(snakemake(tmp_path / "local", "--cores", "2", "elo_table", "--configfile", str(config)),
                       tmp_path / "local", timeout=1200)
    local_seconds = time.monotonic() - start

    start = time.monotonic()
    run = tmp_path / "slurm"
    cluster = snakemake(run, *slurm_args(config))
    training = run / "results" / "runs" / "baseline"
    cancelled = None
    # Cancel the baseline training once it has saved its state and before it finishes.
    while cluster.poll() is None and cancelled is None:
        if (training / "state.pt").exists() and not (training / "final.bin").exists():
            cancelled = running_job("rule_train_wildcards_baseline")
            if cancelled:
                subprocess.run(["scancel", cancelled], check=True)
        time.sleep(0.2)
    cluster_log = finish(cluster, run, timeout=1800)
    cluster_seconds = time.monotonic() - start
    print(f"\nsmoke DAG: {local_seconds:.0f} s locally, {cluster_seconds:.0f} s through SLURM")

    assert cancelled, "the baseline training finished before it could be cancelled"
    state = subprocess.run(["sacct", "-X", "-n", "-P", "-j", cancelled, "-o", "State"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert state[0].startswith("CANCELLED"), state
    # The profile's retry resubmitted it, and the training continued from its saved state.
    assert "continuing from its saved state at step" in (run / "results" / "logs" / "train" / "baseline.log").read_text()
    compared = digests(run / "results")
    assert compared == digests(tmp_path / "local" / "results")
    cells = match_plan(load_config(config))
    assert {f"matches/{cell.name}.jsonl" for cell in cells} | {"elo/ratings.md", "runs/baseline/final.bin"} <= set(compared)
    # The cluster run was not held to the submit host's cores (see the Snakefile's `cpus`).
    assert 'Provided resources: cpus=Resource("cpus"' in local_log
    assert 'Provided resources: cpus=Resource("cpus"' not in cluster_log


@pytest.mark.parametrize("algorithm", ["expert", "ppo"])
def test_a_training_job_of_two_tasks_gives_the_bytes_of_a_local_run(tmp_path, algorithm, one_thread):
    """docs/distributed.md's sbatch line: the job's script runs `gcpipe train` for a run of ranks 2,
    which starts its two ranks as one srun step over the job's tasks."""
    from test_expert import EXPERT
    from test_ranks import PPO_RANKS, assert_same_run

    from gcpipe.train.config import make_config
    from gcpipe.train.run import train

    settings = dict(EXPERT, expert_iterations=3) if algorithm == "expert" else PPO_RANKS
    local = train("x", make_config(settings), tmp_path / "local")
    config = tmp_path / "config.yaml"
    runs = {"x": {**settings, "ranks": 2}}
    config.write_text(yaml.safe_dump({"players": {"g": {"kind": "greedy"}}, "runs": runs}, sort_keys=False))
    gcpipe = Path(sys.executable).with_name("gcpipe")
    job = subprocess.run(["sbatch", "--wait", "--parsable", "--ntasks", "2", "--cpus-per-task", "1",
                          "--account", ACCOUNT, "--partition", PARTITION, "--output", str(tmp_path / "job.log"),
                          "--wrap", f"{gcpipe} train x --config {config} --out {tmp_path / 'slurm'} --threads 1"],
                         capture_output=True, text=True, timeout=900)
    log = (tmp_path / "job.log").read_text() if (tmp_path / "job.log").exists() else ""
    assert job.returncode == 0, job.stderr + log
    steps = subprocess.run(["sacct", "-n", "-P", "-j", job.stdout.strip().split(";")[0], "-o", "JobName,NTasks"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert any(step.endswith("|2") for step in steps), steps    # the ranks ran as one step of two tasks
    assert_same_run(local, tmp_path / "slurm")
