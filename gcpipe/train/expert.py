"""Expert iteration (Anthony et al. 2017; the AlphaZero loop; Gumbel MuZero's policy improvement),
read top to bottom: self-play games whose moves a cheap Gumbel search with the current network
chooses, then the network trained toward what the search found.

Self-play.  Each iteration plays `selfplay_games` complete games from the start position, game j
seeded from (seed, iteration, j), spread over the run's ranks (gcpipe/train/ranks.py: game j to rank
j mod ranks; rank 0 gathers them in seed order) and over each rank's worker processes (a game is a
pure function of its seed and the weights, so the data depend on neither count).  One recurrent state per
game steps on every ply (standard 5c: both sides are the same net seeing the same observations).
In `bot_fraction` of the games the search plays one side (alternating; with a fraction per side,
the side the bot does not play) against the `opponent` bot of the other side; the net still steps on the bot's plies.  No legal game exceeds GC_MAX_GAME_PLIES plies.

Moves.  A Gumbel search plays its Sequential Halving winner (a draw from pi' through the Gumbel
noise); a PUCT search draws its move in proportion to the root visits (AlphaZero's temperature 1),
so self-play games differ from seed to seed either way.

Targets.  At every searched ply the search's improved policy over the legal actions — Gumbel:
pi' = softmax(logit + sigma(completed Q)); PUCT: the root's visit fractions — raised to
1 / expert_target_temperature and renormalised (a network that plays by sampling its policy, as
match players do, needs sharp targets); at every ply a value target y for the value row (the Guerrilla's value) and -y for the pass logit
(the COIN's value: side_value's convention, model.md §6), so both rows become +-1 win/loss
estimates a search uses as they are (value 'outcome' of gcpipe.search.settings).  y is the game's
outcome z (+1 Guerrilla win, -1 COIN win), or at searched plies (1 - m) z + m q with q the root's
value after the search and m = expert_value_mix: q is a lower-variance (if biased) estimate than
one noisy self-play result.

Update.  The newest `replay_games` games are packed, whole, into rows of GC_MAX_GAME_PLIES steps
(each game starting from a zero recurrent state), and `expert_epochs` passes of minibatches of
`expert_minibatch_rows` rows minimise
    expert_policy_coef * cross-entropy(pi', masked softmax(logits)) over searched plies
    + vf_coef * mean((value row - y)^2 + (pass logit + y)^2) / 2 over all plies
with Muon and the run's cosine learning rate.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np
import torch

from gcpipe._engine import ffi, lib
from gcpipe.engine import COIN, GUERRILLA, NO_SIDE, NUM_ACTIONS, OBS_SIZE, GameBatch
from gcpipe.engine.bots import kinds_by_side
from gcpipe.lifetime import worker_pool
from gcpipe.nn.inference import CompiledNet, net_arrays
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.nn.select import mask_logits
from gcpipe.players import Player, define
from gcpipe.search.player import SearchPlayer
from gcpipe.search.settings import SearchSettings, make_settings
from gcpipe.train.config import TrainConfig, torch_device
from gcpipe.train.muon import Muon
from gcpipe.train.ranks import Alone
from gcpipe.train.ppo import cosine_lr, make_policy
from gcpipe.train.sequence import forward_segments

MAX_PLIES = lib.GC_MAX_GAME_PLIES
SLOTS = 256                    # concurrent games per worker: the search's batch
# The training-log fields an iteration adds to those it shares with PPO's (games, episode_length,
# bot_n, bot_score): self-play results and the Brier scores of the values by side to move.
LOG_FIELDS = ("selfplay_guerrilla_wins",) + tuple(f"{value}_brier_{side}" for value in ("root_value", "search_value")
                                                  for side in ("guerrilla", "coin"))


@dataclass
class GameRecord:
    """One finished self-play game, ply by ply (T plies)."""
    obs: np.ndarray            # uint8 [T, 120]: before each ply
    masks: np.ndarray          # bool [T, 256]: the mover's legal actions
    targets: np.ndarray        # float32 [T, 256]: pi' at searched plies, 0 elsewhere
    searched: np.ndarray       # bool [T]: the ply was the expert's (the search's; distillation: a network's)
    movers: np.ndarray         # int8 [T]: the side to move (GUERRILLA or COIN)
    outcome: float             # +1 Guerrilla won, -1 COIN won
    search_side: int           # NO_SIDE both sides searched (self-play), else the searched side vs the bot
    root_values: np.ndarray    # float32 [T]: the net's value of each searched root (Guerrilla's), NaN elsewhere
    search_values: np.ndarray  # float32 [T]: the root's value after the search, NaN elsewhere

    @property
    def plies(self) -> int:
        return len(self.obs)

    def __setstate__(self, state: dict) -> None:
        """Unpickling (a game played by another rank, a saved state read back) gives each record
        field names and array dtypes objects of their own; the shared ones (interned names, numpy's
        dtypes) make the games pickle to the same bytes (in state.pt) wherever they were played and
        however often they were saved and read."""
        self.__dict__.update({sys.intern(key): value.view(np.dtype(value.dtype.str)) if isinstance(value, np.ndarray)
                              else value for key, value in state.items()})


def game_seed(seed: int, iteration: int, game: int) -> int:
    """A well-mixed uint32 generator state for game `game` of iteration `iteration` (odd, so never 0)."""
    z = (seed * 0x9E3779B97F4A7C15 + iteration * 0xBF58476D1CE4E5B9 + game * 0x94D049BB133111EB) % 2**64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
    return ((z ^ (z >> 31)) & 0xFFFFFFFF) | 1


def play_games(player, seeds: np.ndarray, search_sides: np.ndarray, opponents: tuple[Player, Player]
               ) -> list[GameRecord]:
    """Plays one game per seed (search_sides[k]: NO_SIDE self-play, GUERRILLA or COIN the searched
    side against opponents[other side], the player of that side) with `player`, the expert: a
    runtime player whose choose(..., want_policy=True) leaves the targets in `last` (a SearchResult's
    policy, root_value and search_value), as the search player does.  All play through the player protocol."""
    # Each bot runtime with the sides it plays (one runtime when both sides have the same player).
    bots = ([(opponents[GUERRILLA].runtime(), (GUERRILLA, COIN))] if opponents[GUERRILLA] == opponents[COIN]
            else [(opponents[side].runtime(), (side,)) for side in (GUERRILLA, COIN)])
    slots = min(SLOTS, len(seeds))
    batch = GameBatch(slots)
    player.start(slots)
    for bot, _ in bots:
        bot.start(slots)
    obs = np.zeros((slots, MAX_PLIES, OBS_SIZE), np.uint8)
    masks = np.zeros((slots, MAX_PLIES, NUM_ACTIONS), bool)
    targets = np.zeros((slots, MAX_PLIES, NUM_ACTIONS), np.float32)
    searched = np.zeros((slots, MAX_PLIES), bool)
    movers = np.zeros((slots, MAX_PLIES), np.int8)
    root_values = np.full((slots, MAX_PLIES), np.nan, np.float32)
    search_values = np.full((slots, MAX_PLIES), np.nan, np.float32)
    length = np.zeros(slots, np.int64)
    slot_game = np.full(slots, -1, np.int64)
    records: list[GameRecord | None] = [None] * len(seeds)
    next_game = 0

    def start(free: np.ndarray) -> None:
        nonlocal next_game
        started = []
        for slot in free:
            if next_game < len(seeds):
                batch.reset(int(slot), int(seeds[next_game]))
                slot_game[slot], length[slot] = next_game, 0
                searched[slot], targets[slot] = False, 0.0
                root_values[slot], search_values[slot] = np.nan, np.nan
                started.append(slot)
                next_game += 1
        started = np.array(started, np.int64)
        player.new_games(started)
        for bot, _ in bots:
            bot.new_games(started)

    start(np.arange(slots))
    while (active := np.flatnonzero(slot_game >= 0).astype(np.int32)).size:
        plies = length[active]
        if plies.max() >= MAX_PLIES:
            raise RuntimeError(f"a self-play game went past {MAX_PLIES} plies, which no legal game does")
        position, legal = batch.observe(active)
        obs[active, plies], masks[active, plies] = position, legal.astype(bool)
        to_move = batch.to_move[active]
        movers[active, plies] = to_move
        side = search_sides[slot_game[active]]
        by_search = (side == NO_SIDE) | (side == to_move)
        actions = np.empty(len(active), np.int32)
        if not by_search.all():
            player.observe(batch, active[~by_search])  # the net steps on the bot's ply too (5c)
        bot_side = np.where(side == NO_SIDE, NO_SIDE, 1 - side)   # the side the game's bot plays
        for bot, bot_sides in bots:
            moves = ~by_search & np.isin(to_move, bot_sides)
            if moves.any():
                actions[moves] = bot.choose(batch, active[moves])
            waiting = by_search & np.isin(bot_side, bot_sides)
            if waiting.any():
                bot.observe(batch, active[waiting])
        search_slots, t = active[by_search], plies[by_search]
        if search_slots.size:
            actions[by_search] = player.choose(batch, search_slots, want_policy=True)
            targets[search_slots, t] = player.last.policy
            searched[search_slots, t] = True
            root_values[search_slots, t] = player.last.root_value
            search_values[search_slots, t] = player.last.search_value
        batch.apply(active, actions)
        length[active] += 1
        winners = batch.winners
        finished = active[winners[active] != NO_SIDE]
        for slot in finished:
            T = int(length[slot])
            records[slot_game[slot]] = GameRecord(
                obs=obs[slot, :T].copy(), masks=masks[slot, :T].copy(), targets=targets[slot, :T].copy(),
                searched=searched[slot, :T].copy(), movers=movers[slot, :T].copy(),
                outcome=1.0 if winners[slot] == GUERRILLA else -1.0,
                search_side=int(search_sides[slot_game[slot]]), root_values=root_values[slot, :T].copy(),
                search_values=search_values[slot, :T].copy())
            slot_game[slot] = -1
        if finished.size:
            start(finished)
    return records


def sharpen(targets: np.ndarray, temperature: float) -> np.ndarray:
    """Policy targets [T, 256] raised to 1 / temperature and renormalised per ply (rows of zeros,
    the bot's plies, stay zero).  Each row is divided by its largest entry first, so no row
    underflows to zero however small the temperature."""
    targets = targets.astype(np.float64)
    top = targets.max(axis=1, keepdims=True)
    powered = np.power(np.divide(targets, top, out=np.zeros_like(targets), where=top > 0), 1.0 / temperature)
    total = powered.sum(axis=1, keepdims=True)
    return np.divide(powered, total, out=np.zeros_like(powered), where=total > 0).astype(np.float32)


def search_expert(arrays: dict[str, np.ndarray], settings: SearchSettings) -> SearchPlayer:
    """Expert iteration's expert: the search guided by the network `arrays` (net_arrays)."""
    return SearchPlayer.from_net(CompiledNet.from_arrays(arrays), settings)


def deal(games: np.ndarray, workers: int) -> list[np.ndarray]:
    """`games` dealt round-robin into at most `workers` non-empty parts.  Round-robin, not in blocks:
    the bot games sit at the end of an iteration's seeds and an MCTS bot's move costs many network
    searches, so blocks would give one worker most of the iteration's work."""
    return [part for part in (games[w::workers] for w in range(workers)) if part.size]


def in_seed_order(parts: list[np.ndarray], played: list[list[GameRecord]], n: int) -> list[GameRecord]:
    """The games of `parts` (indices into the iteration's n seeds), played part by part, in seed order."""
    records: list[GameRecord | None] = [None] * n
    for part, games in zip(parts, played):
        for index, record in zip(part, games):
            records[index] = record
    return records


def play_tasks(tasks: list[tuple], workers: int) -> list[list[GameRecord]]:
    """Each task's games: task = (make_expert, its arguments, seeds, search_sides, opponents), the
    expert built where the games are played.  With several tasks, on that many forked workers
    (they run C code only, no torch, so the parent's thread pools do not matter)."""
    if len(tasks) <= 1 or workers == 1:   # (none: a rank with no game this iteration)
        return [_play_task(task) for task in tasks]
    with worker_pool(min(workers, len(tasks))) as pool:
        return pool.map(_play_task, tasks)


def _play_task(task) -> list[GameRecord]:
    make_expert, arguments, *games = task
    return play_games(make_expert(*arguments), *games)


def pack_rows(games: list[GameRecord], order: np.ndarray) -> list[list[int]]:
    """Games (indices, in `order`) packed first-fit, whole, into rows of MAX_PLIES plies."""
    rows: list[list[int]] = []
    room: list[int] = []
    for g in order:
        plies = games[g].plies
        for r, free in enumerate(room):
            if free >= plies:
                rows[r].append(int(g))
                room[r] -= plies
                break
        else:
            rows.append([int(g)])
            room.append(MAX_PLIES - plies)
    return rows


def value_targets(game: GameRecord, value_mix: float) -> np.ndarray:
    """The value row's target y at each ply of `game` (module docstring): z, mixed with the
    search's root value at searched plies."""
    y = np.full(game.plies, game.outcome, np.float32)
    if value_mix > 0:
        y[game.searched] = (1.0 - value_mix) * game.outcome + value_mix * game.search_values[game.searched]
    return y


def stack_rows(games: list[GameRecord], rows: list[list[int]], value_mix: float = 0.0) -> dict[str, torch.Tensor]:
    """The training tensors of packed rows: obs, masks, targets, searched, starts, value targets
    (the Guerrilla's, value_targets) and valid (plies that belong to a game), each [rows, MAX_PLIES, ...]."""
    n = len(rows)
    out = {"obs": np.zeros((n, MAX_PLIES, OBS_SIZE), np.uint8), "masks": np.zeros((n, MAX_PLIES, NUM_ACTIONS), bool),
           "targets": np.zeros((n, MAX_PLIES, NUM_ACTIONS), np.float32), "searched": np.zeros((n, MAX_PLIES), bool),
           "starts": np.zeros((n, MAX_PLIES), bool), "value_target": np.zeros((n, MAX_PLIES), np.float32),
           "valid": np.zeros((n, MAX_PLIES), bool)}
    for r, row in enumerate(rows):
        at = 0
        for g in row:
            game, end = games[g], at + games[g].plies
            out["obs"][r, at:end], out["masks"][r, at:end] = game.obs, game.masks
            out["targets"][r, at:end], out["searched"][r, at:end] = game.targets, game.searched
            out["starts"][r, at], out["valid"][r, at:end] = True, True
            out["value_target"][r, at:end] = value_targets(game, value_mix)
            at = end
    return {name: torch.from_numpy(array) for name, array in out.items()}


def expert_loss(policy: MinGRUPolicy, batch: dict[str, torch.Tensor]
                ) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """The policy and value losses of the module docstring on packed rows, and the log's figures."""
    rows = batch["obs"].shape[0]
    initial = torch.zeros(policy.layers, rows, policy.hidden, device=batch["obs"].device)
    logits, values, pass_logits = forward_segments(policy, batch["obs"], initial, batch["starts"])
    log_probs = torch.log_softmax(mask_logits(logits, batch["masks"]), dim=-1)
    searched, valid = batch["searched"], batch["valid"]
    targets = batch["targets"][searched]
    policy_loss = -(targets * log_probs[searched]).sum(-1).mean()
    y = batch["value_target"][valid]
    value_loss = 0.5 * ((values[valid] - y).square() + (pass_logits[valid] + y).square()).mean()
    with torch.no_grad():   # softmax, not exp(log_softmax): exp of the -1e4 entries is slow on CPU
        probs = torch.softmax(mask_logits(logits[searched], batch["masks"][searched]), dim=-1)
        entropy = -(probs * log_probs[searched]).sum(-1).mean()
    target_entropy = mean_entropy(targets)
    return policy_loss, value_loss, {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(),
                                     "entropy": float(entropy), "target_entropy": target_entropy,
                                     "approx_kl": policy_loss.item() - target_entropy}


def mean_entropy(distributions: torch.Tensor) -> float:
    """The mean entropy of the rows of `distributions` [k, 256], in C (gc_mean_entropy: float64
    sums in order, gc_math.h's log): torch's float32 figure differed between identical two-thread
    runs (2.0686111 and 2.0686150 in a distillation's first update), and numpy's float64 log takes
    other code on CPUs with AVX-512 than without."""
    p = np.ascontiguousarray(distributions.detach().cpu().numpy(), np.float32)
    return float(lib.gc_mean_entropy(len(p), ffi.from_buffer("float[]", p))) if len(p) else math.nan


class ExpertIteration:
    """The network, its optimiser, the replay window of games and the iteration counters; the
    same driving interface as PPO (collect, update, pop_log, state_dict) for gcpipe.train.run."""

    def __init__(self, config: TrainConfig, init: MinGRUPolicy | None = None, workers: int = 1, ranks=None):
        self.config = c = config
        self.ranks = ranks if ranks is not None else Alone()   # rank 0, the learner, trains; all play
        self.device = torch_device(c)    # the update's; the self-play search runs in C on the CPU
        self.generator = torch.Generator().manual_seed(c.seed)
        self.policy = make_policy(c, self.generator).to(self.device)
        if init is not None:
            self.policy.load_state_dict(init.state_dict())
        self.optimizer = Muon(self.policy.parameters(), lr=c.learning_rate, momentum=c.muon_momentum)
        self.settings = make_settings(where="expert iteration", simulations=c.search_simulations,
                                      variant=c.search_variant, considered=c.search_considered, value="outcome",
                                      rollouts=c.search_rollouts, rollout_weight=c.search_rollout_weight,
                                      temperature=1.0 if c.search_variant == "puct" else 0.0)
        # The built-in bot of each side in the bot_fraction games, as PPO's environments play it.
        mcts = {"iterations": c.mcts_iterations, "exploration": c.mcts_exploration, "rollout": c.mcts_rollout}
        self.opponents = tuple(define("opponent", {"kind": kind, **(mcts if kind == "mcts" else {})})
                               for kind in kinds_by_side(c.opponent))
        self.workers = max(1, workers)
        self.epoch = 0
        self.global_step = 0
        self.games: list[GameRecord] = []
        self._log: dict[str, float] = {}

    def collect(self) -> None:
        """Plays one iteration's games with the current weights (with the other ranks, which the
        learner tells what to play and whose games it gathers) and adds them to the window."""
        c = self.config
        weights = net_arrays(self.policy)
        self.ranks.deal((self.epoch, weights))
        new = self.ranks.gather(self.play_share(self.epoch, weights))
        if c.expert_target_temperature != 1.0:
            for game in new:
                game.targets = sharpen(game.targets, c.expert_target_temperature)
        self.games = (self.games + new)[-c.replay_games:]
        plies = sum(g.plies for g in new)
        self.global_step += plies
        self._log = _selfplay_log(new)

    def follow(self) -> None:
        """A rank other than the learner: plays its share of each iteration the learner deals
        and sends the games back, until the learner says the run is over."""
        for epoch, weights in self.ranks.orders():
            self.ranks.gather(self.play_share(epoch, weights))

    def play_share(self, epoch: int, weights: dict[str, np.ndarray]) -> list[GameRecord | None]:
        """This rank's games of iteration `epoch` with the network `weights` (net_arrays), in
        seed order, None in the places of the other ranks' games."""
        c = self.config
        n = c.selfplay_games
        seeds = np.array([game_seed(c.seed, epoch, j) for j in range(n)], np.uint32)
        bot_as_guerrilla, bot_as_coin = c.bot_games(n)
        bot_games = bot_as_guerrilla + bot_as_coin
        sides = np.full(n, NO_SIDE, np.int64)     # the side the search plays against the bot
        sides[n - bot_games:] = (np.repeat([COIN, GUERRILLA], [bot_as_guerrilla, bot_as_coin]) if c.bot_per_side
                                 else np.where(np.arange(bot_games) % 2 == 0, GUERRILLA, COIN))
        return self.play(seeds, sides, weights, self.ranks.mine(np.arange(n)))

    def play(self, seeds: np.ndarray, sides: np.ndarray, weights: dict[str, np.ndarray],
             games: np.ndarray) -> list[GameRecord | None]:
        """The iteration's games `games` (indices into seeds) in seed order, the search with the
        network `weights` as the expert; None in the places of the others."""
        parts = deal(games, self.workers)
        tasks = [(search_expert, (weights, self.settings), seeds[part], sides[part], self.opponents) for part in parts]
        return in_seed_order(parts, play_tasks(tasks, self.workers), len(seeds))

    def update(self) -> dict[str, float]:
        c = self.config
        lr = cosine_lr(c, self.epoch)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        totals: dict[str, float] = {}
        steps = 0
        self.policy.train()
        for _ in range(c.expert_epochs):
            order = torch.randperm(len(self.games), generator=self.generator).numpy()
            rows = pack_rows(self.games, order)
            for first in range(0, len(rows), c.expert_minibatch_rows):
                batch = stack_rows(self.games, rows[first:first + c.expert_minibatch_rows], c.expert_value_mix)
                batch = {name: tensor.to(self.device) for name, tensor in batch.items()}
                policy_loss, value_loss, parts = expert_loss(self.policy, batch)
                loss = c.expert_policy_coef * policy_loss + c.vf_coef * value_loss
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), c.max_grad_norm)
                self.optimizer.step()
                for key, value in parts.items():
                    totals[key] = totals.get(key, 0.0) + value
                steps += 1
        self.policy.eval()
        self.epoch += 1
        out = {key: value / steps for key, value in totals.items()}
        out["learning_rate"] = lr
        return out

    def pop_log(self) -> dict[str, float]:
        log, self._log = self._log, {}
        return log

    def on_checkpoint(self) -> None:
        """Nothing to refresh: expert iteration keeps no opponent pool."""

    def close(self) -> None:
        """No environments to release."""

    def state_dict(self) -> dict:
        return {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "generator": self.generator.get_state(), "epoch": self.epoch, "global_step": self.global_step,
                "games": self.games}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.epoch, self.global_step = state["epoch"], state["global_step"]
        self.games = list(state["games"])


def _selfplay_log(games: list[GameRecord]) -> dict[str, float]:
    """The iteration's self-play statistics (the training log fields of gcpipe.train.run)."""
    selfplay = [g for g in games if g.search_side == NO_SIDE]
    versus = [g for g in games if g.search_side != NO_SIDE]
    out = {"games": float(len(games)), "episode_length": float(np.mean([g.plies for g in games]))}
    if selfplay:
        out["selfplay_guerrilla_wins"] = float(np.mean([g.outcome > 0 for g in selfplay]))
    if versus:
        out["bot_n"] = float(len(versus))
        out["bot_score"] = float(np.mean([(g.outcome > 0) == (g.search_side == GUERRILLA) for g in versus]))
    for name, key in (("root_value", "root_values"), ("search_value", "search_values")):
        for side, label in ((GUERRILLA, "guerrilla"), (COIN, "coin")):
            errors = []
            for g in games:
                values = getattr(g, key)
                keep = ~np.isnan(values) & (g.movers == side)
                win = (g.outcome + 1) / 2
                errors.append(((values[keep] + 1) / 2 - win) ** 2)
            errors = np.concatenate(errors) if errors else np.zeros(0)
            out[f"{name}_brier_{label}"] = float(errors.mean()) if errors.size else math.nan
    return out
