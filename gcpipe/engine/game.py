"""One Guerrilla Checkers game in OpenSpiel's vocabulary, and batches of games for batched players.

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
from gcpipe.errors import UserError

GUERRILLA, COIN = 0, 1          # OpenSpiel player ids
TERMINAL_PLAYER = -4            # OpenSpiel's kTerminalPlayerId
NUM_ACTIONS, OBS_SIZE, PASS_ACTION = 256, 120, 255
MAX_GAME_LENGTH = lib.GC_MAX_GAME_PLIES   # no legal game is longer (the proof: csrc/gc_rules.h)
SIDE_NAMES = ("guerrilla", "coin")
END_REASONS = ("none", "coins_cleared", "stones_exhausted", "stones_wiped", "stalemate", "ply_cap", "timeout")
_GUERRILLA_STEPS = ((0, 1), (1, 0), (-1, 0), (0, -1))   # k = down, right, left, up
_COIN_STEPS = ((-1, -1), (1, -1), (-1, 1), (1, 1))      # d = up-left, up-right, down-left, down-right
_SERIAL_PREFIX = "gc1"


class IllegalActionError(UserError):
    """An action that is out of range or not legal in the current state."""


def _square_name(c: int) -> str:
    return f"{'ABCDEFGH'[c % 8]}{c // 8 + 1}"


def _point_name(g: int) -> str:
    return f"{'abcdefg'[g % 7]}{g // 7 + 1}"


def action_to_string(action: int, player: int) -> str:
    """Readable notation of `action` for the side `player` (GUERRILLA or COIN)."""
    if player == GUERRILLA:
        first, k = divmod(action, 4)
        dx, dy = _GUERRILLA_STEPS[k]
        return f"{_point_name(first)}-{_point_name(first + dy * 7 + dx)}"
    src, d = divmod(action, 4)
    dx, dy = _COIN_STEPS[d]
    return f"{_square_name(src)}-{_square_name(src + dy * 8 + dx)}"


_MOVE_RE = re.compile(r"^\s*([a-hA-H])([1-8])\s*[-\s]?\s*([a-hA-H])([1-8])\s*$")


def string_to_action(text: str, player: int) -> int:
    """Parses the notation above (or "#N"); raises UserError with the reason if it cannot."""
    text = text.strip()
    if text.startswith("#"):
        try:
            return int(text[1:])
        except ValueError:
            raise UserError(f"'{text}' is not an action number (write #0 .. #255)") from None
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
        lib.gc_reset(self._state, _uint32(seed))

    # -- queries ---------------------------------------------------------------------------
    def current_player(self) -> int:
        return TERMINAL_PLAYER if self._state.winner else self._state.to_move - 1

    def is_terminal(self) -> bool:
        return bool(self._state.winner)

    def legal_actions(self) -> list[int]:
        buf = ffi.new("int16_t[256]")
        n = lib.gc_legal_actions(self._state, buf)
        return list(buf[0:n])

    def action_mask(self) -> np.ndarray:
        mask = np.zeros(NUM_ACTIONS, np.uint8)
        lib.gc_action_mask(self._state, ffi.from_buffer("uint8_t[]", mask))
        return mask

    def observation(self) -> np.ndarray:
        obs = np.zeros(OBS_SIZE, np.uint8)
        lib.gc_observation(self._state, ffi.from_buffer("uint8_t[]", obs))
        return obs

    def returns(self) -> list[float]:
        """[Guerrilla, COIN]: +1 for the winner, -1 for the loser, zeros while the game runs."""
        if not self._state.winner:
            return [0.0, 0.0]
        return [1.0, -1.0] if self._state.winner == 1 else [-1.0, 1.0]

    @property
    def winner(self) -> int | None:
        """GUERRILLA, COIN or None."""
        return self._state.winner - 1 if self._state.winner else None

    @property
    def end_reason(self) -> str:
        return END_REASONS[self._state.end_reason]

    @property
    def plies(self) -> int:
        return self._state.plies

    @property
    def stones_placed(self) -> int:
        return self._state.stones_placed

    @property
    def rng_state(self) -> int:
        return self._state.rng

    @rng_state.setter
    def rng_state(self, value: int) -> None:
        self._state.rng = _uint32(value)

    def stones(self) -> list[int]:
        return [g for g in range(49) if self._state.stones >> g & 1]

    def coins(self) -> list[int]:
        return [c for c in range(64) if self._state.coins >> c & 1]

    def action_to_string(self, action: int) -> str:
        return action_to_string(action, self._state.to_move - 1)

    def string_to_action(self, text: str) -> int:
        return string_to_action(text, self._state.to_move - 1)

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
            why = "the game is over" if self._state.winner else f"it is not legal for {SIDE_NAMES[self._state.to_move - 1]}"
            raise IllegalActionError(f"action {action} cannot be played: {why}")
        return captured

    def declare_coin_win(self, reason: str) -> None:
        """Ends a running game by an outside rule ("ply_cap" or "timeout")."""
        lib.gc_declare_coin_win(self._state, END_REASONS.index(reason))

    def sample_action(self, logits: np.ndarray) -> int:
        """The rules.md §9 draw: softmax over the legal logits, one draw from the game's generator
        (advancing it); the caller applies the action.  The same C routine as GameBatch.sample_apply."""
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
        return (f"{_SERIAL_PREFIX} {s.stones:013x} {s.coins:016x} {s.to_move} {s.must_capture} "
                f"{s.previous_cell} {s.stones_placed} {s.plies} {s.winner} {s.end_reason} {s.rng}")

    @classmethod
    def deserialize(cls, text: str) -> "Game":
        parts = text.split() if isinstance(text, str) else []
        if len(parts) != 11 or parts[0] != _SERIAL_PREFIX:
            raise UserError(f"not a serialized game (expected '{_SERIAL_PREFIX}' and 10 fields): {str(text)[:60]!r}")
        try:
            stones, coins = int(parts[1], 16), int(parts[2], 16)
            to_move, must, prev, placed, plies, winner, reason, rng = (int(p) for p in parts[3:])
        except ValueError:
            raise UserError(f"malformed serialized game: {text[:60]!r}") from None
        limits = [(stones, 1 << 49), (coins, 1 << 64), (to_move, 256), (must, 256), (prev + 128, 256),
                  (placed, 256), (plies, 1 << 16), (winner, 256), (reason, 256), (rng, 1 << 32)]
        if any(not 0 <= v < top for v, top in limits):
            raise UserError(f"serialized game has a field out of range: {text[:60]!r}")
        game = cls.__new__(cls)
        game._state = ffi.new("gc_state *", {
            "stones": stones, "coins": coins, "rng": rng, "plies": plies, "stones_placed": placed,
            "to_move": to_move, "must_capture": must, "previous_cell": prev, "winner": winner, "end_reason": reason})
        code = lib.gc_validate(game._state)
        if code:
            what = ("", "bits outside the board", "impossible piece counts", "no valid side to move",
                    "an inconsistent capture chain", "an inconsistent result")[code]
            raise UserError(f"serialized game describes an impossible state ({what})")
        return game

    @classmethod
    def from_position(cls, *, stones=(), coins=(), to_move: int = GUERRILLA, stones_placed: int | None = None,
                      chain_coin: int | None = None, seed: int = 0) -> "Game":
        """A hand-built position: stone points, coin squares, the side to move, stones ever placed
        (default: those on the board) and, for a COIN capture chain, the chaining coin's square."""
        stone_bits = sum(1 << g for g in stones)
        coin_bits = sum(1 << c for c in coins)
        placed = len(set(stones)) if stones_placed is None else stones_placed
        return cls.deserialize(f"{_SERIAL_PREFIX} {stone_bits:x} {coin_bits:x} {to_move + 1} "
                               f"{int(chain_coin is not None)} {-1 if chain_coin is None else chain_coin} "
                               f"{placed} 0 0 0 {_uint32(seed)}")

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
            status = f"{SIDE_NAMES[s.winner - 1]} won ({END_REASONS[s.end_reason]}) after {s.plies} plies"
        else:
            chain = f", must capture with {_square_name(s.previous_cell)}" if s.must_capture else ""
            status = f"{SIDE_NAMES[s.to_move - 1]} to move{chain}"
        lines.append(f"stones placed {s.stones_placed}/66, on board {bin(stones).count('1')}, "
                     f"coins {bin(coins).count('1')}; {status}")
        return "\n".join(lines)


def _uint32(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < 2**32:
        raise UserError(f"a seed is an unsigned 32-bit integer, got {value!r}")
    return int(value)


def _state_dtype() -> np.dtype:
    fields = [("stones", np.uint64), ("coins", np.uint64), ("rng", np.uint32), ("plies", np.uint16),
              ("stones_placed", np.uint8), ("to_move", np.uint8), ("must_capture", np.uint8),
              ("previous_cell", np.int8), ("winner", np.uint8), ("end_reason", np.uint8)]
    return np.dtype({"names": [n for n, _ in fields], "formats": [t for _, t in fields],
                     "offsets": [ffi.offsetof("gc_state", n) for n, _ in fields],
                     "itemsize": ffi.sizeof("gc_state")})


STATE_DTYPE = _state_dtype()


class GameBatch:
    """`n` game states in one C array.  `states` is a numpy structured view of it (zero copy), so
    e.g. `batch.states["winner"]` or `["to_move"]` read all games at once."""

    def __init__(self, n: int):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
            raise UserError(f"a batch holds at least one game, got {n!r}")
        self.n = int(n)
        self._c_states = ffi.new("gc_state[]", self.n)
        self.states = np.frombuffer(ffi.buffer(self._c_states), dtype=STATE_DTYPE)
        self._obs = np.zeros((self.n, OBS_SIZE), np.uint8)
        self._mask = np.zeros((self.n, NUM_ACTIONS), np.uint8)
        self._actions = np.zeros(self.n, np.int32)

    def reset(self, i: int, seed: int) -> None:
        lib.gc_reset(self._c_states + self._index(i), _uint32(seed))

    def game(self, i: int) -> Game:
        """A copy of game i as a Game."""
        game = Game.__new__(Game)
        game._state = ffi.new("gc_state *", self._c_states[self._index(i)])
        return game

    def apply(self, i: int, action: int) -> int:
        captured = lib.gc_apply(self._c_states + self._index(i), int(action))
        if captured < 0:
            raise IllegalActionError(f"action {action} is not legal in game {i}")
        return captured

    def observe(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Observations [k,120] and action masks [k,256] of games idx (views of reused buffers)."""
        idx = self._indices(idx)
        k = len(idx)
        lib.gc_batch_observe(self._c_states, _i32p(idx), k, ffi.from_buffer("uint8_t[]", self._obs),
                             ffi.from_buffer("uint8_t[]", self._mask))
        return self._obs[:k], self._mask[:k]

    def sample_apply(self, idx: np.ndarray, logits: np.ndarray) -> np.ndarray:
        """Samples a move for each game idx[k] from logits[k] (rules.md §9, the game's own
        generator) and applies it; returns the actions (-1 where a game had none)."""
        idx = self._indices(idx)
        logits = np.ascontiguousarray(logits, dtype=np.float32)
        if logits.shape != (len(idx), NUM_ACTIONS):
            raise ValueError(f"logits must have shape ({len(idx)}, {NUM_ACTIONS}), got {logits.shape}")
        lib.gc_batch_sample_apply(self._c_states, _i32p(idx), len(idx), ffi.from_buffer("float[]", logits),
                                  ffi.from_buffer("int32_t[]", self._actions))
        return self._actions[:len(idx)].copy()

    def bot_apply(self, idx: np.ndarray, bot, workspace=ffi.NULL) -> None:
        """Lets the engine bot `bot` (a `gc_bot *`, see BotSpec.c_bot) move in each running game
        idx[k], drawing from the game's own generator; an MCTS bot needs a node pool `workspace`
        of more than its iterations."""
        for i in self._indices(idx):
            state = self._c_states + int(i)
            action = lib.gc_bot_choose(state, bot, workspace)
            if action < 0 or lib.gc_apply(state, action) < 0:
                raise RuntimeError(f"bot found no move in running game {i} (code {action})")

    def draw(self, i: int) -> int:
        """The next value of game i's generator (rules.md §8), which advances: for players whose
        own randomness is seeded from the game's, so it too is a function of the game's seed."""
        return lib.gc_rand(ffi.addressof(self._c_states[self._index(i)], "rng"))

    def declare_coin_win(self, idx: np.ndarray, reason: str) -> None:
        """Ends running games idx by an outside rule, as Game.declare_coin_win."""
        code = END_REASONS.index(reason)
        for i in self._indices(idx):
            lib.gc_declare_coin_win(self._c_states + int(i), code)

    def _index(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(f"game {i} is outside the batch of {self.n}")
        return int(i)

    def _indices(self, idx) -> np.ndarray:
        idx = np.ascontiguousarray(idx, dtype=np.int32)
        if idx.ndim != 1 or (len(idx) and (idx.min() < 0 or idx.max() >= self.n)):
            raise IndexError(f"game indices must be a 1-D array within 0..{self.n - 1}")
        return idx


def _i32p(a: np.ndarray):
    return ffi.from_buffer("int32_t[]", a)
