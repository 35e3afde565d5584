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
import multiprocessing.connection
import os
import pickle
import signal
import socket
import threading
import time
import traceback
from pathlib import Path

from gcpipe.errors import UserError, print_stderr

LAUNCHER_ENV = "GCPIPE_LAUNCHER"


class WorkerDied(UserError):
    """A worker process ended while the pool needed it (killed from outside: the kernel's
    out-of-memory killer, a `kill`); its task's result is lost, so the command stops."""


@contextlib.contextmanager
def worker_pool(processes: int, initializer=None, initargs=()):
    """`processes` worker processes (forked where the OS can), each running initializer(*initargs)
    once, then tasks handed to it one at a time over its own pipe; stopped when the block ends.

    Not multiprocessing.Pool: its workers share queues guarded by locks, so a worker killed from
    outside could die holding one (Pool's terminate() then waited forever), and the task a killed
    worker held was lost while Pool started a replacement and waited for that task's result for
    good: a match hung, its ledger locked.  Here no lock is shared, and a worker's death stops the
    command with one line (WorkerDied).  Workers exit with this process, even by kill -9 (no
    orphans finishing their tasks beside a rerun), and ignore SIGINT: Ctrl-C, which reaches the
    whole process group, interrupts only this process, whose exit from the block stops them.
    SIGINT stays blocked while the workers start (each ignores it, then unblocks it), so a Ctrl-C
    meanwhile reaches this process once they have, instead of being lost."""
    if processes < 1:
        raise ValueError(f"a worker pool needs at least one process, got {processes}")
    pool = _WorkerPool()
    try:
        pool.start(processes, initializer, initargs)
        yield pool
    finally:
        pool.stop()


class _WorkerPool:
    def __init__(self):
        self._workers: list[_Worker] = []
        self._owed: list[_Worker] = []
        self._serving = False   # an imap is under way: its workers' answers are its own

    def start(self, processes: int, initializer, initargs) -> None:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        context = multiprocessing.get_context(method)
        previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})   # inherited by the workers
        try:
            for _ in range(processes):
                ours, theirs = context.Pipe()
                process = context.Process(target=_serve, args=(theirs, os.getpid(), initializer, initargs),
                                          name="gcpipe-worker", daemon=True)
                self._workers.append(_Worker(process, ours))
                try:
                    process.start()
                finally:
                    theirs.close()   # the worker's end stays in the worker alone: its death reads as EOF here
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)

    def imap(self, function, tasks):
        """function(task) for every task, computed by the workers; yields the results in task order.
        One at a time: a second imap before the first ends would take the first's answers."""
        if self._serving:
            raise RuntimeError("this worker pool is serving another imap; finish or close it first")
        self._settle()
        pending = enumerate(tasks)
        idle, busy = list(reversed(self._workers)), {}
        finished, next_index = {}, 0
        self._serving = True
        try:
            while True:
                while idle and (task := next(pending, None)) is not None:
                    worker = idle.pop()
                    worker.send((function, task[1]))
                    busy[worker] = task[0]
                while next_index in finished:
                    yield finished.pop(next_index)
                    next_index += 1
                if not busy:
                    return
                ready = set(multiprocessing.connection.wait([worker.connection for worker in busy]
                                                            + [worker.process.sentinel for worker in self._workers]))
                for worker in self._workers:
                    if worker.connection in ready and worker in busy:
                        index = busy.pop(worker)   # before its answer is read: an error is an answer too
                        finished[index] = worker.receive()
                        idle.append(worker)
                    elif worker.process.sentinel in ready:
                        raise worker.died()
        finally:
            self._owed.extend(busy)   # stopped early (an error, a consumer that stopped reading)
            self._serving = False

    def _settle(self) -> None:
        """Reads and drops the answers still owed to an imap that stopped early, so that a later
        task's answer is its own."""
        while self._owed:
            try:
                self._owed.pop().receive()
            except WorkerDied:
                raise
            except Exception:   # the error of a task whose imap is over
                pass

    def map(self, function, tasks) -> list:
        return list(self.imap(function, tasks))

    def starmap(self, function, tasks) -> list:
        return self.map(_Star(function), tasks)

    def stop(self) -> None:
        for worker in self._workers:
            if worker.process.pid is not None:
                worker.process.kill()   # its tasks are done, or their results no longer wanted
        for worker in self._workers:
            if worker.process.pid is not None:
                worker.process.join()
            worker.process.close()   # its sentinel
            worker.connection.close()


class _Worker:
    def __init__(self, process, connection):
        self.process, self.connection = process, connection

    def send(self, message) -> None:
        try:
            self.connection.send(message)
        except (BrokenPipeError, ConnectionResetError):
            raise self.died() from None

    def receive(self):
        try:
            succeeded, value, remote_traceback = self.connection.recv()
        except (EOFError, ConnectionResetError):   # it died before its whole answer was written
            raise self.died() from None
        if succeeded:
            return value
        if remote_traceback:   # as Pool shows it: the worker's traceback as the cause
            value.__cause__ = _RemoteTraceback(remote_traceback)
        raise value

    def died(self) -> WorkerDied:
        self.process.join(5)
        code = self.process.exitcode
        if code is None:   # its pipe broke, yet it runs on
            how = "stopped answering"
        elif code < 0:
            how = f"was killed by {_signal_name(-code)}"
            if -code == signal.SIGKILL:
                how += " (what the kernel's out-of-memory killer sends)"
        else:
            how = f"exited with status {code}"
        return WorkerDied(f"worker process {self.process.pid} {how}; a rerun continues from what was saved")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:   # a real-time signal
        return f"signal {number}"


class _RemoteTraceback(Exception):
    def __str__(self):
        return self.args[0]


class _Star:
    """function(*task), picklable (a lambda is not)."""

    def __init__(self, function):
        self.function = function

    def __call__(self, task):
        return self.function(*task)


def _serve(connection, parent_pid: int, initializer, initargs) -> None:
    """A worker's life: the initializer, then each task's (succeeded, result or exception,
    traceback text) sent back, until the pool stops it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _exit_with(parent_pid)
    failure = None
    if initializer is not None:
        try:
            initializer(*initargs)
        except BaseException as error:   # every task then answers with it: the pool raises it once
            failure = _failure(error)
    while True:
        try:
            function, task = connection.recv()
        except EOFError:
            return
        except Exception as error:   # a task that cannot be rebuilt here (out of memory): its answer
            connection.send(_failure(error))
            continue
        if failure is None:
            try:
                answer = (True, function(task), "")
            except BaseException as error:
                answer = _failure(error)
        else:
            answer = failure
        try:
            connection.send(answer)
        except Exception as error:   # a result that cannot be pickled
            connection.send(_failure(error))


def _failure(error: BaseException) -> tuple:
    """The answer for a task that raised `error`, as the parent is to raise it: a SystemExit or
    KeyboardInterrupt of a task is its bug, not the parent's exit or Ctrl-C."""
    text = "".join(traceback.format_exception(error))
    portable = isinstance(error, Exception)
    if portable:
        try:
            pickle.loads(pickle.dumps(error))   # some exceptions pickle but cannot be rebuilt from their args
        except Exception:
            portable = False
    if not portable:
        error = (UserError(str(error)) if isinstance(error, UserError) else
                 RuntimeError(f"{type(error).__name__} in a worker: {error}"))
    return False, error, text


def _exit_with(parent_pid: int) -> None:
    """End this process as soon as process `parent_pid` has exited.  Not PR_SET_PDEATHSIG: it fires
    when the parent's *thread* that started this process ends (multiprocessing.Pool's workers,
    replaced from a thread of its own, were killed when that thread ended in terminate())."""
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
    print_stderr(f"gcpipe: error: the process that started this job (PID {pid}) has exited; stopping "
                 f"(finished games and saved states are kept; a rerun continues)")
    # SIGKILL, not an exception: the main thread may be deep in C or torch.  Ledger lines and
    # states are written whole (fsynced lines, atomic files), and worker_pool's workers follow.
    os.kill(os.getpid(), signal.SIGKILL)
