"""How long a gcpipe process lives: never longer than the process that started it.

A match's worker processes die with the match (PR_SET_PDEATHSIG).  A job of the pipeline dies
with the Snakemake process that started it: the Snakefile exports its own PID as
GCPIPE_LAUNCHER_PID, and a job that finds it set watches that process and stops when it is gone.
Without this, `kill -9` of Snakemake leaves its `gcpipe match` or `gcpipe train` jobs running as
orphans, and the documented recovery (`--unlock`, rerun) would start a second writer next to
them (the ledger and run-folder locks refuse that second writer; this makes the first one go).
"""
from __future__ import annotations

import os
import signal
import sys
import threading

LAUNCHER_ENV = "GCPIPE_LAUNCHER_PID"


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel kill this process when its parent exits (Linux), and exit now if the
    parent `parent_pid` is already gone."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent_pid:   # the parent died before prctl took effect
        os._exit(1)


def watch_launcher() -> None:
    """When GCPIPE_LAUNCHER_PID names a process, stop this one as soon as that process exits
    (a pidfd, so a reused PID cannot fool it).  Does nothing when the variable is unset."""
    text = os.environ.get(LAUNCHER_ENV, "")
    if not text.isdigit() or not hasattr(os, "pidfd_open"):
        return
    pid = int(text)
    if pid == os.getpid():
        return
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        _launcher_gone(pid)
    except OSError:
        return   # not ours to watch (another PID namespace, no permission)
    threading.Thread(target=_wait_for_exit, args=(pidfd, pid), name="launcher-watch", daemon=True).start()


def _wait_for_exit(pidfd: int, pid: int) -> None:
    import select

    select.select([pidfd], [], [])   # a pidfd becomes readable when its process exits
    _launcher_gone(pid)


def _launcher_gone(pid: int) -> None:
    print(f"gcpipe: error: the process that started this job (PID {pid}) has exited; stopping "
          f"(finished games and saved states are kept; a rerun continues)", file=sys.stderr, flush=True)
    # SIGKILL, not an exception: the main thread may be deep in C or torch.  Ledger lines and
    # states are written whole (fsynced lines, atomic files), and a match's workers follow
    # through PR_SET_PDEATHSIG.
    os.kill(os.getpid(), signal.SIGKILL)
