"""Child processes in tests: the children of a running command, as the kernel lists them (its
workers), and the signal dispositions of a child that a test signals."""
import signal
from pathlib import Path

# What a test sends, or what a child of a test relies on: a job started with `&` by a
# non-interactive shell inherits SIGINT and SIGQUIT ignored (POSIX), and a child inherits
# ignored dispositions and the blocked-signal mask, so a test run in the background sent SIGINT
# to a child that ignored it.
SIGNALS_SENT = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)


def children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def default_signals() -> None:
    """The child's signals as a terminal's foreground command has them, whatever the test run
    inherited: SIGNALS_SENT at their default action, none blocked.  Use as subprocess's
    `preexec_fn` (or call first thing in a forked child) for every child a test signals."""
    for number in SIGNALS_SENT:
        signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
