"""The progress meter of long commands: what its plain lines say (logs, pipes) and when."""
import pytest
from typer.testing import CliRunner

from gcpipe.cli import app
from gcpipe.progress import Meter


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_plain_lines_every_interval_and_at_the_end():
    clock, lines = Clock(), []
    # A resumed cell: 20 of 100 games were played before; the rate counts this run's games only.
    with Meter("g__c", 100, "games", completed=20, score="Guerrilla-COIN 5-15", write=lines.append,
               interval=10, clock=clock) as meter:
        clock.now = 5
        meter.advance(10, "Guerrilla-COIN 8-22")
        assert lines == []                        # within the interval: nothing yet
        clock.now = 10
        meter.advance(10, "Guerrilla-COIN 9-31")
        clock.now = 12
        meter.advance(30)
        clock.now = 20
        meter.advance(30, "Guerrilla-COIN 40-60")
    assert lines == ["g__c: 40/100 games  2.0 games/s  ETA 0:00:30  Guerrilla-COIN 9-31",
                     "g__c: 100/100 games  4.0 games/s  ETA 0:00:00  Guerrilla-COIN 40-60",
                     "g__c: 100/100 games  4.0 games/s  ETA 0:00:00  Guerrilla-COIN 40-60"]


def test_rates_and_long_waits_are_readable():
    clock, lines = Clock(), []
    with Meter("run", 10**8, "steps", write=lines.append, clock=clock) as meter:
        clock.now = 4000
        meter.advance(2_000_000, "win G 55% C 40%")
    assert lines[0] == "run: 2,000,000/100,000,000 steps  500 steps/s  ETA 2 days, 6:26:40  win G 55% C 40%"
    disabled = Meter("run", 10, "steps", enabled=False, write=lines.append, clock=clock)
    with disabled:
        clock.now = 5000
        disabled.advance(10)
    assert len(lines) == 2


def test_match_command_reports_progress_on_stderr(tmp_path):
    result = CliRunner().invoke(app, ["match", "greedy", "random", "--games", "30", "--workers", "1",
                                      "--out", str(tmp_path / "cell.jsonl")])
    assert result.exit_code == 0, result.output
    final = result.stderr.strip().splitlines()[-1]
    assert final.startswith("greedy__random: 30/30 games  ") and final.endswith("  Guerrilla-COIN 27-3")
    assert result.stdout.startswith("greedy__random: 30 games, Guerrilla greedy 27 - COIN random 3 ")


def test_a_decided_sprt_line_shows_no_eta(tmp_path):
    # greedy takes nearly every pair from random: H1 is accepted at pair 17, far short of the 10,000
    # pairs of --max-games; the line gave an ETA for the pairs it would never play.
    result = CliRunner().invoke(app, ["compare", "greedy", "random", "--sprt", "0,50", "--games", "10000",
                                      "--workers", "1", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    final = result.stderr.strip().splitlines()[-1]
    assert final.startswith("SPRT greedy vs random: 17/10,000 pairs  ") and "ETA" not in final
    assert final.endswith("  H1 accepted")


@pytest.mark.parametrize("writes_before", [0, 1])
def test_a_terminal_that_went_away_stops_the_bar_not_the_command(monkeypatch, writes_before):
    # A closed ssh session with its hang-up ignored: writes to the terminal fail with EIO (from the
    # start, or once the bar is up), and the bar's final drawing raised out of a match that had
    # played its games, before its summary.
    import errno
    import io

    class GoneTerminal(io.StringIO):
        writes = 0

        def isatty(self):
            return True

        def write(self, text):
            self.writes += 1
            if self.writes > writes_before:
                raise OSError(errno.EIO, "Input/output error")
            return len(text)

    terminal = GoneTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with Meter("g__c", 10, "games") as meter:
        meter.advance(4)
        meter.advance(6)
    assert (meter.done, meter.enabled, terminal.writes > writes_before) == (10, False, True)
