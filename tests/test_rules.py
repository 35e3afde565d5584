"""Hand-built positions for every rule of rules.md §1-§5; each test fails if its rule is wrong."""
import copy

import numpy as np
import pytest

from gcpipe._engine import ffi, lib
from gcpipe.engine import COIN, GUERRILLA, MAX_GAME_LENGTH, TERMINAL_PLAYER, Game, GameBatch, IllegalActionError
from gcpipe.engine.bots import BotSpec, play_games
from gcpipe.errors import UserError
from oracle import park_miller


def pt(gx, gy):
    return gy * 7 + gx


def sq(x, y):
    return y * 8 + x


def g_action(first, k):  # k: 0 down, 1 right, 2 left, 3 up
    return first * 4 + k


def c_action(src, d):  # d: 0 up-left, 1 up-right, 2 down-left, 3 down-right
    return src * 4 + d


FAR_COIN = sq(7, 7)  # keeps a game running when a test captures other coins


def test_opening_has_168_actions_in_ascending_order():
    game = Game()
    legal = game.legal_actions()
    assert len(legal) == 168
    assert legal == sorted(legal) and legal[0] == 0
    assert game.current_player() == GUERRILLA
    # (3,2) (2,3) (4,3) (3,4) (5,4) (4,5): (4,5) is index 44, not 45 (rules.md §1, its correction)
    assert game.coins() == [19, 26, 28, 35, 37, 44]
    assert all((c % 8 + c // 8) % 2 == 1 for c in game.coins())
    # point (6,6) has no down or right neighbour: only left and up
    assert [a for a in legal if a // 4 == pt(6, 6)] == [g_action(pt(6, 6), 2), g_action(pt(6, 6), 3)]


def test_opening_observation_bytes():
    obs = Game().observation()
    assert obs.dtype == np.uint8 and obs.shape == (120,)
    assert obs[:49].sum() == 0
    assert [c for c in range(64) if obs[49 + c]] == [19, 26, 28, 35, 37, 44]
    assert list(obs[113:120]) == [1, 0, 0, 0, 0, 0, 0]


def test_stones_must_touch_the_group_after_the_first_turn():
    game = Game()
    game.apply_action(g_action(pt(0, 0), 1))  # stones a1, b1
    game.apply_action(game.legal_actions()[0])  # any coin move
    legal = game.legal_actions()
    firsts = {a // 4 for a in legal}
    assert firsts == {pt(2, 0), pt(0, 1), pt(1, 1)}
    # the second stone need not touch the group, only the first one
    assert g_action(pt(0, 1), 0) in legal  # a2 then a3


def test_interior_surround_needs_four_stones():
    coin = sq(3, 3)  # corners c3 d3 c4 d4 = points (2,2) (3,2) (2,3) (3,3)
    game = Game.from_position(stones=[pt(2, 2), pt(3, 2)], coins=[coin, FAR_COIN])
    captured = game.apply_action(g_action(pt(2, 3), 1))  # (2,3) then (3,3)
    assert captured == 1 and game.coins() == [FAR_COIN]
    assert game.current_player() == COIN and game.stones_placed == 4


def test_interior_coin_with_three_stones_survives():
    game = Game.from_position(stones=[pt(2, 2), pt(3, 2)], coins=[sq(3, 3), FAR_COIN])
    assert game.apply_action(g_action(pt(2, 3), 0)) == 0  # (2,3) then (2,4): (3,3) stays empty
    assert sq(3, 3) in game.coins()


def test_edge_square_needs_two_stones():
    coin = sq(0, 3)  # corners (0,2) and (0,3) only
    game = Game.from_position(coins=[coin, FAR_COIN], stones=[pt(1, 2)], stones_placed=1)
    assert game.apply_action(g_action(pt(0, 2), 0)) == 1
    assert game.coins() == [FAR_COIN]


def test_corner_square_needs_one_stone_and_last_coin_ends_before_second_stone():
    game = Game.from_position(coins=[sq(0, 0)], stones=[pt(1, 0)], stones_placed=1)
    game.apply_action(g_action(pt(0, 0), 0))  # first stone on (0,0) clears the board
    assert game.is_terminal() and game.winner == GUERRILLA and game.end_reason == "coins_cleared"
    assert game.stones_placed == 2 and game.stones() == [pt(0, 0), pt(1, 0)]  # second stone not placed
    assert game.returns() == [1.0, -1.0] and game.current_player() == TERMINAL_PLAYER


def test_one_stone_captures_several_coins_at_once():
    # point (0,0) is the only corner of square (0,0) and, with (1,0), a corner of square (1,0)
    game = Game.from_position(stones=[pt(1, 0)], coins=[sq(0, 0), sq(1, 0), FAR_COIN])
    assert game.apply_action(g_action(pt(0, 0), 0)) == 2  # (0,0) takes both; (0,1) takes nothing
    assert game.coins() == [FAR_COIN]
    # each placement is scanned: the second stone completes square (0,1) too
    game = Game.from_position(stones=[pt(1, 0)], coins=[sq(0, 0), sq(1, 0), sq(0, 1), FAR_COIN])
    assert game.apply_action(g_action(pt(0, 0), 0)) == 3


def test_coin_step_captures_the_crossed_stone_and_capture_is_optional():
    game = Game.from_position(stones=[pt(2, 2)], coins=[sq(2, 2), FAR_COIN], to_move=COIN)
    legal = game.legal_actions()
    assert c_action(sq(2, 2), 3) in legal and c_action(sq(2, 2), 0) in legal  # capture or not
    assert game.apply_action(c_action(sq(2, 2), 3)) == 1  # (2,2) -> (3,3) crosses point (2,2)
    assert game.stones() == [] and game.is_terminal()
    assert game.winner == COIN and game.end_reason == "stones_wiped"


def test_chain_capture_forces_the_same_coin():
    stones = [pt(2, 2), pt(3, 3), pt(0, 6)]  # (2,2)->(3,3) crosses (2,2); (3,3)->(4,4) crosses (3,3)
    game = Game.from_position(stones=stones, coins=[sq(2, 2), FAR_COIN], to_move=COIN)
    assert game.apply_action(c_action(sq(2, 2), 3)) == 1
    assert game.current_player() == COIN
    obs = game.observation()
    assert obs[114] == 1 and obs[115] == sq(3, 3) + 1
    assert game.legal_actions() == [c_action(sq(3, 3), 3)]  # only the capturing step of that coin
    assert game.action_mask().sum() == 1
    with pytest.raises(IllegalActionError):
        game.apply_action(c_action(FAR_COIN, 0))
    game.apply_action(c_action(sq(3, 3), 3))
    assert game.current_player() == GUERRILLA and game.observation()[114:116].tolist() == [0, 0]
    assert game.stones() == [pt(0, 6)]


def test_capture_steps_are_the_on_board_steps_over_a_stone_onto_a_free_square():
    """gc_coin_capture_steps (the chain's legal steps, a bit per direction) against the geometry of
    rules.md §1 and §3, on every square of 1,000 random boards with coins on both colours."""
    from gcpipe._engine import lib
    draw = np.random.default_rng(3)
    steps = [(-1, -1), (1, -1), (-1, 1), (1, 1)]  # d = 0 up-left, 1 up-right, 2 down-left, 3 down-right
    for _ in range(1000):
        stones, coins = (int(v) for v in draw.integers(0, 2**63, size=2, dtype=np.uint64))
        stones &= (1 << 49) - 1
        coins |= int(draw.integers(0, 2)) << 63
        for src in range(64):
            x, y, expected = src % 8, src // 8, 0
            for d, (dx, dy) in enumerate(steps):
                px, py = x - (dx < 0), y - (dy < 0)  # the corner shared with the destination
                if 0 <= x + dx < 8 and 0 <= y + dy < 8 and not coins >> (src + 8 * dy + dx) & 1 \
                        and stones >> pt(px, py) & 1:
                    expected |= 1 << d
            assert lib.gc_coin_capture_steps(stones, coins, src) == expected


def test_chain_that_wipes_all_stones_wins_mid_chain():
    game = Game.from_position(stones=[pt(2, 2), pt(3, 3)], coins=[sq(2, 2), FAR_COIN], to_move=COIN)
    game.apply_action(c_action(sq(2, 2), 3))
    game.apply_action(c_action(sq(3, 3), 3))
    assert game.winner == COIN and game.end_reason == "stones_wiped"
    # As in the reference, the ending capture leaves the chain as it was: flag set, previous square
    # (3,3), which the coin has just left.
    assert game.observation()[113:118].tolist() == [2, 1, sq(3, 3) + 1, 0, 0]
    assert Game.deserialize(game.serialize()) == game


def test_a_game_ended_mid_turn_keeps_the_turns_bytes():
    """rules.md §5 bytes 114-117 at a terminal state are what the reference leaves there."""
    # A capture that ends the game as the first of a turn: no chain to keep.
    game = Game.from_position(stones=[pt(2, 2)], coins=[sq(2, 2), FAR_COIN], to_move=COIN)
    game.apply_action(c_action(sq(2, 2), 3))
    assert game.observation()[113:118].tolist() == [2, 0, 0, 0, 0]
    # The Guerrilla's first stone clears the board: the point + 1 and one stone this turn.
    game = Game.from_position(coins=[sq(0, 0)], stones=[pt(1, 0)], stones_placed=1)
    game.apply_action(g_action(pt(0, 0), 0))
    assert game.winner == GUERRILLA and game.observation()[113:118].tolist() == [1, 0, 0, pt(0, 0) + 1, 1]
    assert Game.deserialize(game.serialize()) == game
    # The second stone does: its point + 1 and two stones (square (6,6) has corners (5,5), (6,5),
    # (5,6), (6,6); the action places (5,6), then (6,6)).
    game = Game.from_position(coins=[sq(6, 6)], stones=[pt(5, 5), pt(6, 5)], stones_placed=2)
    game.apply_action(g_action(pt(5, 6), 1))
    assert game.winner == GUERRILLA and game.observation()[113:118].tolist() == [1, 0, 0, pt(6, 6) + 1, 2]
    assert Game.deserialize(game.serialize()) == game


def test_sixty_sixth_stone_loses_unless_it_clears_the_board():
    stones = [pt(1, 0)]
    game = Game.from_position(stones=stones, coins=[sq(5, 5), FAR_COIN], stones_placed=64)
    game.apply_action(g_action(pt(2, 0), 1))
    assert game.winner == COIN and game.end_reason == "stones_exhausted" and game.stones_placed == 66
    # 65 placed: the first stone is the 66th and ends the game; the second is never placed
    game = Game.from_position(stones=stones, coins=[sq(5, 5), FAR_COIN], stones_placed=65)
    game.apply_action(g_action(pt(2, 0), 1))
    assert game.end_reason == "stones_exhausted" and game.stones() == [pt(1, 0), pt(2, 0)]
    # the 66th stone clearing the last coin wins for Guerrilla (priority over exhaustion)
    game = Game.from_position(stones=[pt(1, 0)], coins=[sq(0, 0)], stones_placed=65)
    game.apply_action(g_action(pt(0, 0), 0))
    assert game.winner == GUERRILLA and game.end_reason == "coins_cleared"


def test_guerrilla_without_legal_placement_loses():
    # every point is a stone but (0,0) and (6,6): both are placeable but have no empty neighbour
    stones = [g for g in range(49) if g not in (pt(0, 0), pt(6, 6))]
    assert Game.from_position(stones=stones, coins=[sq(0, 0)], stones_placed=47).legal_actions() == []
    game = Game.from_position(stones=stones, coins=[sq(0, 0)], stones_placed=47, to_move=COIN)
    assert game.legal_actions() == [c_action(sq(0, 0), 3)]  # crosses the empty point (0,0): no capture
    assert game.apply_action(c_action(sq(0, 0), 3)) == 0
    assert game.winner == COIN and game.end_reason == "stalemate"


def test_illegal_and_out_of_range_actions_leave_the_state_untouched():
    game = Game(7)
    before = game.serialize()
    for bad in (-1, 256, 10**9, 196, g_action(pt(6, 6), 0)):
        with pytest.raises(IllegalActionError):
            game.apply_action(bad)
    for bad in (1.5, "3", None, True):
        with pytest.raises(UserError):
            game.apply_action(bad)
    assert game.serialize() == before


def test_actions_after_the_end_are_rejected():
    game = Game.from_position(coins=[sq(0, 0)], stones=[pt(1, 0)], stones_placed=1)
    game.apply_action(g_action(pt(0, 0), 0))
    with pytest.raises(IllegalActionError, match="over"):
        game.apply_action(0)
    assert game.legal_actions() == [] and game.action_mask().sum() == 0


def test_serialize_round_trip_and_malformed_input():
    game = Game(99)
    for _ in range(10):
        game.apply_action(game.legal_actions()[len(game.legal_actions()) // 2])
    text = game.serialize()
    assert text.split()[0] == "gc2" and len(text.split()) == 13
    again = Game.deserialize(text)
    assert again == game and again.legal_actions() == game.legal_actions()
    assert again.observation().tolist() == game.observation().tolist() and again.rng_state == game.rng_state
    start = "gc2 0 80000 1 0 -1 0 0 0 0 1 0 0"
    assert Game.deserialize(start).coins() == [19]
    for bad, why in [("", "not a serialized game"), (42, "not a serialized game"),
                     ("gc1 0 80000 1 0 -1 0 0 0 0 1", "not a serialized game"),
                     ("gc2 zz 80000 1 0 -1 0 0 0 0 1 0 0", "malformed"),
                     ("gc2 0 80000 1 0 -1 300 0 0 0 1 0 0", "out of range"),
                     ("gc2 2000000000000 80000 1 0 -1 0 0 0 0 1 0 0", "out of range"),
                     ("gc2 0 80000 3 0 -1 0 0 0 0 1 0 0", "no valid side to move"),
                     ("gc2 0 80000 2 1 5 0 0 0 0 1 0 0", "inconsistent capture chain"),
                     ("gc2 0 80000 1 0 -1 0 0 2 0 1 0 0", "inconsistent result"),
                     ("gc2 1 80000 1 0 -1 1 1 0 0 1 1 1", "inconsistent unfinished Guerrilla turn")]:
        with pytest.raises(UserError, match=why):
            Game.deserialize(bad)


@pytest.mark.parametrize("duplicate", [Game.clone, copy.copy, copy.deepcopy])
def test_clone_is_independent(duplicate):
    game = Game(3)
    other = duplicate(game)
    assert other == game
    other.apply_action(other.legal_actions()[0])
    assert game.plies == 0 and other.plies == 1


def test_the_generator_is_rand_r_and_its_bounded_draw_the_remainder():
    """rules.md §8: gc_rand is BSD rand_r's step (the oracle's Schrage form) on the states where
    the engine's folded product could slip — 0, the modulus and its multiples, 2^32 - 1, states
    whose draw is the largest or 0 — and on random ones; gc_rand_below(n) is that draw mod n for
    every n of 1..256."""
    m = 2**31 - 1
    inverse = pow(16807, -1, m)
    top_draws = [(d * inverse) % m for d in (m - 1, m - 2, 1, 127773)]   # states drawing these
    edges = [0, 1, 2, 127772, 127773, 127774, m - 1, m, m + 1, 2 * m, 2 * m + 1, 2**31, 2**32 - 1]
    states = edges + top_draws + np.random.default_rng(8).integers(0, 2**32, 2000).tolist()
    state = ffi.new("uint32_t *")
    for s in states:
        state[0] = s
        assert (lib.gc_rand(state), state[0]) == (park_miller(s), park_miller(s)), s
    for n in range(1, 257):
        for s in edges + top_draws + states[-40:]:
            state[0] = s
            assert lib.gc_rand_below(state, n) == park_miller(s) % n, (s, n)
            assert state[0] == park_miller(s)


def test_a_batch_game_draws_from_its_own_generator():
    batch = GameBatch(2)
    batch.reset(0, 7)
    batch.reset(1, 5)
    assert batch.draw(1) == 16807 * 5      # rules.md §8: the next Park-Miller state
    assert batch.game(1).rng_state == 16807 * 5 and batch.game(0).rng_state == 7
    drawn = batch.game(1)
    drawn.rng_state = 5
    assert drawn == Game(5)     # the draw changed the generator only


def test_longest_random_games_stay_within_the_proven_bound():
    # Random play makes the longest games (long capture chains); the bound is a proof
    # (MAX_GAME_LENGTH's comment), this checks it against 100,000 games.
    results = play_games(BotSpec("random"), BotSpec("random"), np.arange(1, 100_001))
    assert results.plies.max() == 124 <= MAX_GAME_LENGTH


def test_move_notation_round_trips_every_opening_action():
    game = Game()
    for a in game.legal_actions():
        assert game.string_to_action(game.action_to_string(a)) == a
    assert game.action_to_string(0) == "a1-a2"
    with pytest.raises(UserError):
        game.string_to_action("h9 h8")
