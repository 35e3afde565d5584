"""One training run over several processes, its ranks, through torch.distributed (gloo, over TCP).

Launch.  `connect` finds the ranks in the environment, as torch's own launchers set it: RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun, or any launcher that sets them), else the
SLURM_PROCID and SLURM_STEP_NUM_TASKS of an srun step's task, the master address then MASTER_ADDR
or the first node of the step's node list, the port MASTER_PORT or one derived from the job ID.
A run whose `ranks` setting is above 1 started without a launcher starts its ranks itself: as
one srun step from a SLURM job's own process whose allocation has the tasks (start_with_srun),
else on this machine, this process being rank 0 (ranks_here).  One process without a launcher
uses none of this.  Documented in docs/distributed.md.

Checks, before any game: the launcher's number of processes equals the run's `ranks`; every rank
reaches the others within GCPIPE_CONNECT_TIMEOUT seconds (default 120); every rank has the same
gcpipe version, engine build and run record (resolved settings, init and teacher checkpoints),
compared by digest.  Each is one line (UserError).

Messages.  Rank 0, the learner, sends each other rank what to play and receives its games,
rank by rank (point-to-point, so a failed exchange names its rank).  A rank that dies closes its
connections, and the exchange with it fails at once; a rank that stops answering (a hung process,
a lost node) is found by heartbeats: every rank adds to its counter in the store every
BEAT_SECONDS, and a rank whose counter has not moved for GCPIPE_RANK_TIMEOUT seconds (default 60)
stops the run.  Either way the run stops with one line naming the rank; rank 0's saved state is
where a rerun continues.
"""
from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from gcpipe.errors import UserError, print_stderr

CONNECT_TIMEOUT_ENV = "GCPIPE_CONNECT_TIMEOUT"
SILENCE_TIMEOUT_ENV = "GCPIPE_RANK_TIMEOUT"
ARGUMENTS_ENV = "GCPIPE_RANK_ARGUMENTS"    # train's arguments, for the ranks gcpipe starts
BEAT_SECONDS = 2.0
_FOREVER = datetime.timedelta(days=365)   # an exchange waits on its peer; heartbeats bound the wait
_SLURM_PORTS = (20000, 10000)             # SLURM without MASTER_PORT: 20000 + job ID mod 10000


@dataclass(frozen=True)
class Launch:
    """How this process was started as one rank of several."""
    rank: int
    size: int
    address: str
    port: int
    launcher: str            # torchrun (RANK and WORLD_SIZE set), srun, or gcpipe (ranks_here)
    agent_store: bool = False   # torchrun's agent serves the store at address:port


def launch_from(environ) -> Launch | None:
    """The launch `environ` describes, or None for a process on its own."""
    if "RANK" in environ or "WORLD_SIZE" in environ:
        rank, size = _number(environ, "RANK"), _number(environ, "WORLD_SIZE")
        address, port = environ.get("MASTER_ADDR"), environ.get("MASTER_PORT")
        if not address or not port:
            raise UserError("RANK and WORLD_SIZE are set but MASTER_ADDR or MASTER_PORT is not; start the ranks "
                            "with torchrun, or set all four")
        launcher = environ.get("GCPIPE_RANKS_LAUNCHER", "torchrun")
        return _checked(Launch(rank, size, address, _number(environ, "MASTER_PORT"), launcher,
                               environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"))
    # An srun step's task (srun sets SLURM_STEP_NUM_TASKS; a batch script, which is no rank,
    # sees only the allocation's SLURM_NTASKS).
    tasks = environ.get("SLURM_STEP_NUM_TASKS")
    if "SLURM_PROCID" not in environ or not tasks or tasks == "1":
        return None
    nodes = (environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST")
             or environ.get("SLURM_NODELIST") or "")
    address = environ.get("MASTER_ADDR") or first_node(nodes)
    if not address:
        raise UserError("SLURM runs several tasks but names no node (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST); "
                        "set MASTER_ADDR to the first task's host")
    if environ.get("MASTER_PORT"):
        port = _number(environ, "MASTER_PORT")
    else:
        port = _SLURM_PORTS[0] + _number(environ, "SLURM_JOB_ID") % _SLURM_PORTS[1]
    return _checked(Launch(_number(environ, "SLURM_PROCID"), _number(environ, "SLURM_STEP_NUM_TASKS"), address, port,
                           "srun"))


def _number(environ, name: str) -> int:
    text = environ.get(name, "")
    if not (text.isascii() and text.isdigit() and len(text) <= 9):
        raise UserError(f"environment variable {name} is {text!r}, not a whole number")
    return int(text)


def _checked(launch: Launch) -> Launch:
    if not 0 <= launch.rank < launch.size:
        raise UserError(f"the launcher ({launch.launcher}) gave rank {launch.rank} of {launch.size} processes")
    if not 0 < launch.port < 65536:
        raise UserError(f"the master port {launch.port} ({launch.launcher}) is not a TCP port")
    return launch


def first_node(nodes: str) -> str:
    """The first host of a SLURM node list: node[003-005,9],gpu1 -> node003; a-[1-2]-ib -> a-1-ib."""
    match = re.match(r"([^,\[]*)(?:\[([^\]]*)\])?([^,]*)", nodes.strip())
    if not match or not (match.group(1) or match.group(2)):
        return ""
    prefix, ranges, suffix = match.groups()
    return prefix + (ranges.split(",")[0].split("-")[0] if ranges else "") + suffix


def timeout_from(environ, name: str, default: float) -> float:
    text = environ.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")   # refused below
    if not 0 < value < float("inf"):
        raise UserError(f"environment variable {name} is {text!r}, not a number of seconds above 0")
    return value


class Alone:
    """The one rank of a run in one process."""
    rank, size, learner = 0, 1, True

    def mine(self, games: np.ndarray) -> np.ndarray:
        return games

    def deal(self, message) -> None:
        """Nothing to tell: no other ranks."""

    def gather(self, records: list) -> list:
        return records

    def deal_each(self, messages: list) -> None:
        """Nothing to tell: no other ranks."""

    def to_learner(self, item) -> list:
        return [item]

    def share(self, item) -> list:
        return [item]

    def finish(self) -> None:
        """No other ranks to stop."""


class Ranks:
    """This process's view of the run's ranks once they have met: the games it plays, and the
    exchanges of the learner (rank 0) with the others."""

    def __init__(self, launch: Launch, store, peers: list[tuple[str, int]], children: dict, silence: float):
        self.rank, self.size, self.learner = launch.rank, launch.size, launch.rank == 0
        self.launch, self.store, self.peers, self.children, self.silence = launch, store, peers, children, silence
        self._stopping = threading.Lock()
        self._closed = False
        threading.Thread(target=self._heartbeats, name="rank-heartbeats", daemon=True).start()

    def mine(self, games: np.ndarray) -> np.ndarray:
        """The games of `games` (an iteration's indices) this rank plays: index mod ranks."""
        return games[games % self.size == self.rank]

    def deal(self, message) -> None:
        """The learner tells every other rank, in rank order, what to play next."""
        self.deal_each([message] * self.size)

    def gather(self, records: list) -> list:
        """The learner's list of an iteration's games (None for those other ranks played) completed
        with every other rank's, received rank by rank; another rank sends its list and gets []."""
        lists = self.to_learner(records)
        if not self.learner:
            return []
        records = list(records)
        for theirs in lists[1:]:
            for index, record in enumerate(theirs):
                if record is not None:
                    records[index] = record
        return records

    def deal_each(self, messages: list) -> None:
        """The learner tells rank r messages[r] (messages[0] is its own), in rank order."""
        for peer in range(1, self.size):
            self._send(messages[peer], peer)

    def to_learner(self, item) -> list:
        """The learner's list of every rank's `item`, in rank order, received rank by rank; another
        rank sends its own and gets []."""
        if not self.learner:
            self._send(item, 0)
            return []
        return [item] + [self._receive(peer) for peer in range(1, self.size)]

    def share(self, item) -> list:
        """Every rank's `item`, in rank order, on every rank (through the learner)."""
        if not self.learner:
            self._send(item, 0)
            return self._receive(0)
        items = self.to_learner(item)
        for peer in range(1, self.size):
            self._send(items, peer)
        return items

    def orders(self):
        """Another rank's messages from the learner until it says the run is over (None), which
        this rank acknowledges once it has stopped watching the learner (whose exit is then no fault)."""
        while (message := self._receive(0)) is not None:
            yield message
        self._closed = True
        self._send("done", 0)

    def finish(self) -> None:
        """The learner tells the other ranks that the run is over and waits until each has
        acknowledged; they return from `orders`."""
        self.deal(None)
        for peer in range(1, self.size):
            self._receive(peer)
        self._closed = True

    # The exchanges: a length, then the pickled bytes.
    def _send(self, message, peer: int) -> None:
        import torch
        import torch.distributed as dist

        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            dist.isend(torch.tensor([len(data)], dtype=torch.int64), peer).wait(_FOREVER)
            if data:
                dist.isend(torch.frombuffer(bytearray(data), dtype=torch.uint8), peer).wait(_FOREVER)
        except RuntimeError as error:   # gloo's: a closed connection, a timeout
            self._lost(peer, error)

    def _receive(self, peer: int):
        import torch
        import torch.distributed as dist

        try:
            size = torch.zeros(1, dtype=torch.int64)
            dist.irecv(size, peer).wait(_FOREVER)
            data = torch.empty(int(size), dtype=torch.uint8)
            dist.irecv(data, peer).wait(_FOREVER)
        except RuntimeError as error:
            self._lost(peer, error)
        return pickle.loads(data.numpy().tobytes())

    def name(self, peer: int) -> str:
        host, pid = self.peers[peer]
        return f"rank {peer} (PID {pid} on {host})"

    def _lost(self, peer: int, error: Exception):
        """The exchange with `peer` failed: the run stops with one line naming it (UserError)."""
        if not self._stopping.acquire(blocking=False):
            while True:   # the heartbeats have found a silent rank and are stopping the process
                time.sleep(60)
        raise UserError(f"{self.name(peer)} {self._fate(peer, error)}; stopping the run (the saved state is kept: "
                        f"a rerun continues from it)")

    def _fate(self, peer: int, error: Exception | None) -> str:
        child = self.children.get(peer)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(5)
            if child.returncode is not None:
                return f"stopped ({exit_words(child.returncode)})"
        if error is None:
            return f"has not answered for {self.silence:g} s"
        return f"stopped or cannot be reached ({_detail(error)})"

    def _heartbeats(self) -> None:
        """Adds to this rank's counter every BEAT_SECONDS; watches the others' (rank 0 every rank,
        the others rank 0) and stops this process, saying which, when one is silent too long."""
        watched = range(1, self.size) if self.learner else (0,)
        seen = {peer: (-1, time.monotonic()) for peer in watched}
        while not self._closed:
            try:
                self.store.add(f"beat/{self.rank}", 1)
                for peer in watched:
                    count = self.store.add(f"beat/{peer}", 0)
                    if count != seen[peer][0]:
                        seen[peer] = (count, time.monotonic())
                    elif time.monotonic() - seen[peer][1] > self.silence:
                        self._silent(peer, None)
            except RuntimeError as error:   # the store is gone: rank 0, which serves it, stopped
                if self._closed:
                    return
                self._silent(0, error)
            time.sleep(BEAT_SECONDS)

    def _silent(self, peer: int, error: Exception | None) -> None:
        if self._closed or not self._stopping.acquire(blocking=False):
            return
        print_stderr(f"gcpipe: error: {self.name(peer)} {self._fate(peer, error)}; stopping the run (the saved "
                     f"state is kept: a rerun continues from it)")
        stop_children(self.children)
        # Status 2, as a UserError's.  An exit, not an exception: the main thread may be deep in C or in
        # an exchange; the run's files are written whole.
        os._exit(2)

    def close(self) -> None:
        import torch.distributed as dist

        self._closed = True
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def _detail(error: Exception) -> str:
    """The first sentence of a torch or gloo error, without its source location."""
    text = re.sub(r"\[[^\]]*\.(?:cc|cpp|h|hpp):\d+\]\s*", "", " ".join(str(error).split()))
    return text.split(". ")[0].rstrip(".")[:160]


def exit_words(status: int) -> str:
    if status < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-status).name}"
        return f"killed by signal {-status}"
    return f"exited with status {status}"


def stop_children(children: dict, patience: float = 0.0) -> None:
    """Ends the ranks this process started: at once, or after `patience` seconds to end by themselves."""
    deadline = time.monotonic() + patience
    for child in children.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(max(0.0, deadline - time.monotonic()))
        if child.poll() is None:
            child.kill()
    for child in children.values():
        child.wait()


def digest(parts: dict) -> str:
    """A digest of a record of settings (JSON-like values, in a fixed order)."""
    return hashlib.sha256(repr(sorted(parts.items())).encode()).hexdigest()


def engine_digest() -> str:
    """The SHA-256 of the loaded engine extension (the compiled C: its source and build flags)."""
    from gcpipe import _engine

    with open(_engine.__file__, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@contextlib.contextmanager
def connect(run: str, setting: int, agreed: dict, child_arguments=None, environ=None):
    """The run's ranks (Alone for a run in one process) for the block.  `setting`: the run's
    `ranks`; `agreed`: {what: digest} every rank must share (gcpipe version, engine, run record);
    `child_arguments`: what ranks_here's ranks run (train's arguments), for a run that starts its
    own.  On the learner, a normal end of the block tells the others that the run is over."""
    environ = os.environ if environ is None else environ
    launch = launch_from(environ)
    children = {}
    if launch is None:
        if setting == 1:
            yield Alone()
            return
        if child_arguments is None:
            raise UserError(f"run {run} has ranks {setting}, which needs a launcher (torchrun, srun) here")
        launch = Launch(0, setting, "127.0.0.1", 0, "gcpipe")
    elif launch.size != setting:
        raise UserError(f"run {run} has ranks {setting} but {launch.launcher} started {launch.size} processes; "
                        f"set ranks: {launch.size} or start {setting}")
    connect_timeout = timeout_from(environ, CONNECT_TIMEOUT_ENV, 120.0)
    silence = timeout_from(environ, SILENCE_TIMEOUT_ENV, 60.0)
    ranks = None
    try:
        store = _store(launch, connect_timeout, environ)
        if launch.launcher == "gcpipe" and launch.rank == 0:
            launch = Launch(0, setting, "127.0.0.1", store.port, "gcpipe")
            children = ranks_here(launch, child_arguments, environ)
        peers = _meet(launch, store, connect_timeout, agreed)
        ranks = Ranks(launch, store, peers, children, silence)
        yield ranks
        if ranks.learner:
            ranks.finish()
    finally:
        stop_children(children, patience=30.0 if ranks is not None and ranks._closed else 0.0)
        if ranks is not None:
            ranks.close()


def _store(launch: Launch, timeout: float, environ):
    """The rendezvous store: served by rank 0 (by torchrun's agent under torchrun), reached by the others."""
    import torch.distributed as dist

    serve = launch.rank == 0 and not launch.agent_store
    try:
        with _quiet_stderr():
            store = dist.TCPStore(launch.address, launch.port, launch.size, serve,
                                  timeout=datetime.timedelta(seconds=timeout), wait_for_workers=False)
    except (RuntimeError, OSError) as error:   # DistNetworkError and DistStoreError are RuntimeErrors
        what = (f"cannot serve the rendezvous on port {launch.port} of {launch.address}" if serve else
                f"cannot reach the master at {launch.address}:{launch.port} within {timeout:g} s")
        raise UserError(f"rank {launch.rank} of {launch.size} ({launch.launcher}): {what} "
                        f"({_detail(error)})") from None
    if launch.agent_store:
        store = dist.PrefixStore(f"/worker/attempt_{environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)
    return store


def _meet(launch: Launch, store, timeout: float, agreed: dict) -> list[tuple[str, int]]:
    """Joins the process group and compares the ranks' digests: every rank's (host, PID)."""
    import torch.distributed as dist

    try:
        with _quiet_stderr():
            dist.init_process_group("gloo", store=store, rank=launch.rank, world_size=launch.size,
                                    timeout=datetime.timedelta(seconds=timeout))
            everyone = [None] * launch.size
            dist.all_gather_object(everyone, (socket.gethostname(), os.getpid(), agreed))
    except RuntimeError as error:
        raise UserError(f"rank {launch.rank} of {launch.size} ({launch.launcher}): the ranks did not all meet "
                        f"within {timeout:g} s at {launch.address}:{store.port if hasattr(store, 'port') else '?'} "
                        f"({_detail(error)})") from None
    peers = [(host, pid) for host, pid, _ in everyone]
    for rank, (host, pid, theirs) in enumerate(everyone):
        differ = [what for what in agreed if theirs.get(what) != agreed[what]]
        if differ:
            raise UserError(f"rank {rank} (PID {pid} on {host}) has another {' and '.join(differ)} than rank "
                            f"{launch.rank}; every rank must run the same gcpipe on the same run")
    return peers


@contextlib.contextmanager
def _quiet_stderr():
    """Standard error (descriptor 2) on /dev/null for the block: c10d's C++ logs each failed try to
    connect there, in many lines; the failure itself is said in one (UserError)."""
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def ranks_here(launch: Launch, arguments: dict, environ) -> dict:
    """Starts ranks 1..size-1 of a run on this machine (`python -m gcpipe.train.ranks`, train's
    arguments in GCPIPE_RANK_ARGUMENTS).  They stop when this process, rank 0, does: its
    connections close, or its heartbeats stop (GCPIPE_LAUNCHER still names whatever started it)."""
    children = {}
    for rank in range(1, launch.size):
        env = {**environ, "RANK": str(rank), "WORLD_SIZE": str(launch.size), "MASTER_ADDR": launch.address,
               "MASTER_PORT": str(launch.port), "GCPIPE_RANKS_LAUNCHER": "gcpipe", ARGUMENTS_ENV: _encode(arguments)}
        children[rank] = subprocess.Popen([sys.executable, "-m", "gcpipe.train.ranks"], env=env)
    return children


def srun_allocation(environ, size: int) -> bool:
    """Whether this process is a SLURM job's own (its batch script, no srun step) in an
    allocation of at least `size` tasks, where srun can start the ranks over its nodes."""
    tasks = environ.get("SLURM_NTASKS", "")
    return ("SLURM_JOB_ID" in environ and "SLURM_STEP_NUM_TASKS" not in environ and tasks.isdigit()
            and int(tasks) >= size and shutil.which("srun") is not None)


def start_with_srun(run: str, arguments: dict, size: int, environ) -> None:
    """Runs the `size` ranks of a run as the tasks of one srun step over the job's nodes and waits
    for them (their messages reach this job's standard error).  UserError when they fail."""
    with socket.socket() as probe:   # a free port here, on the allocation's first node, rank 0's
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    command = ["srun", "--ntasks", str(size), "--kill-on-bad-exit=1"]
    if environ.get("SLURM_CPUS_PER_TASK"):   # srun no longer inherits sbatch's (SLURM 22.05)
        command += ["--cpus-per-task", environ["SLURM_CPUS_PER_TASK"]]
    env = {**environ, "MASTER_PORT": str(port), ARGUMENTS_ENV: _encode(arguments)}
    status = subprocess.run(command + [sys.executable, "-m", "gcpipe.train.ranks"], env=env).returncode
    if status:
        raise UserError(f"run {run}: the {size} ranks srun started stopped ({exit_words(status)} from srun; the "
                        f"ranks' own lines are above)")


def _encode(arguments: dict) -> str:
    return base64.b64encode(pickle.dumps(arguments)).decode("ascii")


def _rank_here() -> None:
    """A rank started by ranks_here or start_with_srun: train's arguments from GCPIPE_RANK_ARGUMENTS."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the first rank's (the launcher's) to handle
    from gcpipe.lifetime import watch_launcher
    from gcpipe.train.run import train

    watch_launcher()
    arguments = pickle.loads(base64.b64decode(os.environ.pop(ARGUMENTS_ENV)))
    try:
        train(**arguments)
    except UserError as error:
        print_stderr(f"gcpipe: error: rank {os.environ.get('RANK')}: {error}")
        sys.exit(1)


if __name__ == "__main__":
    _rank_here()
