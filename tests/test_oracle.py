"""The C engine against the pure-Python oracle (tests/oracle.py), action by action, over 1000
random games: legal actions (mask), observation bytes (terminal ones included), captures, the
training env's reward for them, winner and how the game ended."""
import random

import numpy as np

from gcpipe.engine import GUERRILLA as ENGINE_GUERRILLA, PASS_ACTION, Game, VecEnv
from oracle import COIN, GUERRILLA, OracleGame

GAMES = 1000


def shaping_reward(mover, captured):
    """rules.md §6: 0.05 per coin for Guerrilla, 0.03 per stone for COIN (in float32, as the env)."""
    return np.float32(captured) * np.float32(0.05 if mover == GUERRILLA else 0.03)


def test_engine_matches_the_oracle_over_random_games():
    chooser = random.Random(20261129)
    # The same games stepped in a training env: slot 0 plays Guerrilla, slot 1 COIN.
    env = VecEnv(1, side=ENGINE_GUERRILLA, seed=3)
    env.reset()
    plies = captures = chains = 0
    endings, terminal_bytes = {}, set()
    for game_index in range(GAMES):
        engine, oracle = Game(), OracleGame()
        assert env.observations[0, 0].tolist() == oracle.observation()
        while True:
            legal = oracle.legal_actions()
            assert engine.legal_actions() == legal, f"game {game_index}, ply {engine.plies}: legal actions"
            assert np.flatnonzero(engine.action_mask()).tolist() == legal
            assert engine.observation().tolist() == oracle.observation(), f"game {game_index}: observation"
            if oracle.winner:
                break
            # mostly uniform play, with a taste for captures so chains and clears happen often
            capturing = [a for a in legal if engine.clone().apply_action(a) > 0]
            action = chooser.choice(capturing if capturing and chooser.random() < 0.5 else legal)
            mover = oracle.to_move
            expected = oracle.apply(action)
            got = engine.apply_action(action)
            assert got == expected, f"game {game_index}, action {action}: captures"
            actor = 0 if mover == GUERRILLA else 1
            env.actions[0] = PASS_ACTION
            env.actions[0, actor] = action
            env.step()
            if oracle.winner:
                assert env.rewards[0].tolist() == ([1.0, -1.0] if oracle.winner == GUERRILLA else [-1.0, 1.0])
                assert env.terminals[0].tolist() == [1, 1]
            else:
                assert env.rewards[0, actor] == shaping_reward(mover, expected) and env.rewards[0, 1 - actor] == 0
                assert env.observations[0, 0].tolist() == oracle.observation()
            plies += 1
            captures += got
            chains += oracle.must_capture
        assert engine.is_terminal()
        assert engine.winner == {GUERRILLA: 0, COIN: 1}[oracle.winner]
        assert engine.end_reason == oracle.end_reason
        assert engine.stones_placed == oracle.stones_placed
        endings[oracle.end_reason] = endings.get(oracle.end_reason, 0) + 1
        terminal_bytes.add(tuple(oracle.observation()[114:118]))
    # the games exercised every way a legal game can end, and chains
    assert set(endings) == {"coins_cleared", "stones_exhausted", "stones_wiped", "stalemate"}, endings
    log = env.pop_log()     # the training env's log counts the same stalemates
    assert log["games"] == GAMES and log["stalemate_rate"] == endings["stalemate"] / GAMES
    assert chains > 100 and captures > 1000 and plies > 50 * GAMES
    # terminal positions with a Guerrilla turn ended after one and after two stones, and mid-chain
    assert {stones for _, _, _, stones in terminal_bytes} == {0, 1, 2}
    assert any(flag == 1 for flag, _, _, _ in terminal_bytes)
