"""A pure-Python rules oracle written straight from rules.md §1-§5, independent of csrc/:
plain lists and coordinates, a full rescan of all squares after every stone (as the reference
does), no bitboards.  Slow but obvious; tests compare the C engine with it action by action.

Its bookkeeping follows the reference's: the Guerrilla's turn (last point placed, stones placed
this turn) and the COIN's chain (flag, previous square) are cleared only when the turn passes,
so a game that ends in the middle of a turn keeps them (observation bytes 114-117)."""

GUERRILLA, COIN = 1, 2
STONE_STEPS = ((0, 1), (1, 0), (-1, 0), (0, -1))      # k: down, right, left, up
COIN_STEPS = ((-1, -1), (1, -1), (-1, 1), (1, 1))     # d: up-left, up-right, down-left, down-right
START_COINS = ((3, 2), (2, 3), (4, 3), (3, 4), (5, 4), (4, 5))


def park_miller(state: int) -> int:
    """rules.md §8, BSD rand_r in Schrage's form: the next generator state, which is also the draw."""
    s = state or 123459876
    hi, lo = divmod(s, 127773)
    x = 16807 * lo - 2836 * hi
    return x + 2147483647 if x < 0 else x


def on_grid(gx, gy):
    return 0 <= gx < 7 and 0 <= gy < 7


def on_board(x, y):
    return 0 <= x < 8 and 0 <= y < 8


def corners(x, y):
    """The existing corner points of square (x, y)."""
    return [(px, py) for px, py in ((x - 1, y - 1), (x - 1, y), (x, y - 1), (x, y)) if on_grid(px, py)]


class OracleGame:
    def __init__(self):
        self.stones = set()            # points (gx, gy)
        self.coins = set(START_COINS)  # squares (x, y)
        self.to_move = GUERRILLA
        self.must_capture = False
        self.previous_cell = None      # (x, y) of the chaining coin
        self.stones_placed = 0
        self.turn_point = None         # (gx, gy) of the Guerrilla's last stone this turn
        self.turn_stones = 0           # stones the Guerrilla placed this turn
        self.winner = None
        self.end_reason = "none"

    # -- legal actions -------------------------------------------------------------------
    def placeable(self, gx, gy):
        if (gx, gy) in self.stones:
            return False
        if self.stones_placed == 0:
            return True
        return any((gx + dx, gy + dy) in self.stones for dx, dy in STONE_STEPS)

    def crossed(self, x, y, dx, dy):
        return (x + (-1 if dx < 0 else 0), y + (-1 if dy < 0 else 0))

    def coin_steps(self, x, y, captures_only):
        out = []
        for d, (dx, dy) in enumerate(COIN_STEPS):
            nx, ny = x + dx, y + dy
            if not on_board(nx, ny) or (nx, ny) in self.coins:
                continue
            if captures_only and self.crossed(x, y, dx, dy) not in self.stones:
                continue
            out.append((y * 8 + x) * 4 + d)
        return out

    def legal_actions(self):
        if self.winner:
            return []
        actions = []
        if self.to_move == GUERRILLA:
            for gy in range(7):
                for gx in range(7):
                    if not self.placeable(gx, gy):
                        continue
                    for k, (dx, dy) in enumerate(STONE_STEPS):
                        sx, sy = gx + dx, gy + dy
                        if on_grid(sx, sy) and (sx, sy) not in self.stones:
                            actions.append((gy * 7 + gx) * 4 + k)
        elif self.must_capture:
            actions = self.coin_steps(*self.previous_cell, captures_only=True)
        else:
            for y in range(8):
                for x in range(8):
                    if (x, y) in self.coins:
                        actions += self.coin_steps(x, y, captures_only=False)
        return sorted(actions)

    # -- applying ------------------------------------------------------------------------
    def place(self, point):
        self.stones.add(point)
        self.stones_placed += 1
        self.turn_point, self.turn_stones = point, self.turn_stones + 1
        surrounded = [sq for sq in self.coins if all(c in self.stones for c in corners(*sq))]
        self.coins -= set(surrounded)
        if not self.coins:
            self.winner, self.end_reason = GUERRILLA, "coins_cleared"
        elif self.stones_placed >= 66:
            self.winner, self.end_reason = COIN, "stones_exhausted"
        elif not self.stones:
            self.winner, self.end_reason = COIN, "stones_wiped"
        return len(surrounded)

    def apply(self, action):
        """Applies a legal action; returns what it captured."""
        assert action in self.legal_actions()
        if self.to_move == GUERRILLA:
            first, k = divmod(action, 4)
            gx, gy = first % 7, first // 7
            dx, dy = STONE_STEPS[k]
            captured = self.place((gx, gy))
            if self.winner:
                return captured
            captured += self.place((gx + dx, gy + dy))
            if self.winner:
                return captured
            self.turn_point, self.turn_stones = None, 0
            self.to_move = COIN
        else:
            src, d = divmod(action, 4)
            x, y = src % 8, src // 8
            dx, dy = COIN_STEPS[d]
            self.coins.remove((x, y))
            self.coins.add((x + dx, y + dy))
            point = self.crossed(x, y, dx, dy)
            captured = int(point in self.stones)
            self.stones.discard(point)
            if captured and not self.stones:      # the chain flags stay as they were
                self.winner, self.end_reason = COIN, "stones_wiped"
                return captured
            if captured and self.coin_steps(x + dx, y + dy, captures_only=True):
                self.must_capture, self.previous_cell = True, (x + dx, y + dy)
            else:
                self.must_capture, self.previous_cell = False, None
                self.to_move = GUERRILLA
        if not self.legal_actions():
            self.winner = COIN if self.to_move == GUERRILLA else GUERRILLA
            self.end_reason = "stalemate"
        return captured

    def observation(self):
        obs = [0] * 120
        for gx, gy in self.stones:
            obs[gy * 7 + gx] = 1
        for x, y in self.coins:
            obs[49 + y * 8 + x] = 1
        obs[113] = self.to_move
        obs[114] = int(self.must_capture)
        obs[115] = 0 if self.previous_cell is None else self.previous_cell[1] * 8 + self.previous_cell[0] + 1
        obs[116] = 0 if self.turn_point is None else self.turn_point[1] * 7 + self.turn_point[0] + 1
        obs[117] = self.turn_stones
        obs[118] = self.stones_placed
        obs[119] = len(self.stones)
        return obs
