"""The periodic evaluation of training: the current policy (sampled, masked) against a built-in
bot, from one side, through the bot-mode VecEnv."""
from __future__ import annotations

import numpy as np
import torch

from gcpipe.engine.vecenv import VecEnv
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.train.ppo import masked_logits, sample_actions

GUERRILLA_SIDE, COIN_SIDE = 1, 2


@torch.inference_mode()
def win_rate(policy: MinGRUPolicy, *, side: int, games: int, seed: int, opponent: str = "greedy",
             max_episode_length: int = 256) -> float:
    """Fraction of `games` games (the first one of each of `games` envs) won by `policy` playing
    `side` (1 Guerrilla, 2 COIN).  The bot replies inside the env step, so the network steps on
    its own turns only."""
    env = VecEnv(games, selfplay=False, side=side, opponent=opponent, max_episode_length=max_episode_length,
                 seed=seed)
    try:
        env.reset()
        generator = torch.Generator().manual_seed(seed)
        obs = torch.from_numpy(env.observations).view(games, -1)
        masks = torch.from_numpy(env.action_masks).view(torch.bool).view(games, -1)
        state = policy.initial_state(games)
        won = np.full(games, -1, np.int8)      # -1 while the env's first game runs
        while (won < 0).any():
            logits, _, state = policy.step(obs, state)
            env.actions[:, 0] = sample_actions(masked_logits(logits, masks), generator)[0].numpy()
            env.step()
            ended = env.terminals[:, 0].astype(bool)
            first = ended & (won < 0)
            won[first] = env.rewards[first, 0] > 0
            state = state * torch.from_numpy(~ended).view(1, -1, 1)
        return float(won.mean())
    finally:
        env.close()
