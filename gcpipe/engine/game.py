"""One Guerrilla Checkers game in OpenSpiel's vocabulary, and batches of games for batched players.

Sides are OpenSpiel's player ids at the Python surface: GUERRILLA = 0, COIN = 1 (`winner`,
`current_player`, `GameBatch.to_move`/`winners`, the VecEnv's slot sides).  The C engine's codes
(GC_GUERRILLA = 1, GC_COIN = 2, 0 for none) are converted here and in vecenv.py only.  Sizes,
end reasons and the ply cap are the C engine's, read from its headers through cffi.

Actions are the engine's integers (rules.md §2-§3).  The text notation used by `gcpipe play`:
squares are a capital file A-H (x) and a rank 1-8 (y + 1, rank 1 at the top); points, the
corners between squares, are a small file a-g and a rank 1-7, point b3 being the corner shared
by squares B3, C3, B4 and C4.  A Guerrilla move names its two points ("d4 d5", "d4-d5");
a COIN move names the source and destination squares ("D3-C4", "d3c4").  "#N" is action N.
"""
from __future__ import annotations

import re

import numpy as np

from gcpipe._engine import ffi, lib
from gcpipe.errors import UserError, check_int, is_int

GUERRILLA, COIN = 0, 1          # OpenSpiel player ids
NO_SIDE = -1                    # winner of a running game (GameBatch.winners)
TERMINAL_PLAYER = -4            # OpenSpiel's kTerminalPlayerId
SIDE_NAMES = ("guerrilla", "coin")
NUM_ACTIONS, OBS_SIZE, PASS_ACTION = lib.GC_NUM_ACTIONS, lib.GC_OBS_SIZE, lib.GC_PASS_ACTION
NUM_POINTS, NUM_SQUARES, STONE_SUPPLY = lib.GC_NUM_POINTS, lib.GC_NUM_SQUARES, lib.GC_STONE_SUPPLY
TOURNAMENT_PLY_CAP = lib.GC_TOURNAMENT_PLY_CAP   # rules.md §8: then COIN wins
MAX_GAME_LENGTH = lib.GC_MAX_GAME_PLIES   # no legal game is longer (the proof: csrc/gc_rules.h)
# Games held in memory at once (a GameBatch; the positions `calibrate` and `values` keep): a search's
# trees take ~3 KB a game, so this bounds a batch to a few GB, and a typo's 10^12 is refused, not tried.
MAX_GAMES_AT_ONCE = 1_000_000


def _enum_names(prefix: str) -> tuple[str, ...]:
    """The names of a C enum, lower-cased without `prefix`, indexed by their value (0, 1, ...)."""
    values = {getattr(lib, name): name[len(prefix):].lower() for name in dir(lib) if name.startswith(prefix)}
    assert sorted(values) == list(range(len(values))), prefix
    return tuple(values[v] for v in range(len(values)))


END_REASONS = _enum_names("GC_END_")        # ("none", "coins_cleared", ..., "timeout"), by GC_END_* code
_C_SIDES = np.array([lib.GC_GUERRILLA, lib.GC_COIN])   # C code of each Python side
_FROM_C = np.full(max(lib.GC_NONE, lib.GC_GUERRILLA, lib.GC_COIN) + 1, NO_SIDE, np.int8)   # by C code
_FROM_C[[lib.GC_GUERRILLA, lib.GC_COIN]] = GUERRILLA, COIN


def sides_from_c(codes) -> np.ndarray:
    """C side codes (GC_GUERRILLA, GC_COIN, GC_NONE) as Python sides (GUERRILLA, COIN, NO_SIDE)."""
    return _FROM_C[codes]


def side_to_c(side: int) -> int:
    """The C code of a Python side."""
    return int(_C_SIDES[side])
_GUERRILLA_STEPS = ((0, 1), (1, 0), (-1, 0), (0, -1))   # k = down, right, left, up
_COIN_STEPS = ((-1, -1), (1, -1), (-1, 1), (1, 1))      # d = up-left, up-right, down-left, down-right
_SERIAL_PREFIX = "gc2"
_SERIAL_FIELDS = ("stones", "coins", "to_move", "must_capture", "previous_cell", "stones_placed", "plies",
                  "winner", "end_reason", "rng", "turn_point", "turn_stones")


class IllegalActionError(UserError):
    """An action that is out of range or not legal in the current state."""


def square_name(c: int) -> str:
    return f"{'ABCDEFGH'[c % 8]}{c // 8 + 1}"


def point_name(g: int) -> str:
    return f"{'abcdefg'[g % 7]}{g // 7 + 1}"


def action_to_string(action: int, player: int) -> str:
    """Readable notation of `action` for the side `player` (GUERRILLA or COIN)."""
    if player == GUERRILLA:
        first, k = divmod(action, 4)
        dx, dy = _GUERRILLA_STEPS[k]
        return f"{point_name(first)}-{point_name(first + dy * 7 + dx)}"
    src, d = divmod(action, 4)
    dx, dy = _COIN_STEPS[d]
    return f"{square_name(src)}-{square_name(src + dy * 8 + dx)}"


_INVALID_STATE = {lib.GC_INVALID_BITS: "bits outside the board", lib.GC_INVALID_COUNTS: "impossible piece counts",
                  lib.GC_INVALID_SIDE: "no valid side to move", lib.GC_INVALID_CHAIN: "an inconsistent capture chain",
                  lib.GC_INVALID_RESULT: "an inconsistent result",
                  lib.GC_INVALID_TURN: "an inconsistent unfinished Guerrilla turn"}
_MOVE_RE = re.compile(r"^\s*([a-hA-H])([1-8])\s*[-\s]?\s*([a-hA-H])([1-8])\s*$")


def string_to_action(text: str, player: int) -> int:
    """Parses the notation above (or "#N"); raises UserError with the reason if it cannot."""
    text = text.strip()
    if text.startswith("#"):
        try:
            return int(text[1:])
        except ValueError:
            raise UserError(f"'{text}' is not an action number (write #0 .. #{NUM_ACTIONS - 1})") from None
    m = _MOVE_RE.match(text)
    if not m:
        example = "d4-d5 (two points)" if player == GUERRILLA else "D3-C4 (from square, to square)"
        raise UserError(f"cannot read '{text}': write a move like {example}")
    f1, r1, f2, r2 = m.group(1).lower(), int(m.group(2)), m.group(3).lower(), int(m.group(4))
    x1, y1, x2, y2 = ord(f1) - 97, r1 - 1, ord(f2) - 97, r2 - 1
    dx, dy = x2 - x1, y2 - y1
    if player == GUERRILLA:
        if max(x1, x2) > 6 or max(y1, y2) > 6:
            raise UserError(f"'{text}': points run from a1 to g7")
        if (dx, dy) not in _GUERRILLA_STEPS:
            raise UserError(f"'{text}': the two stones must be orthogonal neighbours")
        return (y1 * 7 + x1) * 4 + _GUERRILLA_STEPS.index((dx, dy))
    if (dx, dy) not in _COIN_STEPS:
        raise UserError(f"'{text}': a coin moves one square diagonally")
    return (y1 * 8 + x1) * 4 + _COIN_STEPS.index((dx, dy))


class Game:
    """A game state with its own generator (rules.md §8).  Mutating methods change it in place."""

    __slots__ = ("_state",)

    def __init__(self, seed: int = 0):
        self._state = ffi.new("gc_state *")
        lib.gc_reset(self._state, check_seed(seed))

    # -- queries ---------------------------------------------------------------------------
    def current_player(self) -> int:
        return TERMINAL_PLAYER if self._state.winner else self._side(self._state.to_move)

    def is_terminal(self) -> bool:
        return bool(self._state.winner)

    def legal_actions(self) -> list[int]:
        buf = ffi.new("int16_t[]", NUM_ACTIONS)
        n = lib.gc_legal_actions(self._state, buf)
        return list(buf[0:n])

    def action_mask(self) -> np.ndarray:
        mask = np.zeros(NUM_ACTIONS, np.uint8)
        lib.gc_action_mask(self._state, ffi.from_buffer("uint8_t[]", mask))
        return mask

    def observation(self) -> np.ndarray:
        """The 120 bytes of rules.md §5.  At a terminal state they keep what the game's last action
        left, as the reference does: after a COIN capture that ended the game, bytes 114-115 hold
        the chain flag and previous square from before that capture; after a Guerrilla action that
        ended it, bytes 116-117 hold the last point placed + 1 and the stones placed that turn."""
        obs = np.zeros(OBS_SIZE, np.uint8)
        lib.gc_observation(self._state, ffi.from_buffer("uint8_t[]", obs))
        return obs

    def returns(self) -> list[float]:
        """[Guerrilla, COIN]: +1 for the winner, -1 for the loser, zeros while the game runs."""
        if not self._state.winner:
            return [0.0, 0.0]
        return [1.0, -1.0] if self.winner == GUERRILLA else [-1.0, 1.0]

    @property
    def winner(self) -> int | None:
        """GUERRILLA, COIN or None."""
        return self._side(self._state.winner) if self._state.winner else None

    @property
    def end_reason(self) -> str:
        return END_REASONS[self._state.end_reason]

    @property
    def plies(self) -> int:
        return self._state.plies

    @property
    def chain_square(self) -> int | None:
        """The square of the coin that must go on capturing (a COIN capture chain), else None."""
        return int(self._state.previous_cell) if self._state.must_capture else None

    @property
    def stones_placed(self) -> int:
        return self._state.stones_placed

    @property
    def rng_state(self) -> int:
        return self._state.rng

    @rng_state.setter
    def rng_state(self, value: int) -> None:
        self._state.rng = check_seed(value)

    def stones(self) -> list[int]:
        return [g for g in range(NUM_POINTS) if self._state.stones >> g & 1]

    def coins(self) -> list[int]:
        return [c for c in range(NUM_SQUARES) if self._state.coins >> c & 1]

    def action_to_string(self, action: int) -> str:
        return action_to_string(action, self._side(self._state.to_move))

    def string_to_action(self, text: str) -> int:
        return string_to_action(text, self._side(self._state.to_move))

    @staticmethod
    def _side(code: int) -> int:
        return int(sides_from_c(code))

    # -- changes ---------------------------------------------------------------------------
    def apply_action(self, action: int) -> int:
        """Applies a legal action and returns what it captured; raises IllegalActionError
        (state untouched) for anything else."""
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            raise IllegalActionError(f"an action is an integer, got {action!r}")
        if not 0 <= action < NUM_ACTIONS:
            raise IllegalActionError(f"action {action} is out of range 0..{NUM_ACTIONS - 1}")
        captured = lib.gc_apply(self._state, int(action))
        if captured < 0:
            why = "the game is over" if self._state.winner else f"it is not legal for {SIDE_NAMES[self.current_player()]}"
            raise IllegalActionError(f"action {action} cannot be played: {why}")
        return captured

    def declare_coin_win(self, reason: str) -> None:
        """Ends a running game by an outside rule ("ply_cap" or "timeout")."""
        lib.gc_declare_coin_win(self._state, _outside_rule(reason))

    def sample_action(self, logits: np.ndarray) -> int:
        """The rules.md §9 draw: softmax over the legal logits, one draw from the game's generator
        (advancing it); the caller applies the action.  The same C routine as GameBatch.sample."""
        logits = np.ascontiguousarray(logits, dtype=np.float32)
        if logits.shape != (NUM_ACTIONS,):
            raise ValueError(f"logits must have shape ({NUM_ACTIONS},), got {logits.shape}")
        return lib.gc_sample_action(self._state, ffi.from_buffer("float[]", logits))

    def clone(self) -> "Game":
        other = Game.__new__(Game)
        other._state = ffi.new("gc_state *", self._state[0])
        return other

    def __copy__(self) -> "Game":
        return self.clone()

    def __deepcopy__(self, memo) -> "Game":
        return self.clone()

    def __reduce__(self):
        return Game.deserialize, (self.serialize(),)

    # -- text ------------------------------------------------------------------------------
    def serialize(self) -> str:
        s = self._state
        values = [getattr(s, name) for name in _SERIAL_FIELDS]
        return " ".join([_SERIAL_PREFIX, f"{values[0]:013x}", f"{values[1]:016x}", *map(str, values[2:])])

    @classmethod
    def deserialize(cls, text: str) -> "Game":
        """The game `serialize` wrote; UserError for text that is not one, or an impossible state
        (a running game whose side to move has no legal action, which the rules end as a stalemate)."""
        game = cls._parse(text)
        if not game.is_terminal() and not game.legal_actions():
            raise UserError("serialized game describes an impossible state (a running game whose side to move "
                            "has no legal action: the rules end such a game as a stalemate)")
        return game

    @classmethod
    def _parse(cls, text: str) -> "Game":
        parts = text.split() if isinstance(text, str) else []
        if len(parts) != 1 + len(_SERIAL_FIELDS) or parts[0] != _SERIAL_PREFIX:
            raise UserError(f"not a serialized game (expected '{_SERIAL_PREFIX}' and {len(_SERIAL_FIELDS)} fields): "
                            f"{str(text)[:60]!r}")
        try:
            values = [int(parts[1], 16), int(parts[2], 16), *(int(p) for p in parts[3:])]
        except ValueError:
            raise UserError(f"malformed serialized game: {text[:60]!r}") from None
        fields = dict(zip(_SERIAL_FIELDS, values))
        game = cls.__new__(cls)
        game._state = ffi.new("gc_state *")
        try:
            for name, value in fields.items():
                setattr(game._state, name, value)   # cffi refuses values its field cannot hold
        except OverflowError:
            raise UserError(f"serialized game has a field out of range: {text[:60]!r}") from None
        if fields["stones"] >> NUM_POINTS:
            raise UserError(f"serialized game has a field out of range: {text[:60]!r}")
        code = lib.gc_validate(game._state)
        if code:
            raise UserError(f"serialized game describes an impossible state ({_INVALID_STATE[code]})")
        return game

    @classmethod
    def from_position(cls, *, stones=(), coins=(), to_move: int = GUERRILLA, stones_placed: int | None = None,
                      chain_coin: int | None = None, seed: int = 0) -> "Game":
        """A hand-built position: stone points, coin squares, the side to move, stones ever placed
        (default: those on the board) and, for a COIN capture chain, the chaining coin's square.
        Unlike deserialize it may leave the side to move without a move (positions the rules
        only pass through, e.g. to test what ends a game)."""
        stone_bits = sum(1 << g for g in stones)
        coin_bits = sum(1 << c for c in coins)
        placed = len(set(stones)) if stones_placed is None else stones_placed
        return cls._parse(f"{_SERIAL_PREFIX} {stone_bits:x} {coin_bits:x} {side_to_c(to_move)} "
                               f"{int(chain_coin is not None)} {-1 if chain_coin is None else chain_coin} "
                               f"{placed} 0 0 0 {check_seed(seed)} 0 0")

    def __eq__(self, other) -> bool:
        return isinstance(other, Game) and self.serialize() == other.serialize()

    def __repr__(self) -> str:
        return f"Game({self.serialize()!r})"

    def __str__(self) -> str:
        s = self._state
        stones, coins = s.stones, s.coins
        lines = ["       " + "   ".join("ABCDEFGH"), "         " + "   ".join("abcdefg")]
        for y in range(8):
            cells = "|".join(" O " if coins >> (y * 8 + x) & 1 else "   " for x in range(8))
            lines.append(f"  {y + 1:>2} |{cells}|")
            if y < 7:
                pts = "".join(("@" if stones >> (y * 7 + x) & 1 else "+") + "---" for x in range(7))
                lines.append(f"     +---{pts}+  {y + 1}")
        lines.insert(2, "     +" + "---+" * 8)
        lines.append("     +" + "---+" * 8)
        if s.winner:
            status = f"{SIDE_NAMES[self.winner]} won ({self.end_reason}) after {s.plies} plies"
        else:
            chain = f", must capture with {square_name(s.previous_cell)}" if s.must_capture else ""
            status = f"{SIDE_NAMES[self.current_player()]} to move{chain}"
        lines.append(f"stones placed {s.stones_placed}/{STONE_SUPPLY}, on board {bin(stones).count('1')}, "
                     f"coins {bin(coins).count('1')}; {status}")
        return "\n".join(lines)


# The end reasons a caller may declare: the rules end games by themselves for every other reason.
_OUTSIDE_RULES = ("ply_cap", "timeout")


def _outside_rule(reason: str) -> int:
    if reason not in _OUTSIDE_RULES:
        raise ValueError(f"a game is ended from outside only by {' or '.join(_OUTSIDE_RULES)}, not {reason!r}")
    return END_REASONS.index(reason)


def is_seed(value) -> bool:
    """A game seed (a generator state): an unsigned 32-bit integer."""
    return is_int(value) and 0 <= value < 2**32


def check_seed(value: int) -> int:
    """`value` when it is a seed (is_seed), else a UserError."""
    if not is_seed(value):
        raise UserError(f"a seed is an unsigned 32-bit integer, got {value!r}")
    return int(value)


_NUMPY_TYPES = {"uint64_t": np.uint64, "uint32_t": np.uint32, "uint16_t": np.uint16, "uint8_t": np.uint8,
                "int8_t": np.int8}
# gc_state as a numpy record, every field at its C offset, read from the cffi declaration.
_STATE_DTYPE = np.dtype({"names": [name for name, _ in ffi.typeof("gc_state").fields],
                         "formats": [_NUMPY_TYPES[f.type.cname] for _, f in ffi.typeof("gc_state").fields],
                         "offsets": [f.offset for _, f in ffi.typeof("gc_state").fields],
                         "itemsize": ffi.sizeof("gc_state")})


class GameBatch:
    """`n` game states in one C array, for players that act on many games at once.  Game i is
    reset, observed, sampled, moved and read by index; `to_move`, `winners`, `plies` and
    `end_reasons` read every game at once (sides as GUERRILLA/COIN, NO_SIDE for a running game's
    winner; end reasons as END_REASONS indices)."""

    def __init__(self, n: int):
        self.n = check_int("a batch's game count", n, 1, MAX_GAMES_AT_ONCE)
        self._c_states = ffi.new("gc_state[]", self.n)
        self._states = np.frombuffer(ffi.buffer(self._c_states), dtype=_STATE_DTYPE)   # zero copy
        self._obs = np.zeros((self.n, OBS_SIZE), np.uint8)
        self._mask = np.zeros((self.n, NUM_ACTIONS), np.uint8)
        self._actions = np.zeros(self.n, np.int32)
        self._observed: np.ndarray | None = None   # the games in the observation buffers, until a move

    @property
    def to_move(self) -> np.ndarray:
        return sides_from_c(self._states["to_move"])

    @property
    def winners(self) -> np.ndarray:
        return sides_from_c(self._states["winner"])

    @property
    def plies(self) -> np.ndarray:
        return self._states["plies"].copy()

    @property
    def end_reasons(self) -> np.ndarray:
        return self._states["end_reason"].copy()

    def reset(self, i: int, seed: int) -> None:
        self._observed = None
        lib.gc_reset(self._c_states + self._index(i), check_seed(seed))

    def game(self, i: int) -> Game:
        """A copy of game i as a Game."""
        game = Game.__new__(Game)
        game._state = ffi.new("gc_state *", self._c_states[self._index(i)])
        return game

    def put(self, i: int, game: Game) -> None:
        """Game i becomes a copy of `game` (its generator included)."""
        self._observed = None
        self._c_states[self._index(i)] = game._state[0]

    def observe(self, idx) -> tuple[np.ndarray, np.ndarray]:
        """Observations [k,120] and action masks [k,256] of games idx: read-only views of buffers
        that the next observe of other games overwrites.  Observing the same games again before
        any of the batch's positions change (two players reading one ply) reuses them."""
        idx = self._indices(idx)
        k = len(idx)
        if self._observed is None or not np.array_equal(self._observed, idx):
            self._observed = None
            lib.gc_batch_observe(self._c_states, _i32p(idx), k, ffi.from_buffer("uint8_t[]", self._obs),
                                 ffi.from_buffer("uint8_t[]", self._mask))
            self._observed = idx.copy()
        obs, mask = self._obs[:k], self._mask[:k]
        obs.flags.writeable = mask.flags.writeable = False
        return obs, mask

    def sample(self, idx, logits: np.ndarray) -> np.ndarray:
        """A move for each game idx[k] sampled from logits[k] (rules.md §9: one draw from the game's
        own generator); the positions are unchanged.  Returns the actions (-1 where a game has none)."""
        idx = self._indices(idx)
        logits = np.ascontiguousarray(logits, dtype=np.float32)
        if logits.shape != (len(idx), NUM_ACTIONS):
            raise ValueError(f"logits must have shape ({len(idx)}, {NUM_ACTIONS}), got {logits.shape}")
        lib.gc_batch_sample(self._c_states, _i32p(idx), len(idx), ffi.from_buffer("float[]", logits),
                            ffi.from_buffer("int32_t[]", self._actions))
        return self._actions[:len(idx)].copy()

    def bot_choose(self, idx, bot, workspace=ffi.NULL) -> np.ndarray:
        """The engine bot `bot` (a `gc_bot *`, see BotSpec.c_bot)'s move in each running game idx[k],
        drawing from the game's own generator; the positions are unchanged.  An MCTS bot needs a
        node pool `workspace` of more than its iterations."""
        idx = self._indices(idx)
        code = lib.gc_batch_bot_choose(self._c_states, _i32p(idx), len(idx), bot, workspace,
                                       ffi.from_buffer("int32_t[]", self._actions))
        if code < 0:   # running games always have a move, and specs are checked: an engine bug
            raise RuntimeError(f"the engine bot found no move (code {code})")
        return self._actions[:len(idx)].copy()

    def apply(self, idx, actions) -> None:
        """Plays actions[k] in game idx[k]; IllegalActionError names the first that is not legal
        (the games before it have moved, it and those after it have not)."""
        idx = self._indices(idx)
        self._observed = None
        given = np.asarray(actions)
        if given.dtype.kind not in "iu" or (given.size and not -1 <= given.min() <= given.max() < NUM_ACTIONS):
            raise IllegalActionError(f"actions are integers 0..{NUM_ACTIONS - 1}, got {given!r}")
        actions = np.ascontiguousarray(given, dtype=np.int32)
        if actions.shape != idx.shape:
            raise ValueError(f"one action per game: {len(idx)} games, actions of shape {actions.shape}")
        done = lib.gc_batch_apply(self._c_states, _i32p(idx), len(idx), ffi.from_buffer("int32_t[]", actions))
        if done < len(idx):
            raise IllegalActionError(f"action {actions[done]} is not legal in game {idx[done]}")

    def draw(self, i: int) -> int:
        """The next value of game i's generator (rules.md §8), which advances: for players whose
        own randomness is seeded from the game's, so it too is a function of the game's seed."""
        return lib.gc_rand(ffi.addressof(self._c_states[self._index(i)], "rng"))

    def declare_coin_win(self, idx, reason: str) -> None:
        """Ends the games of idx that are still running by an outside rule, as Game.declare_coin_win
        (a finished game keeps its result)."""
        code = _outside_rule(reason)
        self._observed = None
        for i in self._indices(idx):
            lib.gc_declare_coin_win(self._c_states + int(i), code)

    def _index(self, i: int) -> int:
        if not is_int(i) or not 0 <= i < self.n:
            raise IndexError(f"game {i} is outside the batch of {self.n}")
        return int(i)

    def _indices(self, idx) -> np.ndarray:
        given = np.asarray(idx)
        if given.ndim != 1 or (given.size and (given.dtype.kind not in "iu" or given.min() < 0
                                               or given.max() >= self.n)):
            raise IndexError(f"game indices must be a 1-D array of integers within 0..{self.n - 1}")
        return np.ascontiguousarray(given, dtype=np.int32)


def _i32p(a: np.ndarray):
    return ffi.from_buffer("int32_t[]", a)
