"""The C engine against the pure-Python oracle (tests/oracle.py), action by action, over 2000
random games: legal actions (mask), observation bytes, captures and the shaping reward they
imply, winner and how the game ended."""
import random

import numpy as np

from gcpipe.engine import Game
from oracle import COIN, GUERRILLA, OracleGame

GAMES = 2000


def shaping_reward(mover, captured):
    """rules.md §6: 0.05 per coin for Guerrilla, 0.03 per stone for COIN, clipped to [-1, 1]."""
    return min(1.0, (0.05 if mover == GUERRILLA else 0.03) * captured)


def test_engine_matches_the_oracle_over_random_games():
    chooser = random.Random(20261129)
    plies = captures = chains = 0
    endings = {}
    for game_index in range(GAMES):
        engine, oracle = Game(), OracleGame()
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
            assert shaping_reward(mover, got) == shaping_reward(mover, expected)
            plies += 1
            captures += got
            chains += oracle.must_capture
        assert engine.is_terminal()
        assert engine.winner == {GUERRILLA: 0, COIN: 1}[oracle.winner]
        assert engine.end_reason == oracle.end_reason
        assert engine.stones_placed == oracle.stones_placed
        endings[oracle.end_reason] = endings.get(oracle.end_reason, 0) + 1
    # the games exercised every way a legal game can end, and chains
    assert set(endings) == {"coins_cleared", "stones_exhausted", "stones_wiped", "stalemate"}, endings
    assert chains > 100 and captures > 1000 and plies > 50 * GAMES
