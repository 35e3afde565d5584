"""A plain-Python search written from csrc/gc_search.h's description, one game at a time, with a
dictionary tree and the float32 operations in the order the header states — the reference the C
search is compared with node for node.  The network step and exp/log are the engine's (tested
on their own), so a difference here is a difference of search logic."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gcpipe._engine import lib
from gcpipe.engine import Game
from gcpipe.nn.inference import OUTPUTS, CompiledNet
from oracle import park_miller

F = np.float32


def visit_sequence(k: int, sims: int) -> list[int]:
    """mctx's get_sequence_of_considered_visits."""
    if k <= 1:
        return list(range(sims))
    log2max = math.ceil(math.log2(k))
    sequence, visits, num = [], [0] * k, k
    while len(sequence) < sims:
        for _ in range(max(1, sims // (log2max * num))):
            sequence.extend(visits[:num])
            for i in range(num):
                visits[i] += 1
        num = max(2, num // 2)
    return sequence[:sims]


@dataclass
class Node:
    game: Game
    parent: int
    action: int
    state: np.ndarray
    edges: list = field(default_factory=list)      # [action, logit, prior, child]
    visits: int = 0
    value_sum: float = 0.0
    raw_value: F = F(0)


class ReferenceSearch:
    def __init__(self, net: CompiledNet, settings):
        self.net, self.s = net, settings

    # -- evaluation ------------------------------------------------------------------------------
    def _evaluate(self, node: Node) -> np.ndarray:
        states = node.state[None].copy()
        out = np.zeros((1, OUTPUTS), np.float32)
        self.net.step(states, np.zeros(1, np.int32), node.game.observation()[None], out)
        node.state = states[0]
        return out[0]

    def _leaf_value(self, game: Game, out: np.ndarray) -> F:
        a, b, c, d = (F(v) for v in self.s.value_coef)
        to_move = F(1.0) if game.current_player() == 0 else F(0.0)
        x = F(F(F(a * out[256]) + F(b * out[255])) + F(c * to_move)) + d
        if self.s.value_squash == "logistic":
            return F(F(2.0) * F(F(1.0) / F(F(1.0) + F(lib.gc_expf(float(-x)))))) - F(1.0)
        return F(min(max(x, F(-1.0)), F(1.0)))

    def _expand(self, node: Node, out: np.ndarray) -> None:
        legal = node.game.legal_actions()
        top = max(out[a] for a in legal)
        priors, total = [], F(0)
        for a in legal:
            p = F(lib.gc_expf(float(F(out[a] - top))))
            priors.append(p)
            total = F(total + p)
        node.edges = [[a, F(out[a]), F(p / total), -1] for a, p in zip(legal, priors)]
        node.raw_value = self._leaf_value(node.game, out)

    # -- statistics ------------------------------------------------------------------------------
    def _sign(self, node: Node) -> F:
        return F(1.0) if node.game.current_player() == 0 else F(-1.0)

    def _n(self, edge) -> int:
        return 0 if edge[3] < 0 else self.nodes[edge[3]].visits

    def _q(self, edge, sign: F) -> F:
        child = self.nodes[edge[3]]
        return F(sign * F(child.value_sum / child.visits))

    def _sigma(self, node: Node) -> list[F]:
        sign = self._sign(node)
        q, weighted, probability, sum_n, max_n = [], 0.0, 0.0, 0, 0
        for edge in node.edges:
            n = self._n(edge)
            if n:
                q.append(self._q(edge, sign))
                prior = edge[2] if edge[2] > F(1e-30) else F(1e-30)
                weighted += float(prior) * float(q[-1])
                probability += float(prior)
            else:
                q.append(None)
            sum_n += n
            max_n = max(max_n, n)
        raw = F(sign * node.raw_value)
        mixed = F((float(raw) + sum_n * (weighted / probability)) / (sum_n + 1)) if sum_n else raw
        q = [mixed if v is None else v for v in q]
        low, high = min(q), max(q)
        spread = F(high - low) if F(high - low) > F(1e-8) else F(1e-8)
        scale = F(F(F(self.s.c_visit) + F(max_n)) * F(self.s.c_scale))
        return [F(scale * F(F(v - low) / spread)) for v in q]

    def _improved(self, node: Node, sigma) -> list[F]:
        raw = [F(edge[1] + s) for edge, s in zip(node.edges, sigma)]
        top = max(raw)
        out, total = [], F(0)
        for value in raw:
            out.append(F(lib.gc_expf(float(F(value - top)))))
            total = F(total + out[-1])
        return [F(v / total) for v in out]

    def _best_considered(self, sigma, visits) -> int:
        best, best_score = -1, None
        for i, edge in enumerate(self.nodes[0].edges):
            if self._n(edge) != visits:
                continue
            score = F(F(self.gumbel[i] + edge[1]) + sigma[i])
            if best < 0 or score > best_score:
                best, best_score = i, score
        return best

    def _select(self, index: int, simulation: int) -> int:
        node = self.nodes[index]
        if self.s.variant == "puct":
            sign = self._sign(node)
            first_play = F(sign * node.raw_value)
            sum_n = sum(self._n(e) for e in node.edges)
            scale = F(F(self.s.c_puct) * F(np.sqrt(F(max(sum_n, 1)))))
            best, best_score = 0, None
            for i, edge in enumerate(node.edges):
                n = self._n(edge)
                q = self._q(edge, sign) if n else first_play
                score = F(q + F(F(scale * edge[2]) / F(1 + n)))
                if i == 0 or score > best_score:
                    best, best_score = i, score
            return best
        sigma = self._sigma(node)
        if index == 0:
            return self._best_considered(sigma, self.table[simulation])
        policy = self._improved(node, sigma)
        sum_n = sum(self._n(e) for e in node.edges)
        best, best_score = 0, None
        for i, edge in enumerate(node.edges):
            score = F(policy[i] - F(F(self._n(edge)) / F(1 + sum_n)))
            if i == 0 or score > best_score:
                best, best_score = i, score
        return best

    def _backup(self, index: int, value: F) -> None:
        while index >= 0:
            self.nodes[index].visits += 1
            self.nodes[index].value_sum += float(value)
            index = self.nodes[index].parent

    # -- the search --------------------------------------------------------------------------------
    def run(self, game: Game, state: np.ndarray) -> tuple[int, list, int]:
        """(action, improved policy over the root's legal actions, the game's generator after the
        search); `self.nodes` is the tree."""
        self.nodes = [Node(game.clone(), -1, -1, state.copy())]
        root = self.nodes[0]
        self._expand(root, self._evaluate(root))
        self._backup(0, root.raw_value)
        rng = game.rng_state
        legal = len(root.edges)
        if self.s.variant == "gumbel" and legal > 1:
            self.gumbel = []
            for _ in range(legal):
                rng = park_miller(rng)
                u = F(F(F(rng >> 8) + F(0.5)) * F(1.0 / 8388608.0))
                self.gumbel.append(F(-lib.gc_logf(-lib.gc_logf(float(u)))))
            self.table = visit_sequence(min(legal, self.s.considered), self.s.simulations)
        for simulation in range(self.s.simulations if legal > 1 else 0):
            index = 0
            while True:
                node = self.nodes[index]
                if node.game.is_terminal():
                    self._backup(index, node.raw_value)
                    break
                edge = node.edges[self._select(index, simulation)]
                if edge[3] >= 0:
                    index = edge[3]
                    continue
                child = node.game.clone()
                child.apply_action(edge[0])
                leaf = Node(child, index, edge[0], node.state.copy())
                edge[3] = len(self.nodes)
                self.nodes.append(leaf)
                if child.is_terminal():
                    leaf.raw_value = F(1.0) if child.winner == 0 else F(-1.0)
                else:
                    self._expand(leaf, self._evaluate(leaf))
                self._backup(edge[3], leaf.raw_value)
                break
        return self._decide(rng)

    def _decide(self, rng: int):
        root = self.nodes[0]
        visits = [self._n(e) for e in root.edges]
        best = visits.index(max(visits))
        if self.s.variant == "gumbel":
            sigma = self._sigma(root)
            policy = self._improved(root, sigma)
            if len(root.edges) > 1:
                best = self._best_considered(sigma, max(visits))
        else:
            total = sum(visits)
            policy = [F(F(n) / F(total)) if total else e[2] for n, e in zip(visits, root.edges)]
            if self.s.temperature > 0 and len(root.edges) > 1:
                t = F(self.s.temperature)
                log_max = F(lib.gc_logf(float(max(visits))))
                weights = [F(0) if not n else F(n) if t == F(1)
                           else F(lib.gc_expf(float(F(F(F(lib.gc_logf(float(n))) - log_max) / t)))) for n in visits]
                total_w = F(0)
                for w in weights:
                    total_w = F(total_w + w)
                rng = park_miller(rng)
                r, running = F(F(F(rng) / F(2147483648.0)) * total_w), F(0)
                best = max(i for i, n in enumerate(visits) if n)
                for i, w in enumerate(weights):
                    running = F(running + w)
                    if w > 0 and running >= r:
                        best = i
                        break
        return root.edges[best][0], policy, rng
