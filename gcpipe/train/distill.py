"""Policy distillation: one standard 5c network (the student) trained to play each side as that
side's teacher does, e.g. the COIN of one PPO run and the Guerrilla of another.

Why.  PPO runs find their strengths one side at a time (the capture-reward runs of docs/experiments.md: a COIN
that plays the stalemate line beside a weak Guerrilla, or a strong Guerrilla beside an ordinary
COIN); a student that reproduces both teachers holds both in one checkpoint.

Games.  Expert iteration's loop (gcpipe.train.expert: `selfplay_games` games per iteration, game j
seeded from (seed, iteration, j), `bot_fraction` of them against the `opponent` bot, the newest
`replay_games` kept) with the teachers as the expert.  The network plies of a game are played by
the teachers, each side by its own, or, in `distill_student_fraction` of the games, by the student
(DAgger, Ross et al. 2011: the student also learns in the positions its own moves lead to, which
the teachers alone never reach).  Every network steps on every ply of its game (standard 5c; a
legacy teacher, on its own side's plies only).

Targets.  At every network ply, whoever moves, the policy of the mover's teacher: the softmax of its
logits over the legal actions, the distribution a net player samples from (rules.md §9), raised
to 1 / expert_target_temperature; both value rows toward the game's +-1 outcome (side_value's
convention, as expert iteration trains them).  The update is expert iteration's.

Search teachers.  With teacher_search set for a side, that side's teacher is expert iteration's
search (the search_* settings) guided by the teacher run's network: its target is the search's
improved policy (PUCT: the visit distribution) and, where it plays, its move is the search's
(PUCT: drawn in proportion to the visits).  Such a teacher is stronger than its network; the
experiment log (docs/experiments.md) measures what students take from it (in raw play, nothing yet).
"""
from __future__ import annotations

import numpy as np

from gcpipe._engine import ffi, lib
from gcpipe.engine import COIN, GUERRILLA, NUM_ACTIONS, SIDE_NAMES, GameBatch
from gcpipe.nn.checkpoint import Checkpoint
from gcpipe.nn.inference import CompiledNet
from gcpipe.nn.player import NetworkPlayer
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.search.player import SearchPlayer
from gcpipe.search.searcher import SearchResult
from gcpipe.search.settings import SearchSettings
from gcpipe.train.config import TrainConfig
from gcpipe.train.expert import ExpertIteration, GameRecord, deal, in_seed_order, play_tasks

Teacher = tuple[dict, bool, SearchSettings | None]   # net arrays, full_turn, the search it guides (None: none)


class TeacherExpert:
    """The expert of distillation's games, through the player protocol: the mover's teacher labels
    each ply it is asked to choose (`last.policy`), and the move is drawn, from each game's own
    generator, from the teacher's policy (a search teacher: the search's move) or, when a student
    is given, from the student's."""

    def __init__(self, teachers: tuple[Teacher, Teacher], student: dict | None = None):
        """teachers: the Guerrilla's and the COIN's, in side order; student: the student's net arrays
        (standard 5c) when it plays the moves."""
        self.teachers = [NetworkPlayer.from_net(CompiledNet.from_arrays(arrays), full_turn) if search is None
                         else SearchPlayer.from_net(CompiledNet.from_arrays(arrays), search, full_turn)
                         for arrays, full_turn, search in teachers]
        self.student = None if student is None else NetworkPlayer.from_net(CompiledNet.from_arrays(student), True)
        self.last: SearchResult | None = None

    def _players(self) -> list[NetworkPlayer | SearchPlayer]:
        return self.teachers + ([self.student] if self.student is not None else [])

    def start(self, n_slots: int) -> None:
        for player in self._players():
            player.start(n_slots)

    def new_games(self, slots: np.ndarray) -> None:
        for player in self._players():
            if isinstance(player, SearchPlayer):
                player.new_games(slots)
            else:
                player.reset(slots)

    def observe(self, games: GameBatch, slots: np.ndarray) -> None:
        """A ply the expert does not play (the bot's): every network steps, none is read."""
        slots = np.asarray(slots, np.int32)
        obs = games.observe(slots)[0]
        to_move = games.to_move[slots]
        for side, teacher in zip((GUERRILLA, COIN), self.teachers):
            if isinstance(teacher, SearchPlayer):   # standard 5c (run.py checks): steps on every ply
                teacher.observe(games, slots)
                continue
            steps = slice(None) if teacher.full_turn else to_move == side
            teacher.advance(slots[steps], obs[steps])
        if self.student is not None:
            self.student.advance(slots, obs)

    def choose(self, games: GameBatch, slots: np.ndarray, want_policy: bool = True) -> np.ndarray:
        slots = np.asarray(slots, np.int32)
        # Copies: a search teacher observes subsets of the slots, which overwrites observe's buffers.
        obs, legal = (view.copy() for view in games.observe(slots))
        to_move = games.to_move[slots]
        logits = np.zeros((len(slots), NUM_ACTIONS), np.float32)
        policy = np.zeros((len(slots), NUM_ACTIONS), np.float32)
        actions = np.zeros(len(slots), np.int32)
        searched = np.zeros(len(slots), bool)     # plies whose teacher is a search (its move is the search's)
        for side, teacher in zip((GUERRILLA, COIN), self.teachers):
            moves = to_move == side
            if isinstance(teacher, SearchPlayer):
                if moves.any():
                    actions[moves] = teacher.choose(games, slots[moves], want_policy=True)
                    policy[moves] = teacher.last.policy
                teacher.observe(games, slots[~moves])
                searched |= moves
                continue
            logits[moves] = teacher.forward(slots[moves], obs[moves])
            policy[moves] = legal_softmax(logits[moves], legal[moves])
            if teacher.full_turn:
                teacher.advance(slots[~moves], obs[~moves])
        if self.student is not None:
            actions = games.sample(slots, self.student.forward(slots, obs))
        elif (~searched).any():
            actions[~searched] = games.sample(slots[~searched], logits[~searched])
        nan = np.full(len(slots), np.nan, np.float32)
        self.last = SearchResult(actions=actions, policy=policy, root_value=nan,
                                 search_value=nan.copy(), visits_of_move=np.zeros(len(slots), np.int32),
                                 legal=legal.sum(axis=1).astype(np.int32), evaluations=np.zeros(len(slots), np.int32))
        return actions


def legal_softmax(logits: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """softmax over each row's legal actions, 0 on the illegal ones: float32 [k, 256].  In C
    (gc_legal_softmax: gc_math.h's exp, float64 sums in order), not numpy, whose exp and sums take
    other code on CPUs with AVX-512 than without, so the targets are the same on every machine."""
    logits = np.ascontiguousarray(logits, np.float32)
    legal = np.ascontiguousarray(legal, np.uint8)
    out = np.empty_like(logits)
    if len(out):
        lib.gc_legal_softmax(len(out), ffi.from_buffer("float[]", logits), ffi.from_buffer("uint8_t[]", legal),
                             ffi.from_buffer("float[]", out))
    return out


class Distillation(ExpertIteration):
    """Expert iteration's trainer (update, log, saved state) with the two teachers as the expert."""

    def __init__(self, config: TrainConfig, teachers: tuple[Checkpoint, Checkpoint],
                 init: MinGRUPolicy | None = None, workers: int = 1, ranks=None):
        super().__init__(config, init, workers, ranks)
        self.teachers = tuple((teacher.net, teacher.full_turn,
                               self.settings if config.teacher_search[side] else None)
                              for teacher, side in zip(teachers, SIDE_NAMES))

    def play(self, seeds: np.ndarray, sides: np.ndarray, weights: dict[str, np.ndarray],
             games: np.ndarray) -> list[GameRecord | None]:
        """The iteration's games `games` in seed order (None in the places of the others): the
        student (`weights`) plays in an evenly spread distill_student_fraction of the iteration's
        games (game j when floor((j + 1) f) > floor(j f)), the teachers in the rest."""
        n, fraction = len(seeds), self.config.distill_student_fraction
        by_student = np.floor(np.arange(1, n + 1) * fraction) > np.floor(np.arange(n) * fraction)
        tasks, parts = [], []
        for plays, arguments in ((False, (self.teachers,)), (True, (self.teachers, weights))):
            for part in deal(games[by_student[games] == plays], self.workers):
                tasks.append((TeacherExpert, arguments, seeds[part], sides[part], self.opponents))
                parts.append(part)
        return in_seed_order(parts, play_tasks(tasks, self.workers), n)
