"""One C search workspace (gc_search) that searches many games of a GameBatch at once."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gcpipe._engine import ffi, lib
from gcpipe.engine import NUM_ACTIONS, GameBatch
from gcpipe.errors import UserError
from gcpipe.nn.inference import CompiledNet
from gcpipe.search.settings import SearchSettings

# Memory one concurrent search may take (nodes with their recurrent states and the edges a
# typical tree touches); more games than fit are searched in several calls.
MEMORY_BUDGET = 256 * 2**20
_NODE_BYTES, _TOUCHED_EDGE_BYTES = 72, 40 * 16


def games_per_call(settings: SearchSettings, net: CompiledNet) -> int:
    per_game = (settings.simulations + 1) * (4 * net.layers * net.hidden + _NODE_BYTES + _TOUCHED_EDGE_BYTES)
    return max(1, MEMORY_BUDGET // per_game)


@dataclass
class SearchResult:
    actions: np.ndarray             # int32 [k]
    policy: np.ndarray | None       # float32 [k, 256]: the improved policy (0 on illegal actions)
    root_value: np.ndarray          # float32 [k]: the net's value of each root (Guerrilla's)
    search_value: np.ndarray        # float32 [k]: the root's value after the search (Guerrilla's)
    visits_of_move: np.ndarray      # int32 [k]
    legal: np.ndarray               # int32 [k]
    evaluations: np.ndarray         # int32 [k]: leaves the net evaluated (terminal leaves need none)


class Searcher:
    """Searches up to `max_games` games per call with `net` under `settings` (see gc_search.h)."""

    def __init__(self, settings: SearchSettings, net: CompiledNet, max_games: int):
        self.settings, self.net, self.max_games = settings, net, int(max_games)
        self._config = settings.c_config()
        workspace = lib.gc_search_new(self._config, self.max_games, net.layers, net.hidden)
        if workspace == ffi.NULL:
            raise UserError(f"cannot allocate a search workspace for {self.max_games} games of "
                            f"{settings.simulations} simulations")
        self._workspace = ffi.gc(workspace, lib.gc_search_free)

    def run(self, batch: GameBatch, games: np.ndarray, net_states: np.ndarray, slots: np.ndarray,
            want_policy: bool = False) -> SearchResult:
        """Searches batch games `games` (running), the root step advancing net_states[slots[k]];
        returns the chosen actions (not applied) and the statistics.  The games' generators advance
        by the search's draws."""
        games = np.ascontiguousarray(games, dtype=np.int32)
        slots = np.ascontiguousarray(slots, dtype=np.int32)
        n = len(games)
        actions = np.zeros(n, np.int32)
        policy = np.zeros((n, NUM_ACTIONS), np.float32) if want_policy else None
        stats = ffi.new("gc_search_stats[]", max(n, 1))
        for first in range(0, n, self.max_games):
            part = slice(first, min(n, first + self.max_games))
            count = part.stop - part.start
            code = lib.gc_search_run(
                self._workspace, self.net.c_net, batch._c_states, ffi.from_buffer("int32_t[]", games[part]), count,
                ffi.from_buffer("float[]", net_states), ffi.from_buffer("int32_t[]", slots[part]),
                ffi.from_buffer("int32_t[]", actions[part]),
                ffi.NULL if policy is None else ffi.from_buffer("float[]", policy[part]), stats + first)
            if code != 0:
                raise RuntimeError("the search was given a finished game")
        records = np.frombuffer(ffi.buffer(stats, ffi.sizeof("gc_search_stats") * max(n, 1)), dtype=_STATS)[:n]
        return SearchResult(actions=actions, policy=policy, root_value=records["root_value"].copy(),
                            search_value=records["search_value"].copy(),
                            visits_of_move=records["visits_of_move"].copy(), legal=records["legal"].copy(),
                            evaluations=records["evaluations"].copy())

    def root_edges(self, k: int) -> list[tuple[int, int, float, int]]:
        """(action, visits, W, node index) of the root's children in game k's latest tree."""
        return [(node.action, node.visits, node.value_sum, index) for index, node
                in enumerate(self.tree(k, states=False)) if index > 0 and node.parent == 0]

    def principal_variation(self, k: int, first: int) -> list[int]:
        """`first`, then the most visited child of each node (the earliest created on a tie)."""
        nodes = self.tree(k, states=False)
        children: dict[int, list[int]] = {}
        for index, node in enumerate(nodes):
            if index > 0:
                children.setdefault(node.parent, []).append(index)
        at = next((i for i in children.get(0, []) if nodes[i].action == first), None)
        line = [first]
        while at is not None and children.get(at):
            at = max(children[at], key=lambda i: (nodes[i].visits, -i))
            if nodes[at].visits == 0:
                break
            line.append(nodes[at].action)
        return line

    def tree(self, k: int, states: bool = True) -> list[TreeNode]:
        """The nodes of game k's latest tree (of the latest call), in creation order (0 = root); with
        `states` False, without their recurrent states (state None)."""
        out, index = [], 0
        parent, action, visits = ffi.new("int32_t *"), ffi.new("int32_t *"), ffi.new("int32_t *")
        value_sum, raw_value = ffi.new("double *"), ffi.new("float *")
        while True:
            state = np.zeros((self.net.layers, self.net.hidden), np.float32) if states else None
            if lib.gc_search_node_info(self._workspace, k, index, parent, action, visits, value_sum, raw_value,
                                       ffi.NULL if state is None else ffi.from_buffer("float[]", state)) != 0:
                return out
            out.append(TreeNode(parent[0], action[0], visits[0], value_sum[0], raw_value[0], state))
            index += 1


@dataclass(frozen=True)
class TreeNode:
    parent: int
    action: int
    visits: int
    value_sum: float
    raw_value: float
    state: np.ndarray | None


_STATS = np.dtype([("root_value", np.float32), ("search_value", np.float32), ("visits_of_move", np.int32),
                   ("legal", np.int32), ("evaluations", np.int32)])
assert _STATS.itemsize == ffi.sizeof("gc_search_stats")
