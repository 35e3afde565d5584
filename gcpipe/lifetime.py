"""How long a gcpipe process lives: never longer than the process that started it.

Worker processes (worker_pool) exit with the process that made them and leave Ctrl-C to it.  A
job of the pipeline dies with the Snakemake process that started it: the Snakefile exports
`launcher_token()` (host, PID and start time of its process) as GCPIPE_LAUNCHER, and a job that
finds it set, on the same host, watches that process and stops when it is gone.
Without this, `kill -9` of Snakemake leaves its `gcpipe match` or `gcpipe train` jobs running as
orphans, and the documented recovery (`--unlock`, rerun) would start a second writer next to
them (the ledger and run-folder locks refuse that second writer; this makes the first one go).
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

LAUNCHER_ENV = "GCPIPE_LAUNCHER"


@contextlib.contextmanager
def worker_pool(processes: int, initializer=None, initargs=()):
    """A multiprocessing pool (forked where the OS can), terminated when the block ends, whose
    workers exit with this process, even by kill -9 (no orphans finishing their tasks beside a
    rerun), and ignore SIGINT: Ctrl-C, which reaches the whole process group, interrupts only this
    process, whose exit from the block terminates them.  Interrupted themselves, workers printed
    tracebacks, and one stopped inside the result queue's put held its lock for good: terminate()
    then waited forever.  SIGINT stays blocked while the workers start (each ignores it, then
    unblocks it), so a Ctrl-C meanwhile reaches this process once they have, instead of being lost."""
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})   # inherited by the workers
    try:
        pool = multiprocessing.get_context(method).Pool(processes, initializer=_start_worker,
                                                        initargs=(os.getpid(), initializer, initargs))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
    with pool:
        yield pool


def _start_worker(parent_pid: int, initializer, initargs) -> None:
    # Every worker, the ones a pool starts later to replace a dead one included (their parent's
    # mask and handler are the pool thread's, not worker_pool's).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _exit_with(parent_pid)
    if initializer is not None:
        initializer(*initargs)


def _exit_with(parent_pid: int) -> None:
    """End this process as soon as process `parent_pid` has exited.  Not PR_SET_PDEATHSIG: it fires
    when the parent's thread that started this process ends, and a pool starts replacement workers
    from a thread that ends in terminate(), which then waited forever on a queue lock the killed
    worker held."""
    try:
        pidfd = os.pidfd_open(parent_pid)
    except (AttributeError, OSError):   # no pidfds (not Linux, or before 5.3): ask the kernel now and then
        threading.Thread(target=_poll_parent, args=(parent_pid,), name="parent-watch", daemon=True).start()
        return
    if os.getppid() != parent_pid:   # the parent died before the pidfd was opened
        os._exit(1)
    threading.Thread(target=_wait_for_exit, args=(pidfd, lambda: os._exit(1)), name="parent-watch",
                     daemon=True).start()


def _poll_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(1)


def launcher_token() -> str:
    """This process as GCPIPE_LAUNCHER names it: host, PID and start time (so neither a PID
    on another node of a cluster nor a reused PID is taken for it)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid())}"


def watch_launcher() -> None:
    """When GCPIPE_LAUNCHER names a process on this host, stop this one as soon as that
    process exits (watched through a pidfd).  Does nothing when it is unset or names another host."""
    parts = os.environ.get(LAUNCHER_ENV, "").rsplit(":", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname() or not hasattr(os, "pidfd_open"):
        return
    _, pid_text, started = parts
    # Anything but a PID (Linux's never exceed PID_MAX_LIMIT, 2**22) names no process to watch.
    if (not (pid_text.isascii() and pid_text.isdigit() and len(pid_text) <= 7 and 0 < int(pid_text) <= 2**22)
            or int(pid_text) == os.getpid()):
        return
    pid = int(pid_text)
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        _launcher_gone(pid)
    except OSError:
        return   # not ours to watch (another PID namespace, no permission)
    if _start_time(pid) != started:   # the PID now names another process: the launcher is gone
        _launcher_gone(pid)
    threading.Thread(target=_wait_for_exit, args=(pidfd, lambda: _launcher_gone(pid)), name="launcher-watch",
                     daemon=True).start()


def _start_time(pid: int) -> str:
    """The start time of process `pid` in clock ticks since boot (/proc/PID/stat field 22)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return "?"


def _wait_for_exit(pidfd: int, then) -> None:
    import select

    select.select([pidfd], [], [])   # a pidfd becomes readable when its process exits
    then()


def _launcher_gone(pid: int) -> None:
    print(f"gcpipe: error: the process that started this job (PID {pid}) has exited; stopping "
          f"(finished games and saved states are kept; a rerun continues)", file=sys.stderr, flush=True)
    # SIGKILL, not an exception: the main thread may be deep in C or torch.  Ledger lines and
    # states are written whole (fsynced lines, atomic files), and worker_pool's workers follow.
    os.kill(os.getpid(), signal.SIGKILL)
