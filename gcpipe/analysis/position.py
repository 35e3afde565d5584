"""`gcpipe analyse`: what a net or search player thinks of a position (docs/analysis.md).

A query names a position and a player.  The position is a move list from the start (the notation
of `gcpipe play`, read by gcpipe.play.read_move) and a generator seed, or a game of a ledger and a
ply (the game replayed from its record, gcpipe.match.replay).  The player is a `net` or `search`
spec (or a config player of those kinds).

The analyst reaches the position the way a match player would (gcpipe.players' protocol): one
runtime of the player per side; before each ply the waiting side's runtime observes the position
(a full-turn 5c net steps on it, a legacy net does nothing) and the mover's chooses (its state
steps, its draws come from the game's generator), then the recorded move is applied, whatever the
player chose.  At the position itself the mover's runtime reports its net's outputs on it
(`evaluate`, the state unchanged) and then chooses, which for a search runs the search.  So the
answer is a function of the player, the moves and the seed.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from gcpipe.engine import (NUM_ACTIONS, PASS_ACTION, SIDE_NAMES, TOURNAMENT_PLY_CAP, Game, GameBatch,
                           action_to_string)
from gcpipe.engine.game import check_seed, point_name, square_name
from gcpipe.errors import UserError, is_int, os_error_line
from gcpipe.match.ledger import read_ledger
from gcpipe.match.replay import Replay, replay_record
from gcpipe.play import read_move
from gcpipe.players import CHECKPOINT_KINDS, Player, PlayerBook

DEFAULT_SEED = 1
_SLOT = np.zeros(1, np.int32)
_VALUE_ROW = NUM_ACTIONS          # decoder row 256: the Guerrilla's value
# The keys a query may have (docs/analysis.md).
QUERY_KEYS = ("id", "player", "moves", "ledger", "game", "ply", "seed", "top")


class Analyst:
    """One net or search player analysing positions (see the module doc)."""

    def __init__(self, player: Player):
        if player.kind not in CHECKPOINT_KINDS:
            raise UserError(f"player {player.name} is a {player.kind} player; an analysis needs a network: "
                            f"a net or search player (net:FILE.bin, search:FILE.bin:SIMULATIONS)")
        self.player = player
        self.has_value = player.identity.get("layout") != "legacy"
        self._runtimes = None

    def walk(self, seed: int, actions, plies: Iterable[int]) -> dict[int, dict]:
        """The analysis of the position after each of `plies` (0 = the start) of the game from `seed`
        with `actions` (legal in turn, checked by the caller)."""
        wanted = set(plies)
        if self._runtimes is None:    # built once: loading a checkpoint is the slow part
            self._runtimes = [self.player.runtime(), self.player.runtime()]
        runtimes = self._runtimes
        games = GameBatch(1)
        games.reset(0, seed)
        for runtime in runtimes:
            runtime.start(1)
            runtime.new_games(_SLOT)
        found = {}
        for ply in range(max(wanted) + 1):
            game = games.game(0)
            if game.is_terminal():
                found[ply] = _terminal(game, ply)
                break
            side = game.current_player()
            runtimes[1 - side].observe(games, _SLOT)
            if ply in wanted:
                found[ply] = self._analyse(runtimes[side], games, game, ply)
            elif ply < len(actions):
                runtimes[side].choose(games, _SLOT)
            if ply >= len(actions):
                break
            games.apply(_SLOT, [int(actions[ply])])
            games.declare_coin_win(_SLOT[games.plies[_SLOT] >= TOURNAMENT_PLY_CAP], "ply_cap")
        return found

    def _analyse(self, runtime, games: GameBatch, game: Game, ply: int) -> dict:
        side = game.current_player()
        out = runtime.evaluate(games, _SLOT)[0]
        legal = game.legal_actions()
        logits = out[legal].astype(np.float64)
        prior = np.exp(logits - logits.max())
        prior /= prior.sum()
        moves = {action: {"move": action_to_string(action, side), "action": action, "prior": float(p)}
                 for action, p in zip(legal, prior)}
        answer = {"ply": ply, "to_move": SIDE_NAMES[side], "terminal": False, **_board(game)}
        if self.has_value:
            guerrilla, coin = float(out[_VALUE_ROW]), float(out[PASS_ACTION])
            answer["value"] = {"guerrilla": guerrilla, "coin": coin}
            answer["outcome"] = min(1.0, max(-1.0, (guerrilla - coin) / 2))
        else:
            answer["value"], answer["outcome"] = None, None
        if self.player.kind == "search":
            choice = int(runtime.choose(games, _SLOT, want_policy=True)[0])
            answer["search"] = _search_part(runtime, game, moves, choice)
            order = sorted(moves.values(), key=lambda m: (-m["visits"], -m["policy"], m["action"]))
        else:
            choice = int(runtime.choose(games, _SLOT)[0])
            order = sorted(moves.values(), key=lambda m: (-m["prior"], m["action"]))
        answer["choice"] = action_to_string(choice, side)
        answer["moves"] = order
        return answer


def _search_part(runtime, game: Game, moves: dict, choice: int) -> dict:
    """The search's statistics at the root, its per-move ones merged into `moves`."""
    last, settings = runtime.last, runtime.settings
    sign = 1.0 if SIDE_NAMES[game.current_player()] == "guerrilla" else -1.0
    for entry in moves.values():
        entry.update(visits=0, q=None, policy=float(last.policy[0, entry["action"]]))
    for action, visits, value_sum, _ in runtime.root_edges(0):
        if visits > 0:
            moves[action].update(visits=int(visits), q=sign * value_sum / visits)
    return {"simulations": settings.simulations, "variant": settings.variant,
            "root_value": float(last.root_value[0]), "search_value": float(last.search_value[0]),
            "evaluations": int(last.evaluations[0]),
            "pv": _line(game, runtime.principal_variation(0, choice))}


def _line(game: Game, actions: list[int]) -> list[str]:
    """A line of actions from `game` in each mover's notation (a COIN capture chain keeps one side
    moving), up to the end of the game."""
    game, texts = game.clone(), []
    for action in actions:
        if game.is_terminal():
            break
        texts.append(game.action_to_string(action))
        game.apply_action(action)
    return texts


def _board(game: Game) -> dict:
    return {"stones": [point_name(g) for g in game.stones()], "coins": [square_name(c) for c in game.coins()]}


def _terminal(game: Game, ply: int) -> dict:
    return {"ply": ply, "to_move": None, "terminal": True, **_board(game), "winner": SIDE_NAMES[game.winner],
            "end": game.end_reason, "value": None, "outcome": None, "choice": None, "moves": []}


class AnalysisService:
    """Answers queries (dicts), keeping players and ledger replays between them: a JSON-lines
    stream loads each checkpoint and replays each ledger game once."""

    def __init__(self, book: PlayerBook | None = None, default_player: str | None = None):
        self.book = book or PlayerBook()
        self.default_player = default_player
        self._analysts: dict[str, Analyst] = {}
        self._replays: dict[tuple[str, int], tuple[dict, Replay]] = {}

    def analyst(self, spec: str) -> Analyst:
        if spec not in self._analysts:
            self._analysts[spec] = Analyst(self.book.resolve(spec))
        return self._analysts[spec]

    def answer(self, query) -> dict:
        """The analysis a query asks for (docs/analysis.md); UserError for anything wrong with it."""
        if not isinstance(query, dict):
            raise UserError(f"a query is a JSON object, got {_json_kind(query)}")
        unknown = [key for key in query if key not in QUERY_KEYS]
        if unknown:
            raise UserError(f"unknown key(s) {', '.join(map(repr, unknown))}; a query has "
                            f"{', '.join(QUERY_KEYS)}")
        spec = query.get("player", self.default_player)
        if spec is None:
            raise UserError("the query names no player (give \"player\": \"net:FILE.bin\" or "
                            "\"search:FILE.bin:SIMULATIONS\")")
        if not isinstance(spec, str):
            raise UserError(f"\"player\" is a player spec (a string), got {_json_kind(spec)}")
        top = query.get("top")
        if top is not None and not (is_int(top) and top >= 1):
            raise UserError(f"\"top\" must be a whole number >= 1, got {top!r}")
        seed, actions, ply, source = self._position(query)
        analyst = self.analyst(spec)
        answer = analyst.walk(seed, actions, [ply])[ply]
        finite(answer)
        if top is not None:
            answer["moves"] = answer["moves"][:top]
        head = {"id": query["id"]} if "id" in query else {}
        return {**head, "player": analyst.player.name, **source, "seed": seed, **answer}

    def _position(self, query: dict) -> tuple[int, list[int], int, dict]:
        """(seed, actions, ply, what the answer says of the source) of a query's position."""
        ply = query.get("ply")
        if ply is not None and not (is_int(ply) and ply >= 0):
            raise UserError(f"\"ply\" must be a whole number >= 0, got {ply!r}")
        if "ledger" in query:
            if "moves" in query or "seed" in query:
                raise UserError("a query gives \"moves\" (and \"seed\") or \"ledger\" and \"game\", not both")
            record, replay = self._replay(query.get("ledger"), query.get("game"))
            if ply is None:
                raise UserError("a ledger query needs \"ply\" (0 = the start position)")
            if ply > replay.plies:
                raise UserError(f"ply {ply} is beyond the end of game {record['game']} of {query['ledger']} "
                                f"({replay.plies} plies)")
            return record["seed"], list(replay.actions), ply, {"ledger": str(query["ledger"]),
                                                                "game": record["game"], "ply_count": replay.plies}
        if "game" in query:
            raise UserError("\"game\" goes with \"ledger\"")
        seed = query.get("seed", DEFAULT_SEED)
        if not is_int(seed):
            raise UserError(f"\"seed\" must be a whole number, got {seed!r}")
        check_seed(seed)
        actions = parse_moves(query.get("moves", []), seed)
        if ply is not None and ply > len(actions):
            raise UserError(f"ply {ply} is beyond the end of the move list ({len(actions)} moves)")
        return seed, actions, len(actions) if ply is None else ply, {}

    def _replay(self, ledger, game) -> tuple[dict, Replay]:
        if not isinstance(ledger, str) or not ledger:
            raise UserError(f"\"ledger\" is a ledger file's path, got {ledger!r}")
        if not is_int(game) or game < 0:
            raise UserError(f"a ledger query needs \"game\", a game index, got {game!r}")
        key = (str(Path(ledger).resolve()), int(game))
        if key not in self._replays:
            try:
                records = read_ledger(ledger)
            except OSError as error:
                raise UserError(os_error_line(error).removeprefix("gcpipe: error: ")) from None
            record = next((r for r in records if r["game"] == game), None)
            if record is None:
                raise UserError(f"{ledger} has no game {game}")
            replay = replay_record(record)
            if not replay.agrees_with(record):
                raise UserError(f"{ledger}: game {game} does not replay: its players give {replay.winner} "
                                f"won ({replay.end}) after {replay.plies} plies, the record says {record['winner']} "
                                f"won ({record['end']}) after {record['plies']} plies")
            self._replays[key] = record, replay
        return self._replays[key]


def parse_moves(moves, seed: int = DEFAULT_SEED) -> list[int]:
    """The actions of a move list (a list of moves, or one string of moves separated by spaces or
    commas), each checked in turn from the start; UserError naming the first bad one and why."""
    if isinstance(moves, str):
        moves = moves.replace(",", " ").split()
    if not isinstance(moves, list) or not all(isinstance(m, str) for m in moves):
        raise UserError(f"\"moves\" is a list of moves like [\"d4-d5\", \"D3-C4\"], got {moves!r}")
    game, actions = Game(seed), []
    for number, text in enumerate(moves, start=1):
        if game.is_terminal():
            raise UserError(f"move {number} '{text}': the game is already over "
                            f"({SIDE_NAMES[game.winner]} won, {game.end_reason}, after {game.plies} plies)")
        try:
            action = read_move(game, text)
        except UserError as problem:
            legal = " ".join(game.action_to_string(a) for a in game.legal_actions())
            raise UserError(f"move {number} '{text}' ({SIDE_NAMES[game.current_player()]} to move): {problem}; "
                            f"legal: {legal}") from None
        game.apply_action(action)
        actions.append(action)
    return actions


def _json_kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number")


def answer_lines(read_line: Callable[[], bytes], write: Callable[[str], None], service: AnalysisService) -> int:
    """The JSON-lines mode: one query per line in, one answer per line out (an error object for a
    bad line, and the stream goes on) until end of input; returns the number of lines answered."""
    count = 0
    while True:
        line = read_line()
        if not line:
            return count
        if not line.strip():
            continue
        count += 1
        write(json.dumps(answer_line(line, service), allow_nan=False))


def answer_line(line: bytes | str, service: AnalysisService) -> dict:
    """One line's answer, or {"id": ..., "error": "..."} for a line that is not a good query."""
    try:
        query = json.loads(line)
    except UnicodeDecodeError:
        return {"error": "the line is not UTF-8 text"}
    except ValueError as problem:
        return {"error": f"not JSON: {problem}"}
    head = {"id": query["id"]} if isinstance(query, dict) and "id" in query else {}
    try:
        return service.answer(query)
    except UserError as problem:
        return {**head, "error": str(problem)}


def analyse(book: PlayerBook, player: str | None = None, jsonl: bool = False, read_line=None,
            write: Callable[[str], None] = print, **position) -> int:
    """`gcpipe analyse`: one query from the options (`position`: moves, ledger, game, ply, seed, top,
    those not None), its answer one JSON line; or, with `jsonl`, the JSON-lines mode on `read_line`
    (`player` is then the default of lines that name none).  Returns the number of answers."""
    position = {key: value for key, value in position.items() if value is not None}
    service = AnalysisService(book, default_player=player)
    if jsonl:
        if position:
            raise UserError(f"--jsonl reads the positions from standard input; "
                            f"{', '.join('--' + key for key in position)} go(es) in each query line")
        return answer_lines(read_line, write, service)
    if "ledger" in position:
        position["ledger"] = str(position["ledger"])
    write(json.dumps(service.answer(position), allow_nan=False))
    return 1


def finite(answer: dict) -> dict:
    """`answer` unchanged when every number in it is finite (JSON has no NaN); else a UserError."""
    def walk(value):
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError("the network gave a non-finite output on this position")
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
    walk(answer)
    return answer
