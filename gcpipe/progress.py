"""Progress of long commands (matches, training), one look for all: done/total, rate, ETA and a
running score.  On a terminal it is a rich progress bar redrawn in place; otherwise (Snakemake
logs, pipes) the same text as a plain line every `interval` seconds and once at the end."""
from __future__ import annotations

import math
import sys
import time
from datetime import timedelta
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from gcpipe.errors import print_stderr


class Meter:
    """Use as a context manager; `advance` after each piece of work.  `completed` counts work done
    before this command (a resumed match or training): it shows in done/total but not in the rate.
    `write` receives the plain lines (default: stderr, or the bar when stderr is a terminal)."""

    def __init__(self, label: str, total: int, unit: str, *, completed: int = 0, score: str = "",
                 enabled: bool = True, write: Callable[[str], None] | None = None, interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.label, self.total, self.unit = label, total, unit
        self.done, self.score = completed, score
        self._start_done, self._clock = completed, clock
        self._start = self._last = clock()
        self._write = write or print_stderr
        self._interval = interval
        self._bar: Progress | None = None
        self._stopped = False
        self.enabled = enabled
        if enabled and write is None and sys.stderr.isatty():
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[text]}"),
                                 console=Console(file=sys.stderr), refresh_per_second=4)
            self._task = self._bar.add_task(label, total=total, completed=completed, text=self.text())

    def __enter__(self) -> "Meter":
        self._draw(lambda bar: bar.start())
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._draw(lambda bar: bar.stop())
        elif self.enabled and exc[0] is None:
            self._write(self.line())

    def _draw(self, action) -> None:
        """`action` on the bar, if any.  A terminal that went away (a closed ssh session, its hang-up
        ignored) fails the drawing: the progress stops showing, and the command's results are
        still written (the error had skipped a match's summary)."""
        if self._bar is None:
            return
        try:
            action(self._bar)
        except OSError:
            self._bar = None
            self.enabled = False

    def advance(self, amount: int, score: str | None = None) -> None:
        self.done += amount
        if score is not None:
            self.score = score
        if self._bar is not None:
            self._draw(lambda bar: bar.update(self._task, completed=self.done, text=self.text()))
        elif self.enabled and self._clock() - self._last >= self._interval:
            self._last = self._clock()
            self._write(self.line())

    def stop_early(self) -> None:
        """The work ends short of `total` (a sequential test that decided): no ETA from here on."""
        self._stopped = True

    def text(self) -> str:
        elapsed = self._clock() - self._start
        rate = (self.done - self._start_done) / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else math.inf
        parts = [f"{self.done:,}/{self.total:,} {self.unit}", f"{_rate(rate)} {self.unit}/s"]
        parts += [] if self._stopped else [f"ETA {_hms(eta)}"]
        return "  ".join(parts + ([self.score] if self.score else []))

    def line(self) -> str:
        return f"{self.label}: {self.text()}"


def _rate(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.1f}"


def _hms(seconds: float) -> str:
    """H:MM:SS, as rich writes times."""
    return "-:--:--" if not math.isfinite(seconds) or seconds >= 1e12 else str(timedelta(seconds=round(seconds)))
