"""PPO over the batched C environments, read top to bottom: sampling, advantages, the
rollout of one epoch, the update.  Follows the reference trainer (model.md §4).

Rows.  The env buffers are [num_envs, slots, ...]; flattened, row n*slots + s is slot s of env n.
Each row carries its own recurrent state, stepped every tick (in self-play the waiting slot's
only legal action is the pass, so both slots' states see every position: "standard 5c"), and
zeroed when its game ends.  Slot 1 of the last `num_historical_envs` envs is played by frozen
snapshots from the opponent pool, slot 1 of the `num_bot_envs` envs before them by the built-in
bot (inside the env step; with bot_fraction per side, slot 0's side is fixed in them: slot0_sides);
every other row by the current policy.  The trained rows are slot 0 of every env, plus slot 1
of the current-policy envs when `train_slot_1` is set.

A segment is one trained row over the `horizon` ticks of an epoch; it starts from the recurrent
state the row had when the epoch began.

The rollout steps the network through the play-time C network (gcpipe/train/rollout_net.py), or
in torch (`rollout_net: torch`, and on a GPU), and draws the moves by gcpipe/train/policy.py.  The
update is torch's autograd, its matrix products, MinGRU gates and policy terms in C on the CPU
(gcpipe/train/matmul.py, sequence.py, policy.py), where it recomputes the rollout's values and
log-probabilities to the bit.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import torch
from torch import Tensor

from gcpipe.engine import COIN, GUERRILLA, NO_SIDE, PASS_ACTION, SIDE_NAMES
from gcpipe.engine.vecenv import VecEnv
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.errors import UserError
from gcpipe.torch_env import torch_threads
from gcpipe.train.config import TrainConfig, torch_device
from gcpipe.train.matmul import bf16_runs_here
from gcpipe.train.muon import Muon
from gcpipe.train.policy import draw_legal, sample_legal
from gcpipe.train.pool import OpponentPool
from gcpipe.train.ranks import Alone
from gcpipe.train.rollout_net import RolloutNet
from gcpipe.train.sequence import policy_segments

COIN_VALUE_ROW = PASS_ACTION   # the pass logit, read as the COIN rows' value with `side_value` (config.py)


def vtrace_gae(rewards: Tensor, values: Tensor, terminals: Tensor, bootstrap: Tensor, ratios: Tensor,
               gamma: float, lam: float, rho_clip: float, c_clip: float) -> Tensor:
    """GAE generalised with V-trace clips, per segment.  All [B, T] except bootstrap [B] (the value
    after the last step).  rewards[t] and terminals[t] follow action t; a terminal step does not
    bootstrap.  With ratios 1 (on-policy) this is plain GAE(gamma, lambda):
        delta_t = min(rho_clip, r_t) * (reward_t + gamma (1 - d_t) V_{t+1} - V_t)
        A_t     = delta_t + gamma lambda min(c_clip, r_t) (1 - d_t) A_{t+1}"""
    next_values = torch.cat([values[:, 1:], bootstrap.unsqueeze(1)], dim=1)
    not_done = 1.0 - terminals
    deltas = ratios.clamp(max=rho_clip) * (rewards + gamma * not_done * next_values - values)
    decays = (gamma * lam) * ratios.clamp(max=c_clip) * not_done
    advantages = torch.empty_like(values)
    advantage = torch.zeros_like(bootstrap)
    for t in reversed(range(values.shape[1])):
        advantage = torch.addcmul(deltas[:, t], decays[:, t], advantage)
        advantages[:, t] = advantage
    return advantages


def side_values(pass_logits: Tensor, values: Tensor, coin: Tensor | None) -> Tensor:
    """Each row's value: the value output, or for COIN rows (`coin` true) the raw pass logit
    (logits[..., COIN_VALUE_ROW])."""
    return values if coin is None else torch.where(coin, pass_logits, values)


def cosine_lr(config: TrainConfig, epoch: int) -> float:
    if not config.anneal_lr:
        return config.learning_rate
    return config.learning_rate * 0.5 * (1.0 + math.cos(math.pi * epoch / config.total_epochs))


def make_policy(config: TrainConfig, generator: torch.Generator | None = None) -> MinGRUPolicy:
    return MinGRUPolicy(bias=config.bias, generator=generator)


def bot_env_range(c: TrainConfig) -> tuple[int, int]:
    """The bot envs, [first, end): the block just before the historical envs (the module docstring)."""
    first_historical = c.num_envs - c.num_historical_envs
    return first_historical - c.num_bot_envs, first_historical


def slot0_sides(c: TrainConfig) -> int | np.ndarray | None:
    """The network's (slot 0's) side for VecEnv: c.side (None: drawn per game), or per env where
    bot_fraction is per side: in the bot envs the side the bot does not play, first against the
    Guerrilla bot, then against the COIN bot."""
    if not c.bot_per_side:
        return None if c.side == "random" else SIDE_NAMES.index(c.side)
    sides = np.full(c.num_envs, NO_SIDE)
    first_bot, end = bot_env_range(c)
    bot_as_guerrilla, _ = c.bot_games(c.num_envs)
    sides[first_bot:first_bot + bot_as_guerrilla] = COIN
    sides[first_bot + bot_as_guerrilla:end] = GUERRILLA
    return sides


def make_env(c: TrainConfig, threads: int, envs: np.ndarray | None = None) -> VecEnv:
    """The run's environments (not yet reset), or those of `envs` (their numbers in the run: one
    rank's share), stepped on `threads` threads."""
    sides = slot0_sides(c)
    if envs is not None and isinstance(sides, np.ndarray):
        sides = sides[envs]
    env = VecEnv(c.num_envs if envs is None else len(envs), selfplay=c.selfplay, side=sides, opponent=c.opponent,
                 mcts_iterations=c.mcts_pool_iterations, mcts_exploration=c.mcts_exploration,
                 mcts_rollout=c.mcts_rollout, max_episode_length=c.max_episode_length, seed=c.seed,
                 threads=threads, coin_mobility_reward=c.coin_mobility_reward, env_numbers=envs)
    if c.mcts_iterations_from is not None:
        env.set_mcts_iterations(c.sparring_iterations(0))    # bot mode: the bot moves in reset() too
    return env


def rank_envs(c: TrainConfig, rank: int, ranks: int) -> np.ndarray:
    """The envs of the run that rank `rank` of `ranks` steps, by their numbers in the run."""
    return np.arange(rank, c.num_envs, ranks)


def env_rows(envs: np.ndarray, slots: int) -> Tensor:
    """The rows of `envs` (numbers of envs of `slots` slots), env-major as the buffers are."""
    return (torch.from_numpy(envs)[:, None] * slots + torch.arange(slots)).view(-1)


# The epoch buffers, by name (PPO.buf_NAME), and the segment dimension of each.
BUFFERS = {"obs": 0, "masks": 0, "actions": 0, "logprobs": 0, "values": 0, "rewards": 0, "terminals": 0,
           "starts": 0, "coin": 0, "initial_state": 1, "bootstrap": 0}


class PPO:
    """The policy, its optimiser, the environments, the opponent pool and the epoch buffers.

    Over several ranks (gcpipe/train/ranks.py; docs/distributed.md) env i of the run is rank
    i mod ranks's, and every rank steps its envs with the current weights.  Each tick's uniforms
    are drawn for all of the run's rows on every rank, from the same stream, and each rank takes
    its own rows' (the draws a row gets do not depend on the rank that holds it), and while an env
    awaits a new snapshot the ranks tell each other, each tick, which frozen-opponent games ended
    (the opponent pool, replicated on every rank, swaps snapshots at the games' ends).  At the end
    of an epoch the learner, rank 0, gathers the buffers and the ended games in the run's row and
    game order, updates the network alone and sends the new weights and random stream with the
    next epoch: the bytes of one process."""

    def __init__(self, config: TrainConfig, init: MinGRUPolicy | None = None, workers: int | None = None,
                 ranks=None):
        self.config = c = config
        self.ranks = ranks if ranks is not None else Alone()
        if c.update_precision == "bfloat16" and not bf16_runs_here():
            raise UserError("'update_precision' bfloat16 needs an x86-64 CPU with AVX2 and FMA (its emulation runs "
                            "on their float32 products; this one runs the scalar path)")
        # The network and the epoch buffers live on `device`; the envs' buffers stay on the CPU.
        self.device = device = torch_device(c)
        if self.ranks.size > 1 and (device.type != "cpu" or c.rollout_net == "torch"):
            raise UserError(f"PPO over ranks steps its rollouts in C on the CPU (the same bits at any split of the "
                            f"rows): set device: cpu and rollout_net: c or auto (device is {device.type}, rollout_net "
                            f"{c.rollout_net})")
        self.workers = workers if workers is not None else torch.get_num_threads()
        self.generator = torch.Generator().manual_seed(c.seed)     # init; on the CPU also sampling, minibatches
        self.draws = self.generator if device.type == "cpu" else torch.Generator(device).manual_seed(c.seed)
        self.policy = make_policy(c, self.generator).to(device)
        if init is not None:       # before the opponent pool's first snapshot, which is this policy
            self.policy.load_state_dict(init.state_dict())
        self.optimizer = Muon(self.policy.parameters(), lr=c.learning_rate, momentum=c.muon_momentum)
        self.epoch = 0
        self.global_step = 0
        # This rank's envs, by their numbers in the run (all of them in one process).
        self.env_ids = rank_envs(c, self.ranks.rank, self.ranks.size)
        self.env = make_env(c, threads=self.workers,   # the bots' searches on every core; same results
                            envs=self.env_ids if self.ranks.size > 1 else None)
        self.env.reset()
        num_rows = len(self.env_ids) * self.env.num_slots
        # Zero-copy torch views of the env buffers, flattened to rows.
        self.obs = torch.from_numpy(self.env.observations).view(num_rows, -1)
        self.masks = torch.from_numpy(self.env.action_masks).view(torch.bool).view(num_rows, -1)
        self.actions = torch.from_numpy(self.env.actions).view(num_rows)
        self.rewards = torch.from_numpy(self.env.rewards).view(num_rows)
        self.terminals = torch.from_numpy(self.env.terminals).view(num_rows)
        mobility = self.env.mobility_rewards
        self.mobility_rewards = None if mobility is None else torch.from_numpy(mobility).view(num_rows)
        self.side_value = c.side_value and c.selfplay
        self._assign_rows()
        self.pool = None
        if c.num_historical_envs:
            self.pool = OpponentPool(c.pool_size, c.num_historical_envs, c.frozen_banks, c.seed,
                                     lambda: make_policy(c).to(device))
            self.pool.add(0, self.policy)
        # The recurrent state of every row: torch's [L, rows, H], or with the C rollout step the
        # same view of the C step's states.
        self.rollout_net = None
        if c.rollout_net == "c" or (c.rollout_net == "auto" and device.type == "cpu"):
            self.rollout_net = RolloutNet(num_rows, self.policy.layers, self.policy.hidden)
            self.state = self.rollout_net.states
        else:
            self.state = self.policy.initial_state(num_rows)
        self._allocate_buffers()
        self._tick = 0              # env steps so far in this process: the ended games' order
        self._ended = []            # over ranks: (tick, env number, gc_game_end record) since the last pop_log
        self._snapshot = None       # the learner's checkpoint since the last epoch's orders (its global step)
        self._batch = None          # the learner's gathered buffers, over ranks

    def _assign_rows(self) -> None:
        """Which rows play what (see the module docstring), and the bot and historical envs'
        opponent tags; over ranks, the run's rows (the draws and the learner's batch are the
        run's) and this rank's among them."""
        c, slots = self.config, self.env.num_slots
        num_rows = c.num_envs * slots
        first_bot, self.first_historical = bot_env_range(c)
        historical_rows = torch.arange(self.first_historical, c.num_envs) * slots + 1
        is_current = torch.ones(num_rows, dtype=torch.bool)
        is_current[historical_rows] = False
        is_current[torch.arange(first_bot, self.first_historical) * slots + 1] = False
        is_trained = torch.zeros(num_rows, dtype=torch.bool)
        is_trained[0::slots] = True
        if c.train_slot_1 and c.selfplay:
            is_trained |= is_current
        # This rank's rows, by their row in the run: env-major, so in the run's order.
        self.run_rows = env_rows(self.env_ids, slots)
        local = np.full(c.num_envs, -1)          # an env's index here, -1 where another rank holds it
        local[self.env_ids] = np.arange(len(self.env_ids))
        bots = local[first_bot:self.first_historical]
        self.env.opponent_tags[bots[bots >= 0]] = -1
        # Historical env h (env first_historical + h of the run) plays bank h mod banks: its tag.
        here = local[self.first_historical:]
        self.hist_envs_here = here[here >= 0]                                    # this rank's historical envs
        self.hist_ids_here = np.flatnonzero(here >= 0)                           # ... and their h
        if c.num_historical_envs:
            self.env.opponent_tags[self.hist_envs_here] = 1 + self.hist_ids_here % min(c.frozen_banks,
                                                                                       c.num_historical_envs)
        self.historical_rows = torch.from_numpy(np.where(here >= 0, here * slots + 1, -1))   # h's row here, or -1
        self.historical_rows_device = self.historical_rows.to(self.device)
        # The draws: each tick's uniforms are the run's current-policy rows', and where this rank's lie
        # among them (None: all are here).
        run_current_rows = torch.nonzero(is_current).view(-1)
        self.run_current = len(run_current_rows)
        is_current, is_trained = is_current[self.run_rows], is_trained[self.run_rows]
        # Row indices on the CPU (the env buffers') and on the device (the network's tensors).
        self.current_rows_cpu = torch.nonzero(is_current).view(-1)
        self.current_rows_int32 = self.current_rows_cpu.to(torch.int32)     # (the C step's slots)
        self.current_rows = self.current_rows_cpu.to(self.device)
        self.trained_rows = torch.nonzero(is_trained).view(-1).to(self.device)
        # Positions of the trained rows inside the current-policy batch.
        self.trained_in_current = torch.searchsorted(self.current_rows, self.trained_rows)
        self.all_current = bool(is_current.all())
        self.all_trained = bool(is_trained.all())
        self.current_draws = (None if self.ranks.size == 1 else
                              torch.searchsorted(run_current_rows, self.run_rows[self.current_rows_cpu]))
        self.trained_run_rows = self.run_rows[self.trained_rows.cpu()]    # this rank's trained rows in the run

    def _allocate_buffers(self) -> None:
        """The epoch buffers, segment-major [trained rows, horizon, ...], on the device."""
        rows, horizon, device = len(self.trained_rows), self.config.horizon, self.device
        self.buf_obs = torch.zeros(rows, horizon, self.obs.shape[1], dtype=torch.uint8, device=device)
        self.buf_masks = torch.zeros(rows, horizon, self.masks.shape[1], dtype=torch.bool, device=device)
        self.buf_actions = torch.zeros(rows, horizon, dtype=torch.int64, device=device)
        self.buf_logprobs = torch.zeros(rows, horizon, device=device)
        self.buf_values = torch.zeros(rows, horizon, device=device)
        self.buf_rewards = torch.zeros(rows, horizon, device=device)
        self.buf_terminals = torch.zeros(rows, horizon, device=device)
        self.buf_starts = torch.zeros(rows, horizon, dtype=torch.bool, device=device)
        self.buf_coin = torch.zeros(rows, horizon, dtype=torch.bool, device=device)   # side_value: the row plays COIN
        self.buf_initial_state = torch.zeros(self.policy.layers, rows, self.policy.hidden, device=device)
        self.buf_bootstrap = torch.zeros(rows, device=device)

    def _coin_rows(self) -> Tensor:
        """Which rows play COIN in the games now in the env's observations."""
        return torch.from_numpy(self.env.slot_sides == COIN).view(-1).to(self.device)

    # ---------------------------------------------------------------- rollout
    def collect(self) -> None:
        """Plays one epoch (horizon ticks of every env) and fills the buffers; over ranks the
        learner first sends the others the epoch's weights and random stream, and at the end
        gathers their buffers (the class docstring)."""
        if self.ranks.size == 1:
            self._play_epoch()
            return
        self.ranks.deal(("epoch", self._orders()))
        self._play_share()

    @torch.inference_mode()
    def _play_epoch(self) -> None:
        c = self.config
        guerrilla_scale, coin_scale = c.shaping_scales(self.epoch)
        if c.mcts_iterations_from is not None:
            self.env.set_mcts_iterations(c.sparring_iterations(self.epoch))
        if self.rollout_net is not None:
            self.rollout_net.compile(self.policy)      # this epoch's weights
        self.buf_initial_state.copy_(self.state[:, self.trained_rows])
        for t in range(c.horizon):
            # The env's observations on the network's device (the same tensors on the CPU).
            all_obs, all_masks = self.obs.to(self.device), self.masks.to(self.device)
            # Current policy: one forward over all of its rows, both slots at once.  (index_select
            # and index_copy_ move the same bytes as indexing, several times faster on CPU.)
            rows = None if self.all_current else self.current_rows
            obs = all_obs if rows is None else all_obs.index_select(0, rows)
            mask = all_masks if rows is None else all_masks.index_select(0, rows)
            if self.rollout_net is not None:
                # A waiting slot's one legal move is the pass: it needs only its values.
                logits, values = self.rollout_net.step(self.policy, self.current_rows_int32, obs,
                                                       ~mask[:, PASS_ACTION])
            else:
                state = self.state if rows is None else self.state.index_select(1, rows)
                logits, values, state = self.policy.step(obs, state)
                if rows is None:
                    self.state = state
                else:
                    self.state.index_copy_(1, rows, state)
            if self.current_draws is None:
                actions, logprobs = sample_legal(logits, mask, self.draws)
            else:   # the run's uniforms, this rank's rows'
                uniforms = torch.rand(self.run_current, 1, generator=self.draws)
                actions, logprobs = draw_legal(logits, mask, uniforms[self.current_draws])
            if rows is None:
                self.actions.copy_(actions)
            else:
                self.actions[self.current_rows_cpu] = actions.to("cpu", torch.int32)
            pick = None if self.all_trained and rows is None else self.trained_in_current
            take = (lambda x: x) if pick is None else (lambda x: x.index_select(0, pick))
            if self.side_value:
                coin = self._coin_rows() if rows is None else self._coin_rows()[rows]
                values = side_values(logits[:, COIN_VALUE_ROW], values, coin)
                self.buf_coin[:, t] = take(coin)
            self.buf_obs[:, t] = take(obs)
            self.buf_masks[:, t] = take(mask)
            self.buf_actions[:, t] = take(actions)
            self.buf_logprobs[:, t] = take(logprobs)
            self.buf_values[:, t] = take(values)

            # Frozen opponents: one forward per snapshot in use.
            if self.pool is not None:
                for model, envs in self.pool.groups():
                    envs = torch.from_numpy(envs)
                    uniforms = torch.rand(len(envs), 1, generator=self.draws, device=self.device)
                    if self.ranks.size > 1:    # the group's uniforms, this rank's envs'
                        here = self.historical_rows[envs] >= 0
                        envs, uniforms = envs[here], uniforms[here]
                        if not len(envs):
                            continue
                    rows_h = self.historical_rows_device[envs.to(self.device)]
                    mask_h = all_masks.index_select(0, rows_h)
                    if self.rollout_net is not None:
                        logits, _ = self.rollout_net.step(model, rows_h.to(torch.int32),
                                                          all_obs.index_select(0, rows_h), ~mask_h[:, PASS_ACTION])
                    else:
                        logits, _, state = model.step(all_obs.index_select(0, rows_h), self.state.index_select(1, rows_h))
                        self.state.index_copy_(1, rows_h, state)
                    self.actions[self.historical_rows[envs]] = draw_legal(
                        logits, mask_h, uniforms)[0].to("cpu", torch.int32)

            self.env.step()
            self._tick += 1
            if self.ranks.size > 1:
                ended, records = self.env.game_ends()
                if len(ended):
                    self._ended.append((np.full(len(ended), self._tick), self.env_ids[ended], records))

            rewards = self.rewards.to(self.device).clamp(-1.0, 1.0)
            done = self.terminals.to(self.device, torch.float32)
            if (guerrilla_scale, coin_scale) != (1.0, 1.0):
                # The capture rewards are the positive rewards of the steps that end no game
                # (rules.md §6: the outcome replaces a last step's shaping; illegal moves give -1);
                # such a step's row still plays the side it played (no reset).
                scale = torch.where(self._coin_rows(), coin_scale, guerrilla_scale)
                rewards = torch.where((rewards > 0) & (done == 0), rewards * scale, rewards)
            if self.mobility_rewards is not None:   # after the scaling, which is the capture rewards' alone
                rewards = (rewards + self.mobility_rewards.to(self.device)).clamp(-1.0, 1.0)
            self.buf_rewards[:, t] = rewards.index_select(0, self.trained_rows)
            self.buf_terminals[:, t] = done.index_select(0, self.trained_rows)
            if t + 1 < c.horizon:
                self.buf_starts[:, t + 1] = self.buf_terminals[:, t] > 0
            # A finished game's rows start the next game from a zero state.
            self.state.mul_(1.0 - done.view(1, -1, 1))
            # An ended frozen-opponent game changes the pool only while an env awaits a new snapshot;
            # over ranks, those ticks share the run's ended games (the pool is the same on every rank).
            if self.pool is not None and self.pool.pending_swaps():
                ended = self.hist_ids_here[self.env.terminals[self.hist_envs_here, 0] != 0]
                if self.ranks.size > 1:
                    ended = np.sort(np.concatenate(self.ranks.share(ended)))
                if len(ended):
                    self.pool.episodes_ended(ended)

        # The value after the last step, for the segments' bootstrap.
        obs = self.obs.to(self.device)[self.trained_rows]
        if self.rollout_net is not None:
            logits, values = self.rollout_net.peek(self.policy, self.trained_rows.to(torch.int32), obs)
        else:
            logits, values, _ = self.policy.step(obs, self.state[:, self.trained_rows])
        coin = self._coin_rows()[self.trained_rows] if self.side_value else None
        self.buf_bootstrap.copy_(side_values(logits[:, COIN_VALUE_ROW], values, coin))
        self.global_step += c.steps_per_epoch

    # ---------------------------------------------------------------- update
    def update(self) -> dict[str, float]:
        """PPO epochs over prioritised minibatches of segments; returns the mean losses (the learner's
        part: over ranks, on the run's gathered segments)."""
        c, b = self.config, self._segments()
        lr = cosine_lr(c, self.epoch)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        segments, horizon = b.values.shape
        mb_segments = min(segments, c.minibatch_size // horizon)
        num_minibatches = max(1, round(c.replay_ratio * segments / mb_segments))
        beta = c.prio_beta0 + (1.0 - c.prio_beta0) * c.prio_alpha * self.epoch / c.total_epochs
        gae = dict(gamma=c.gamma, lam=c.gae_lambda, rho_clip=c.vtrace_rho_clip, c_clip=c.vtrace_c_clip)
        ratios = torch.ones_like(b.values)
        values = b.values.clone()      # refreshed with each minibatch's new values
        advantages = vtrace_gae(b.rewards, values, b.terminals, b.bootstrap, ratios, **gae)
        returns = advantages + values
        explained_variance = 1.0 - float((returns - values).var() / returns.var().clamp_min(1e-8))

        totals = dict.fromkeys(("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"), 0.0)
        self.policy.train()
        for _ in range(num_minibatches):
            priority = advantages.abs().sum(dim=1).pow(c.prio_alpha).nan_to_num(0.0, 0.0, 0.0)
            probs = (priority + 1e-6) / (priority.sum() + 1e-6)
            idx = torch.multinomial(probs, mb_segments, replacement=False, generator=self.draws)
            weights = (segments * probs[idx, None]).pow(-beta)

            mb_values = values[idx]
            mb_returns = advantages[idx] + mb_values
            mb_adv = advantages[idx]
            mb_adv = weights * (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)

            new_logprobs, entropies, new_values, pass_logits = policy_segments(
                self.policy, b.obs[idx], b.initial_state[:, idx], b.starts[idx],
                b.masks[idx], b.actions[idx], bfloat16=c.update_precision == "bfloat16")
            new_values = side_values(pass_logits, new_values, b.coin[idx] if self.side_value else None)
            entropy = entropies.mean()
            log_ratio = new_logprobs - b.logprobs[idx]
            ratio = log_ratio.exp()

            policy_loss = torch.max(-mb_adv * ratio,
                                    -mb_adv * ratio.clamp(1 - c.clip_coef, 1 + c.clip_coef)).mean()
            clipped_values = mb_values + (new_values - mb_values).clamp(-c.vf_clip_coef, c.vf_clip_coef)
            value_loss = 0.5 * torch.max((new_values - mb_returns) ** 2, (clipped_values - mb_returns) ** 2).mean()
            loss = policy_loss + c.vf_coef * value_loss - c.ent_coef * entropy

            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.policy.parameters(), c.max_grad_norm)
            self.optimizer.step()

            with torch.no_grad():
                ratios[idx] = ratio.detach()
                values[idx] = new_values.detach()
                # Advantages under the latest values and ratios (V-trace corrects the stale ones). A
                # segment's depend on its own row alone, so only the minibatch's rows change.
                advantages[idx] = vtrace_gae(b.rewards[idx], values[idx], b.terminals[idx],
                                             b.bootstrap[idx], ratios[idx], **gae)
                totals["policy_loss"] += float(policy_loss)
                totals["value_loss"] += float(value_loss)
                totals["entropy"] += float(entropy)
                totals["approx_kl"] += float(((ratio - 1) - log_ratio).mean())
                totals["clip_fraction"] += float(((ratio - 1).abs() > c.clip_coef).float().mean())
        self.policy.eval()
        self.epoch += 1
        out = {k: v / num_minibatches for k, v in totals.items()}
        out.update(explained_variance=explained_variance, learning_rate=lr)
        return out

    def _segments(self) -> SimpleNamespace:
        """The epoch's segments the update reads: this process's buffers, or over ranks the run's."""
        if self._batch is not None:
            return self._batch
        return SimpleNamespace(**{name: getattr(self, f"buf_{name}") for name in BUFFERS})

    # ---------------------------------------------------------------- over ranks
    def _orders(self) -> dict:
        """What the other ranks need for the next epoch: the weights, the random stream, the step,
        and the learner's checkpoint since the last epoch (its opponent pool took a snapshot)."""
        orders = {"weights": self.policy.state_dict(), "draws": self.draws.get_state(), "epoch": self.epoch,
                  "global_step": self.global_step, "snapshot": self._snapshot}
        self._snapshot = None
        return orders

    def _follow_orders(self, orders: dict) -> None:
        self.policy.load_state_dict(orders["weights"])
        self.draws.set_state(orders["draws"])
        self.epoch, self.global_step = orders["epoch"], orders["global_step"]
        if orders["snapshot"] is not None:   # the learner's on_checkpoint, with the same weights
            self.pool.add(orders["snapshot"], self.policy)
            self.pool.refresh()

    def follow(self) -> None:
        """Another rank's part of the run: the learner's orders until it says the run is over."""
        for kind, body in self.ranks.orders():
            if kind == "epoch":
                self._follow_orders(body)
                self._play_share()
            elif kind == "state":
                self.ranks.to_learner(self._share_of_state())
            elif kind == "load":
                self._load_share(body)

    def _play_share(self) -> None:
        """This rank's part of an epoch over ranks: its envs on its share of the cores, then the gather."""
        with torch_threads(self.workers):
            self._play_epoch()
        self._gather()

    def _gather(self) -> None:
        """Sends this rank's segments and ended games to the learner, which puts every rank's in the
        run's row and game order (its batch for the update, its games for pop_log)."""
        share = {"rows": self.trained_run_rows.numpy(), "ended": self._ended,
                 **{name: getattr(self, f"buf_{name}").numpy() for name in BUFFERS}}
        share["masks"] = np.packbits(share["masks"], axis=-1)       # 32 bytes a mask instead of 256
        self._ended = []
        shares = self.ranks.to_learner(share)
        if not self.ranks.learner:
            return
        rows = np.concatenate([part["rows"] for part in shares])
        order = np.argsort(rows)                 # the run's trained rows, ascending, from the shares' rows
        batch = {}
        for name, dim in BUFFERS.items():
            parts = [part[name] for part in shares]
            if name == "masks":
                parts = [np.unpackbits(part, axis=-1, count=self.masks.shape[1]).view(np.bool_) for part in parts]
            joined = np.concatenate(parts, axis=dim)
            batch[name] = torch.from_numpy(np.take(joined, order, axis=dim))
        self._batch = SimpleNamespace(**batch)
        self._ended = [games for part in shares for games in part["ended"]]

    def pop_log(self) -> dict[str, float]:
        if self.ranks.size == 1:
            return self.env.pop_log()
        # The games every rank ended, in the order one process logs them: by step, then by env.
        self.env.pop_log()                       # (this rank's own, in another order)
        if self._ended:
            ticks, envs, records = (np.concatenate(column) for column in zip(*self._ended))
            self.env.log_games(records[np.lexsort((envs, ticks))])
        self._ended = []
        return self.env.pop_log()

    # ---------------------------------------------------------------- driving (gcpipe.train.run)
    def on_checkpoint(self) -> None:
        """A checkpoint was written: the current policy joins the opponent pool, which redraws
        (over ranks, every rank's, with the next epoch's orders)."""
        if self.pool is not None:
            self.pool.add(self.global_step, self.policy)
            self.pool.refresh()
            self._snapshot = self.global_step

    def close(self) -> None:
        self.env.close()

    # ---------------------------------------------------------------- resume
    def state_dict(self) -> dict:
        """Everything a rerun continues from (the learner's; over ranks it gathers the others' envs
        and recurrent states, and the result is one process's)."""
        if self.ranks.size == 1:
            recurrent, env = self.state.clone(), self.env.get_state()
        else:
            self.ranks.deal(("state", None))
            shares = self.ranks.to_learner(self._share_of_state())
            env = self.env.join_states([share["env"] for share in shares], [share["envs"] for share in shares],
                                       self.config.num_envs)
            recurrent = self._join_recurrent(shares)
        return {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "generator": self.generator.get_state(), "draws": self.draws.get_state(), "epoch": self.epoch,
                "global_step": self.global_step, "recurrent_state": recurrent, "env": env,
                "pool": None if self.pool is None else self.pool.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Continues from a state_dict (of a run over any number of ranks: they are the same); over
        ranks the learner sends each other rank its share."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        shares = [self._share_of(state, rank) for rank in range(self.ranks.size)]
        self.ranks.deal_each([("load", share) for share in shares])
        self._load_share(shares[0])

    def _share_of(self, state: dict, rank: int) -> dict:
        """What rank `rank` continues from in a state_dict: the replicated parts and its envs'."""
        envs = rank_envs(self.config, rank, self.ranks.size)
        rows = env_rows(envs, self.env.num_slots)
        whole = self.ranks.size == 1
        return {"policy": state["policy"], "draws": state.get("draws", state["generator"]),  # (before devices: one)
                "epoch": state["epoch"], "global_step": state["global_step"], "pool": state["pool"],
                "recurrent_state": state["recurrent_state"] if whole else state["recurrent_state"][:, rows],
                "env": state["env"] if whole else self.env.share_of_state(state["env"], envs, self.config.num_envs)}

    def _load_share(self, share: dict) -> None:
        self.policy.load_state_dict(share["policy"])
        self.draws.set_state(share["draws"])
        self.epoch, self.global_step = share["epoch"], share["global_step"]
        self.state.copy_(share["recurrent_state"])      # (in place: it may be the C step's states)
        self.env.set_state(share["env"])
        if self.pool is not None:
            self.pool.load_state_dict(share["pool"])

    def _share_of_state(self) -> dict:
        return {"envs": self.env_ids, "env": self.env.get_state(), "recurrent_state": self.state.clone()}

    def _join_recurrent(self, shares: list[dict]) -> Tensor:
        """The run's recurrent states from the ranks' shares, laid out as one process's (the C
        step's [rows, L, H] memory under the [L, rows, H] view)."""
        slots, (layers, _, hidden) = self.env.num_slots, self.state.shape
        joined = torch.zeros(self.config.num_envs * slots, layers, hidden).permute(1, 0, 2)
        for share in shares:
            joined[:, env_rows(share["envs"], slots)] = share["recurrent_state"]
        return joined.clone()

