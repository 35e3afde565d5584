"""The results ledger: one JSON line per finished game, append-only.

A ledger holds the games of one cell (Guerrilla player G, COIN player C), conventionally at
`results/matches/G__C.jsonl`. Every line is one record with exactly these keys, in this order:

    cell          "G__C" (the two player names)
    guerrilla     player name of the Guerrilla side
    coin          player name of the COIN side
    game          game index g (int >= 0), unique within the cell
    seed          the per-game uint32 seed
    winner        "guerrilla" | "coin"
    plies         number of actions played
    end           how the game ended: an engine end reason other than "none" and the training
                  env's "timeout" ("coins_cleared", "stones_exhausted", "stones_wiped",
                  "stalemate", "ply_cap")
    guerrilla_id  dict identifying the Guerrilla player (kind, parameters, checkpoint sha256, ...)
    coin_id       dict identifying the COIN player
    engine        the behaviour fingerprint of the engine that played the game (16 hex digits,
                  gcpipe/fingerprint.py), the same for the whole ledger

The fingerprint is a key of every record, not a header line: every line stays a complete,
self-describing record that the same rules check (no line of another kind, no state carried
from one line to the next), a merge of shards or a `head -n` of a ledger keeps it, and a reader
that skips lines cannot lose it.  A ledger written before records carried it is refused as
such ("no engine fingerprint"); the pipeline's match jobs play it again.

Every line is exactly the bytes encode_record writes (compact JSON, "\n" line ends), and every
record's seed is the rules.md §8 seed of its game index for one pair of roster positions, the
same for the whole ledger; `gcpipe match`, `merge` and `elo` all read ledgers here, so all apply
these checks.  A writer holds an exclusive lock on the ledger for its life: a second writer is
refused with the holder's PID, and so is a reader (`merge`, `elo`, `compare`, `view`): a ledger
being written is not yet the whole cell.

Writes are flushed and fsynced per game, so a killed match loses at most the game in flight.
A torn last line (no final newline, or not JSON) is what such a kill leaves behind: readers
ignore it and a writer reopening the ledger truncates it before appending. Anything else that
is malformed is an error naming the file and line. Summaries and Elo tables are derived from
ledgers only.
"""
import functools
import json
import math
import os
import re
import sys
from pathlib import Path

from gcpipe.engine import END_REASONS as ENGINE_END_REASONS, MAX_GAME_LENGTH, SIDE_NAMES as SIDES
from gcpipe.engine.game import is_seed
from gcpipe.errors import UserError, check_int, is_int
from gcpipe.fingerprint import FINGERPRINT_DIGITS
from gcpipe.io import (atomic_write_json, atomic_write_text, check_output_file, naming, open_locked_file,
                       read_bytes, refuse_while_written, remove_stale_temps)
from gcpipe.schema import ROSTER_POSITIONS
from gcpipe.stats.normal import Z95

RECORD_KEYS = ("cell", "guerrilla", "coin", "game", "seed", "winner", "plies", "end",
               "guerrilla_id", "coin_id", "engine")
_FINGERPRINT = re.compile(f"[0-9a-f]{{{FINGERPRINT_DIGITS}}}")
LEGACY_PROBLEM = ("no engine fingerprint (written before ledgers recorded which engine played them, so its games "
                  "cannot be told from this engine's)")
# Tournament games (rules.md §8) end by the rules or the ply cap, never by the env's tick limit.
END_REASONS = tuple(reason for reason in ENGINE_END_REASONS if reason not in ("none", "timeout"))
# Which side each way of ending implies as the winner (rules.md §4 and §8; the ply cap is a COIN win).
# A stalemate (side to move has no legal action) can go either way.
_WINNER_BY_END = {"coins_cleared": "guerrilla", "stones_exhausted": "coin",
                  "stones_wiped": "coin", "ply_cap": "coin", "stalemate": None}
GAME_INDEX_LIMIT = 2**32   # game indices are uint32 in the seed formula: 2**32 would replay game 0


def game_seed(a: int, b: int, g: int) -> int:
    """rules.md §8: the generator state of game g between roster positions a (Guerrilla), b (COIN)."""
    for position in (a, b):
        if not 0 <= position < ROSTER_POSITIONS:
            raise ValueError(f"roster position {position} is outside 0..{ROSTER_POSITIONS - 1}")
    if not 0 <= g < GAME_INDEX_LIMIT:
        raise ValueError(f"game index {g} is outside 0..{GAME_INDEX_LIMIT - 1}")
    return _seed(a * ROSTER_POSITIONS + b, g)


def _seed(pair: int, g: int) -> int:
    return ((0x9E3779B9 * (pair * 100003 + g)) & 0xFFFFFFFF) | 1


def seed_pair(record: dict) -> int | None:
    """The roster pair index a*16+b whose seed formula gives `record`'s seed, or None."""
    return _seed_pair(record["game"], record["seed"])


@functools.lru_cache(maxsize=256)
def _seed_pair(game: int, seed: int) -> int | None:
    return next((pair for pair in range(ROSTER_POSITIONS ** 2) if _seed(pair, game) == seed), None)


def cell_name(guerrilla: str, coin: str) -> str:
    """The cell id "G__C" used in records and ledger file names."""
    return f"{guerrilla}__{coin}"


def summary_path_for(ledger_path) -> Path:
    """Where the summary of a ledger lives: G__C.jsonl -> G__C.json."""
    return Path(ledger_path).with_suffix(".json")


def _check_ledger_name(path: Path) -> None:
    """A ledger is named *.jsonl, so that its summary (the name with .json) is its own: a ledger
    named *.json would be its own summary (the summary's write would replace its games), and
    s/x.txt and s/x.jsonl would share s/x.json."""
    if summary_path_for(path) == path:
        raise UserError(f"ledger {path} ends in .json, the name its summary takes beside it; name it .jsonl")
    if path.suffix != ".jsonl" or path.name == ".jsonl":
        raise UserError(f"ledger {path} does not end in .jsonl; name it so (G__C.jsonl: its summary takes the "
                        f"same name with .json)")


def check_ledger_path(out) -> Path:
    """The ledger file an --out names: a file can be written there (check_output_file: not a
    device or FIFO), not a folder (an existing one, or a name ending in /), named *.jsonl
    (_check_ledger_name)."""
    check_output_file(Path(out))
    if Path(out).is_dir() or str(out).endswith(("/", os.sep)):
        raise UserError(f"--out {out} is a folder; give the ledger's file name (G__C.jsonl)")
    _check_ledger_name(Path(out))
    return Path(out)


def _record_problem(record) -> str | None:
    """Why `record` is not a valid ledger record, or None if it is."""
    if not isinstance(record, dict):
        return "a record must be a JSON object"
    if tuple(record) != RECORD_KEYS:
        if tuple(record) == RECORD_KEYS[:-1]:
            return LEGACY_PROBLEM
        missing = [key for key in RECORD_KEYS if key not in record]
        unknown = [key for key in record if key not in RECORD_KEYS]
        if missing:
            return f"missing key(s) {', '.join(missing)}"
        if unknown:
            return f"unknown key(s) {', '.join(unknown)}"
        return f"keys out of order (expected {', '.join(RECORD_KEYS)})"
    for key in ("cell", "guerrilla", "coin"):
        if not isinstance(record[key], str) or not record[key]:
            return f"{key} must be a non-empty string"
    if record["cell"] != cell_name(record["guerrilla"], record["coin"]):
        return (f"cell {record['cell']!r} does not match players "
                f"{cell_name(record['guerrilla'], record['coin'])!r}")
    if not is_int(record["game"]) or not 0 <= record["game"] < GAME_INDEX_LIMIT:
        return f"game must be an integer in 0..{GAME_INDEX_LIMIT - 1}"
    if not is_seed(record["seed"]):
        return "seed must be an unsigned 32-bit integer"
    if record["winner"] not in SIDES:
        return f"winner must be one of {', '.join(SIDES)}"
    if not is_int(record["plies"]) or not 1 <= record["plies"] <= MAX_GAME_LENGTH:
        return f"plies must be an integer in 1..{MAX_GAME_LENGTH} (no legal game is longer)"
    if record["end"] not in END_REASONS:
        return f"end must be one of {', '.join(END_REASONS)}"
    implied = _WINNER_BY_END[record["end"]]
    if implied is not None and record["winner"] != implied:
        return f"end {record['end']!r} means a {implied} win, but winner is {record['winner']!r}"
    for key in ("guerrilla_id", "coin_id"):
        if not isinstance(record[key], dict):
            return f"{key} must be a JSON object"
    if not isinstance(record["engine"], str) or not _FINGERPRINT.fullmatch(record["engine"]):
        return f"engine must be an engine fingerprint ({FINGERPRINT_DIGITS} hex digits)"
    return None


def _inconsistency(record, first) -> str | None:
    """Why `record` cannot share a ledger with `first` (one cell, the same two players at the same
    roster positions, so the same seed formula)."""
    if record["cell"] != first["cell"]:
        return f"cell {record['cell']!r} differs from the ledger's cell {first['cell']!r}"
    for key in ("guerrilla_id", "coin_id"):
        if record[key] != first[key]:
            return f"{key} {record[key]} differs from the ledger's {first[key]}"
    if record["engine"] != first["engine"]:
        return (f"game {record['game']} was played by engine fingerprint {record['engine']}, the ledger's "
                f"games by {first['engine']}")
    pair = seed_pair(first)
    if pair is None:
        return (f"game {first['game']} has seed {first['seed']}, which the seed formula of rules.md §8 "
                f"gives for no roster positions")
    if record is not first and _seed(pair, record["game"]) != record["seed"]:
        return (f"game {record['game']} has seed {record['seed']}, but the ledger's roster positions "
                f"{pair // ROSTER_POSITIONS}/{pair % ROSTER_POSITIONS} give {_seed(pair, record['game'])}")
    return None


def encode_record(record) -> str:
    """The ledger line for `record` (validated; compact separators; newline included)."""
    problem = _record_problem(record)
    if problem:
        raise UserError(f"invalid ledger record: {problem}")
    return _line(record)


def _line(record) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n"


def _parse(path: Path) -> tuple[list[dict], int]:
    """Records of a ledger and the byte length of its intact part (before a torn last line)."""
    try:
        data = read_bytes(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such ledger") from None
    except OSError as error:
        raise UserError(f"{path}: cannot read ledger ({error.strerror})") from None
    lines = data.split(b"\n")
    # After a final newline split() yields an empty tail; otherwise the tail is an unterminated line.
    complete, tail = lines[:-1], lines[-1]
    records: list[dict] = []
    games: dict[int, int] = {}
    intact_bytes = 0
    for index, raw in enumerate(complete):
        line_number = index + 1
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            if index == len(complete) - 1 and not tail:
                break  # a torn last line that happens to end in a newline byte
            raise UserError(f"{path}:{line_number}: not valid JSON") from None
        except ValueError:   # an integer beyond Python's integer-string limit (sys.get_int_max_str_digits)
            raise UserError(f"{path}:{line_number}: a number of over {sys.get_int_max_str_digits():,} digits, "
                            f"which no valid record holds") from None
        problem = _record_problem(record)
        if problem == LEGACY_PROBLEM:
            raise LegacyLedgerError(f"{path}:{line_number}: {problem}")
        if not problem:
            problem = _inconsistency(record, records[0] if records else record)
        if not problem and raw + b"\n" != _line(record).encode("utf-8"):
            problem = "not in the ledger's exact form (compact JSON, \\n line ends): edited by hand?"
        if problem:
            raise UserError(f"{path}:{line_number}: {problem}")
        if record["game"] in games:
            raise UserError(f"{path}:{line_number}: game {record['game']} already recorded "
                            f"on line {games[record['game']]}")
        games[record["game"]] = line_number
        records.append(record)
        intact_bytes += len(raw) + 1
    return records, intact_bytes


class LegacyLedgerError(UserError):
    """A ledger whose records carry no engine fingerprint (LEGACY_PROBLEM)."""


def read_ledger(path) -> list[dict]:
    """All finished games of a ledger, in file order; a torn last line is ignored.

    Raises UserError ("path:line: reason") on a malformed line before the last, an invalid
    record, a record of another cell or other players, or a repeated game index; and, naming
    its PID, while a writer (a match, a merge) holds the ledger.
    """
    refuse_while_written(path, "ledger")
    return _parse(Path(path))[0]


class LedgerWriter:
    """Appends records to a ledger, one flushed and fsynced line per finished game.

    Opening locks the ledger (a second writer gets a UserError naming this one's PID), reads it
    (validating it like read_ledger) and truncates a torn last line so the next append starts on
    a clean line. `records` holds what is already there, so a match runner resumes with the
    games not in `done_games`.  With `replace_legacy`, a ledger without engine fingerprints is
    emptied (`replaced` says why) instead of refused.
    """

    def __init__(self, path, replace_legacy: bool = False):
        self.path = Path(path)
        self._handle = None
        self.records: list[dict] = []
        self.replace_legacy = replace_legacy
        self.replaced: str | None = None

    @property
    def done_games(self) -> set[int]:
        """Game indices already in the ledger."""
        return {record["game"] for record in self.records}

    def __enter__(self):
        _check_ledger_name(self.path)
        self._handle = open_locked_file(self.path, "ledger")
        try:
            # Under the lock, a leftover temp file of this ledger's summary is a killed writer's.
            remove_stale_temps(self.path.parent, summary_path_for(self.path).name)
            try:
                self.records, intact_bytes = _parse(self.path)
            except LegacyLedgerError as legacy:
                if not self.replace_legacy:
                    raise
                self.replaced, intact_bytes = str(legacy), 0
            if intact_bytes != self.path.stat().st_size:
                os.truncate(self.path, intact_bytes)
        except BaseException:
            self.close()
            raise
        return self

    def start_over(self) -> None:
        """Empty the ledger (still under this writer's lock): its games were played by other players."""
        os.truncate(self.path, 0)
        self.records = []

    def append(self, record) -> None:
        """Write one finished game; it is on disk when this returns."""
        line = encode_record(record)
        if self.records:
            problem = _inconsistency(record, self.records[0])
            if problem:
                raise UserError(f"{self.path}: {problem}")
        if record["game"] in self.done_games:
            raise UserError(f"{self.path}: game {record['game']} is already recorded")
        self._write_synced(line.encode("utf-8"))
        self.records.append(record)

    def extend(self, records) -> None:
        """Write several finished games with one write and one fsync (an fsync costs milliseconds,
        longer than a network game); all are on disk when this returns.  A kill during the write
        leaves complete lines and at most one torn last line, as with append."""
        records = list(records)
        done = self.done_games
        lines = []
        for record in records:
            lines.append(encode_record(record))
            problem = _inconsistency(record, self.records[0] if self.records else records[0])
            if problem:
                raise UserError(f"{self.path}: {problem}")
            if record["game"] in done:
                raise UserError(f"{self.path}: game {record['game']} is already recorded")
            done.add(record["game"])
        self._write_synced("".join(lines).encode("utf-8"))
        self.records.extend(records)

    def _write_synced(self, data: bytes) -> None:
        with naming(self.path):
            self._handle.write(data)
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            with naming(self.path):   # its flush retries what a failed write left in the buffer
                handle.close()

    def __exit__(self, *exc_info):
        self.close()


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default)."""
    if trials <= 0:
        raise ValueError("the Wilson interval needs at least one trial")
    p = successes / trials
    z2 = z * z
    denominator = 1 + z2 / trials
    center = (p + z2 / (2 * trials)) / denominator
    half_width = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denominator
    return max(0.0, center - half_width), min(1.0, center + half_width)


def summarize(records) -> dict:
    """The summary of one cell's ledger (the G__C.json file); floats rounded to 6 places."""
    if not records:
        raise UserError("cannot summarize a ledger without finished games")
    first = records[0]
    for record in records[1:]:
        problem = _inconsistency(record, first)
        if problem:
            raise UserError(f"cannot summarize: {problem}")
    games = len(records)
    guerrilla_wins = sum(record["winner"] == "guerrilla" for record in records)
    low, high = wilson_interval(guerrilla_wins, games)
    return {
        "cell": first["cell"],
        "guerrilla": first["guerrilla"],
        "coin": first["coin"],
        "games": games,
        "guerrilla_wins": guerrilla_wins,
        "coin_wins": games - guerrilla_wins,
        "guerrilla_win_rate": round(guerrilla_wins / games, 6),
        "guerrilla_win_rate_ci95": [round(low, 6), round(high, 6)],
        "mean_plies": round(sum(record["plies"] for record in records) / games, 6),
        "end_reasons": {end: sum(record["end"] == end for record in records) for end in END_REASONS},
        "guerrilla_id": first["guerrilla_id"],
        "coin_id": first["coin_id"],
        "engine": first["engine"],
    }


def write_summary(ledger_path, summary_path=None, records=None) -> dict:
    """Summarize a ledger and write the summary atomically (default: next to it, G__C.json).  Its
    writer, which holds the ledger's lock (so read_ledger refuses it), passes its `records`."""
    summary = summarize(read_ledger(ledger_path) if records is None else records)
    atomic_write_json(summary_path or summary_path_for(ledger_path), summary)
    return summary


def merge_shards(shard_paths, out_path, games: int | None = None) -> list[dict]:
    """Merge the ledgers of game-index shards of one cell into one ledger, sorted by game index.

    The shards must hold one cell with the same players, no game twice, and together exactly
    games 0..N-1 (N = `games` when given). The output is written atomically; the same shards
    give the same bytes whatever their order on the command line.
    """
    if not shard_paths:
        raise UserError("merge needs at least one shard ledger")
    check_ledger_path(out_path)
    merged: dict[int, dict] = {}
    source: dict[int, Path] = {}
    first = None
    for shard in map(Path, shard_paths):
        for record in read_ledger(shard):
            if first is None:
                first = record
            problem = _inconsistency(record, first)
            if problem:
                raise UserError(f"{shard}: game {record['game']}: {problem}")
            if record["game"] in merged:
                raise UserError(f"game {record['game']} is in both {source[record['game']]} "
                                f"and {shard}")
            merged[record["game"]] = record
            source[record["game"]] = shard
    if not merged:
        raise UserError(f"no finished games in {', '.join(map(str, shard_paths))}")
    if games is not None:
        check_int("--games", games, 1)
    expected = games if games is not None else max(merged) + 1
    missing = [game for game in range(expected) if game not in merged]
    if missing or len(merged) != expected:
        extra = sorted(game for game in merged if game >= expected)
        detail = (f"missing game(s) {format_ranges(missing)}" if missing
                  else f"unexpected game(s) {format_ranges(extra)}")
        raise UserError(f"shards do not cover games 0..{expected - 1}: {detail}")
    records = [merged[game] for game in range(expected)]
    # Under the ledger's lock, as a match writes it: a match writing it now is refused, not overwritten.
    with open_locked_file(out_path, "ledger"):
        atomic_write_text(out_path, "".join(encode_record(record) for record in records))
    return records


def format_ranges(numbers: list[int]) -> str:
    """Compact listing of sorted integers: [1, 2, 3, 7] -> "1-3, 7"."""
    parts = []
    start = previous = None
    for number in numbers + [None]:
        if start is not None and number == previous + 1:
            previous = number
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = number
    return ", ".join(parts)
