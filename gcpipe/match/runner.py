"""The match runner: the games of a cell across worker processes, one ledger line per game.

A game depends only on its seed (rules.md §8): both players draw from the game's own generator,
bots move in C, networks are batched across the games a worker runs at once, and search and
OpenSpiel players choose through the batched player protocol.  The parent
process appends finished games to the ledger in game-index order, so the ledger's bytes do not
depend on the number of workers, on chunking, or on where an earlier run was killed.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from gcpipe._engine import ffi, lib
from gcpipe.engine import GameBatch
from gcpipe.engine.bots import TOURNAMENT_PLY_CAP as PLY_CAP, mcts_workspace
from gcpipe.engine.game import END_REASONS
from gcpipe.errors import UserError
from gcpipe.match.ledger import LedgerWriter, cell_name, write_summary
from gcpipe.match.players import AGENT_KINDS, Player, PlayerBook, make_agent

MATCHES_DIR = Path("results") / "matches"
NET_SLOTS = 256                  # concurrent games per worker when a network plays
NET_CHUNK = 512                  # games per task when a network plays
BOT_CHUNK = 1000                 # games per task between random/greedy bots (microseconds each)
_WINNER_NAMES = {1: "guerrilla", 2: "coin"}


def game_seed(a: int, b: int, g: int) -> int:
    """rules.md §8: the generator state of game g between roster positions a (Guerrilla), b (COIN)."""
    return ((0x9E3779B9 * ((a * 16 + b) * 100003 + g)) & 0xFFFFFFFF) | 1


@dataclass(frozen=True)
class MatchResult:
    ledger: Path
    summary_path: Path
    summary: dict
    played: int          # games played by this call (0 when the ledger already held them all)


# -- playing games in one process -----------------------------------------------------------
class CellPlayer:
    """Plays games of one cell in this process, reusing its nets, bots, agents and game slots."""

    def __init__(self, guerrilla: Player, coin: Player, slots: int = NET_SLOTS):
        self.players = (guerrilla, coin)
        # One node pool serves both sides: searches never overlap within a process.
        self._workspace = mcts_workspace(*(p.bot for p in self.players if p.bot is not None))
        self._bots = [p.bot.c_bot() if p.bot is not None else None for p in self.players]
        self._nets = [_network(p) if p.kind == "net" else None for p in self.players]
        # Players of the batched protocol (start, new_games, observe, choose): search, OpenSpiel.
        self._agents = [make_agent(p) if p.kind in AGENT_KINDS else None for p in self.players]
        self._slots = slots
        if not all(self._bots):
            self._batch = GameBatch(slots)
            for player in (*self._nets, *self._agents):
                if player is not None:
                    player.start(slots)

    def play(self, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Plays one game per seed; returns winners (1 Guerrilla, 2 COIN), plies and end reasons."""
        seeds = np.ascontiguousarray(seeds, dtype=np.uint32)
        n = len(seeds)
        winners, plies, ends = np.zeros(n, np.uint8), np.zeros(n, np.uint16), np.zeros(n, np.uint8)
        if all(self._bots):
            code = lib.gc_play_bot_games(n, ffi.from_buffer("uint32_t[]", seeds), self._bots[0], self._bots[1],
                                         self._workspace, PLY_CAP, ffi.from_buffer("uint8_t[]", winners),
                                         ffi.from_buffer("uint16_t[]", plies), ffi.from_buffer("uint8_t[]", ends))
            if code < 0:
                raise RuntimeError(f"the engine refused a bot configuration (code {code})")
            return winners, plies, ends
        self._play_batched(seeds, winners, plies, ends)
        return winners, plies, ends

    def _play_batched(self, seeds, winners, plies, ends) -> None:
        """Games in `self._slots` slots; a finished game's slot takes the next game at once."""
        batch, states = self._batch, self._batch.states
        slot_game = np.full(self._slots, -1, np.int64)
        next_game = 0

        def start_games(free_slots):
            nonlocal next_game
            started = []
            for slot in free_slots:
                if next_game == len(seeds):
                    break
                batch.reset(slot, int(seeds[next_game]))
                slot_game[slot] = next_game
                started.append(slot)
                next_game += 1
            if started:
                for net in self._nets:
                    if net is not None:
                        net.reset(np.array(started))
                for agent in self._agents:
                    if agent is not None:
                        agent.new_games(np.array(started))

        start_games(range(self._slots))
        while True:
            active = np.flatnonzero(slot_game >= 0)
            if not len(active):
                break
            to_move = states["to_move"][active]
            obs, _ = batch.observe(active)
            movers = [to_move == 1, to_move == 2]
            for side, agent in enumerate(self._agents):
                if agent is not None and not movers[side].all():   # before the other side's plies
                    agent.observe(batch, active[~movers[side]])
            for side in (0, 1):
                rows, net, agent = movers[side], self._nets[side], self._agents[side]
                if agent is not None:
                    if rows.any():
                        for slot, action in zip(active[rows], agent.choose(batch, active[rows])):
                            batch.apply(int(slot), int(action))
                elif net is None:
                    if rows.any():
                        batch.bot_apply(active[rows], self._bots[side], self._workspace)
                else:
                    if net.full_turn and not rows.all():
                        # rules.md §9: a full-turn net also steps on the other side's plies.
                        net.advance(active[~rows], obs[~rows])
                    if rows.any():
                        batch.sample_apply(active[rows], net.forward(active[rows], obs[rows]))
            batch.declare_coin_win(active[(states["winner"][active] == 0) & (states["plies"][active] >= PLY_CAP)],
                                   "ply_cap")
            finished = active[states["winner"][active] != 0]
            if len(finished):
                games = slot_game[finished]
                winners[games] = states["winner"][finished]
                plies[games] = states["plies"][finished]
                ends[games] = states["end_reason"][finished]
                slot_game[finished] = -1
                start_games(finished)


def _network(player: Player):
    from gcpipe.nn.checkpoint import load
    from gcpipe.nn.player import NetworkPlayer

    # The SHA-256 checked when the player was defined must still hold in every worker.
    return NetworkPlayer(load(player.path, expected_sha256=player.sha256), full_turn=player.full_turn)


# -- worker processes -----------------------------------------------------------------------
_worker_cell: CellPlayer | None = None


def _init_worker(guerrilla: Player, coin: Player, slots: int, parent_pid: int) -> None:
    global _worker_cell
    _die_with_parent(parent_pid)
    if guerrilla.is_net or coin.is_net:
        import torch
        torch.set_num_threads(1)   # one core per worker; the pool supplies the parallelism
    _worker_cell = CellPlayer(guerrilla, coin, slots)


def _die_with_parent(parent_pid: int) -> None:
    """A killed match (kill -9 included) takes its workers with it, instead of leaving them to
    finish their tasks as orphans next to the resumed run."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent_pid:   # the parent died before prctl took effect
        os._exit(1)


def _play_chunk(task):
    games, seeds = task
    return (games, *_worker_cell.play(seeds))


def _chunks(games: list[int], size: int) -> list[list[int]]:
    return [games[i:i + size] for i in range(0, len(games), size)]


def _chunk_size(guerrilla: Player, coin: Player, n_games: int, workers: int) -> int:
    """Games per task: search games take seconds, so one at a time keeps workers evenly busy and
    every finished game on disk; cheap games go in larger tasks to amortise the hand-over."""
    kinds = {guerrilla.kind, coin.kind}
    if kinds & {"mcts", "openspiel"}:
        return 1
    limit = NET_CHUNK if guerrilla.is_net or coin.is_net else BOT_CHUNK
    return max(1, min(limit, math.ceil(n_games / max(1, workers))))


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _results(guerrilla, coin, games, workers):
    """Yields (games, winners, plies, ends) per task, in game order."""
    size = _chunk_size(guerrilla, coin, len(games), workers)
    tasks = [(chunk, np.array([game_seed(guerrilla.roster, coin.roster, g) for g in chunk], np.uint32))
             for chunk in _chunks(games, size)]
    slots = min(NET_SLOTS, size)
    workers = min(workers, len(tasks))
    if workers <= 1:
        yield from _results_in_process(guerrilla, coin, tasks, slots)
        return
    # fork: workers start in milliseconds and the parent has not run torch yet (it only loaded
    # weights), so its thread pools are not an issue.
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with context.Pool(workers, initializer=_init_worker, initargs=(guerrilla, coin, slots, os.getpid())) as pool:
        yield from pool.imap(_play_chunk, tasks)


def _results_in_process(guerrilla, coin, tasks, slots):
    torch = None
    if guerrilla.is_net or coin.is_net:
        import torch
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
    try:
        cell = CellPlayer(guerrilla, coin, slots)
        for games, seeds in tasks:
            yield (games, *cell.play(seeds))
    finally:
        if torch is not None:
            torch.set_num_threads(threads)


# -- a cell with its ledger -----------------------------------------------------------------
def default_ledger_path(guerrilla: Player, coin: Player, folder=MATCHES_DIR) -> Path:
    return Path(folder) / f"{cell_name(guerrilla.name, coin.name)}.jsonl"


def run_match(guerrilla: Player, coin: Player, games: int, first_game: int = 0, out=None,
              workers: int | None = None, progress: bool = True) -> MatchResult:
    """Plays games first_game .. first_game+games-1 of the cell (guerrilla, coin) that the ledger
    at `out` (default results/matches/G__C.jsonl) does not hold yet, then writes the summary.

    Both players need their roster positions set (PlayerBook.field does that)."""
    if guerrilla.roster is None or coin.roster is None:
        raise ValueError("run_match needs players with roster positions (see PlayerBook.field)")
    if isinstance(games, bool) or not isinstance(games, int) or games < 1:
        raise UserError(f"--games must be a positive integer, got {games!r}")
    if isinstance(first_game, bool) or not isinstance(first_game, int) or first_game < 0:
        raise UserError(f"--first-game must be an integer >= 0, got {first_game!r}")
    workers = default_workers() if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UserError(f"--workers must be a positive integer, got {workers!r}")
    path = Path(out) if out is not None else default_ledger_path(guerrilla, coin)
    if path.is_dir():
        raise UserError(f"ledger path {path} is a folder; give a .jsonl file")
    cell = cell_name(guerrilla.name, coin.name)
    played = 0
    with LedgerWriter(path) as writer:
        check_ledger(writer.records, path, guerrilla, coin)
        done = writer.done_games
        missing = [g for g in range(first_game, first_game + games) if g not in done]
        if missing:
            meter = Progress(cell, len(missing), sum(r["winner"] == "guerrilla" for r in writer.records),
                             len(writer.records), enabled=progress)
            for chunk, winners, plies, ends in _results(guerrilla, coin, missing, workers):
                writer.extend(_record(cell, guerrilla, coin, g, int(winner), int(ply_count), int(end))
                              for g, winner, ply_count, end in zip(chunk, winners, plies, ends))
                meter.advance(len(chunk), int(np.count_nonzero(winners == 1)))
                played += len(chunk)
            meter.finish()
    summary_path = path.with_suffix(".json")
    summary = write_summary(path, summary_path)
    return MatchResult(ledger=path, summary_path=summary_path, summary=summary, played=played)


def _record(cell, guerrilla: Player, coin: Player, g: int, winner: int, plies: int, end: int) -> dict:
    return {"cell": cell, "guerrilla": guerrilla.name, "coin": coin.name, "game": g,
            "seed": game_seed(guerrilla.roster, coin.roster, g), "winner": _WINNER_NAMES[winner],
            "plies": plies, "end": END_REASONS[end], "guerrilla_id": guerrilla.identity,
            "coin_id": coin.identity}


def check_ledger(records: list[dict], path: Path, guerrilla: Player, coin: Player) -> None:
    """A ledger can only be continued by the same players at the same roster positions."""
    if not records:
        return
    cell = cell_name(guerrilla.name, coin.name)
    first = records[0]
    if first["cell"] != cell:
        raise UserError(f"{path} holds cell {first['cell']}, not {cell}; give another --out")
    for side, player in (("guerrilla", guerrilla), ("coin", coin)):
        if first[f"{side}_id"] != player.identity:
            raise UserError(f"{path} was played by another {side} player {player.name} "
                            f"({first[f'{side}_id']} there, {player.identity} now); give another --out")
    for record in records:
        expected = game_seed(guerrilla.roster, coin.roster, record["game"])
        if record["seed"] != expected:
            raise UserError(f"{path} game {record['game']} has seed {record['seed']}, but roster positions "
                            f"{guerrilla.roster}/{coin.roster} give {expected}: it was played with other "
                            f"roster positions; give another --out or the same positions")


# -- progress -------------------------------------------------------------------------------
class Progress:
    """Games done, Guerrilla–COIN wins so far, games/s and ETA on stderr: a bar redrawn in place
    on a terminal, a plain line every `interval` seconds otherwise."""

    def __init__(self, label: str, total: int, guerrilla_wins: int = 0, games_before: int = 0,
                 enabled: bool = True, stream=None, interval: float = 10.0):
        self.label, self.total = label, total
        self.done, self.wins, self.games_before = 0, guerrilla_wins, games_before
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.interval = 0.2 if self.tty else interval
        self.start = self.last = time.monotonic()

    def advance(self, games: int, guerrilla_wins: int) -> None:
        self.done += games
        self.wins += guerrilla_wins
        now = time.monotonic()
        if self.enabled and (now - self.last >= self.interval or self.done == self.total):
            self.last = now
            self._show(now)

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def _show(self, now: float) -> None:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        played = self.games_before + self.done
        text = (f"{self.label}: {self.done}/{self.total} games, wins G-C {self.wins}-{played - self.wins}, "
                f"{rate:.1f} games/s, ETA {_duration(eta)}")
        if self.tty:
            width = 20
            filled = int(width * self.done / self.total)
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}\x1b[K")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


# -- commands: a cell, a tournament -------------------------------------------------------
def match(guerrilla_spec: str, coin_spec: str, games: int, config=None, first_game: int = 0, out=None,
          workers: int | None = None, roster_g: int | None = None, roster_c: int | None = None,
          progress: bool = True) -> MatchResult:
    """`gcpipe match`: the cell of two players named by config name or short spec.  Roster
    positions: --roster-g/--roster-c, else the players' own (see PlayerBook.field)."""
    field = PlayerBook.from_config_file(config).field([guerrilla_spec, coin_spec])
    guerrilla, coin = field[0], field[-1]
    for flag, value in (("--roster-g", roster_g), ("--roster-c", roster_c)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise UserError(f"{flag} must be an integer >= 0, got {value!r}")
    if roster_g is not None:
        guerrilla = replace(guerrilla, roster=roster_g)
    if roster_c is not None:
        coin = replace(coin, roster=roster_c)
    return run_match(guerrilla, coin, games, first_game, out, workers, progress)


@dataclass(frozen=True)
class FieldResult:
    """Cells of a field (a tournament), keyed (guerrilla name, coin name)."""
    players: list[Player]
    cells: dict


def tournament(specs, games: int, config=None, out_dir=MATCHES_DIR, workers: int | None = None,
               progress: bool = True) -> FieldResult:
    """`gcpipe tournament`: every player as Guerrilla against every player as COIN."""
    players = PlayerBook.from_config_file(config).field(specs)
    return _play_field(players, games, out_dir, workers, progress)


def _play_field(players, games, out_dir, workers, progress) -> FieldResult:
    cells = {}
    for guerrilla in players:
        for coin in players:
            cells[(guerrilla.name, coin.name)] = run_match(
                guerrilla, coin, games, out=default_ledger_path(guerrilla, coin, out_dir),
                workers=workers, progress=progress)
    return FieldResult(players=players, cells=cells)


def format_match(result: MatchResult) -> str:
    s = result.summary
    low, high = s["guerrilla_win_rate_ci95"]
    return (f"{s['cell']}: {s['games']} games, Guerrilla {s['guerrilla']} {s['guerrilla_wins']} - "
            f"COIN {s['coin']} {s['coin_wins']} (Guerrilla {_percent(s['guerrilla_win_rate'])}, "
            f"95% CI {_percent(low)}-{_percent(high)}), mean {s['mean_plies']:.1f} plies; "
            f"ledger {result.ledger}")


def format_crosstable(result: FieldResult) -> str:
    """The published "Gwins-Cwins" table: rows play Guerrilla, columns play COIN."""
    names = [p.name for p in result.players]
    rows = [["Guerrilla / COIN", *names]]
    for g in names:
        rows.append([g] + [f"{result.cells[(g, c)].summary['guerrilla_wins']}-"
                           f"{result.cells[(g, c)].summary['coin_wins']}" for c in names])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths))) for row in rows)


def _percent(rate: float) -> str:
    return f"{100 * rate:.1f}%"
