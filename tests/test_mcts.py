"""The MCTS bot (rules.md §7), the bot dispatcher and the bot-vs-bot game runner.

The key oracle is `reference_mcts` below, written from the spec text in plain Python on top of
the Game API: the C search must pick the same move *and* leave the generator in the same state,
which pins the draw order (expansion draw, then rollout draws, per iteration)."""
import math
import random
import struct

import numpy as np
import pytest

from gcpipe._engine import ffi, lib
from gcpipe.engine import COIN, GUERRILLA, Game
from gcpipe.engine.bots import Bot, BotSpec, play_games
from gcpipe.errors import UserError
from gcpipe.match import game_seed
from gcpipe.players import parse_spec
from oracle import park_miller


def spec(text: str) -> BotSpec:
    """The engine bot of a short player spec ("mcts:64:0.7:random")."""
    player = parse_spec(text)
    return BotSpec(player.kind, **player.settings)


class Draws:
    def __init__(self, state: int):
        self.state = state

    def __call__(self) -> int:
        self.state = park_miller(self.state)
        return self.state


def greedy_pick(game: Game, legal: list[int], draw: Draws) -> int:
    scores = [lib.gc_action_captures(game._state, a) for a in legal]
    best = [a for a, s in zip(legal, scores) if s == max(scores)]
    return best[draw() % len(best)]


class Node:
    def __init__(self, move, parent, player_just_moved):
        self.move, self.parent, self.player_just_moved = move, parent, player_just_moved
        self.children = []          # list order: most recently expanded first
        self.visits, self.select_count, self.wins = 0, 1, 0.0


def reference_mcts(game: Game, iterations: int, c: float, rollout: str) -> int:
    """rules.md §7 step by step; advances game's generator like the engine must."""
    legal = game.legal_actions()
    if len(legal) <= 1:
        return legal[0] if legal else 0
    draw = Draws(game.rng_state)
    c = struct.unpack("f", struct.pack("f", c))[0]  # the reference's c is a float
    root = Node(None, None, None)
    for _ in range(iterations):
        sim, node = game.clone(), root
        while not sim.is_terminal() and len(node.children) == len(sim.legal_actions()):
            log_s = math.log(node.select_count)
            best, best_value = None, -math.inf
            for child in node.children:
                value = child.wins / child.visits + c * math.sqrt(log_s / child.visits)
                if value > best_value:
                    best, best_value = child, value
            node.select_count += 1
            node = best
            sim.apply_action(node.move)
        if not sim.is_terminal():
            tried = {child.move for child in node.children}
            untried = [a for a in sim.legal_actions() if a not in tried]
            action = untried[draw() % len(untried)]
            mover = sim.current_player()
            sim.apply_action(action)
            child = Node(action, node, mover)
            node.children.insert(0, child)
            node = child
        plies = 0
        while not sim.is_terminal():
            assert plies < 4096
            legal_now = sim.legal_actions()
            if rollout == "random":
                sim.apply_action(legal_now[draw() % len(legal_now)])
            else:
                sim.apply_action(greedy_pick(sim, legal_now, draw))
            plies += 1
        while node is not None:
            node.visits += 1
            if node.player_just_moved == sim.winner:
                node.wins += 1.0
            node = node.parent
    game.rng_state = draw.state
    best = None
    for child in root.children:
        if best is None or child.visits > best.visits:
            best = child
    return best.move


def c_mcts(game: Game, iterations: int, c: float = 0.7, rollout: str = "greedy", portable: bool = False) -> int:
    """The C search's move; `portable`: by the code for CPUs without pdep or AVX."""
    pool = ffi.gc(lib.gc_mcts_new(iterations + 1), lib.gc_mcts_free)
    lib.gc_mcts_set_portable(pool, portable)
    return lib.gc_mcts_choose(game._state, iterations, c, {"random": 0, "greedy": 1}[rollout], pool)


def position_after(seed: int, plies: int) -> Game:
    """The position reached by random play from `seed`."""
    game = Game(seed)
    bot = Bot(spec("random"))
    for _ in range(plies):
        game.apply_action(bot.choose(game))
    return game


POSITIONS = [(11, 0), (12, 6), (13, 15), (14, 24), (15, 9)]


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("seed,plies", POSITIONS)
@pytest.mark.parametrize("iterations,rollout", [(40, "random"), (260, "random"), (60, "greedy")])
def test_c_search_matches_the_reference_draw_for_draw(seed, plies, iterations, rollout, portable):
    position = position_after(seed, plies)
    assert not position.is_terminal()
    ours, theirs = position.clone(), position.clone()
    assert c_mcts(ours, iterations, 0.7, rollout, portable) == reference_mcts(theirs, iterations, 0.7, rollout)
    assert ours.rng_state == theirs.rng_state != position.rng_state
    assert ours == theirs   # the position itself is untouched


def test_reference_agreement_covers_deep_trees_and_coin_chains():
    # COIN to move in a capture chain with two continuations, and a small high-exploration search
    # in a late position where the tree goes many levels deep.
    chain = Game.from_position(stones=[8, 15, 30, 31], coins=[17, 40], to_move=COIN, chain_coin=17,
                               stones_placed=20, seed=99)
    assert len(chain.legal_actions()) >= 2
    for position, iterations, c in [(chain, 120, 0.7), (position_after(21, 40), 300, 2.0)]:
        if position.is_terminal():
            continue
        for portable in (False, True):
            ours, theirs = position.clone(), position.clone()
            assert c_mcts(ours, iterations, c, "random", portable) == reference_mcts(theirs, iterations, c, "random")
            assert ours.rng_state == theirs.rng_state


def test_single_legal_action_returns_it_without_a_draw():
    # COIN chain: the coin on square 9 (B2) can only capture the stone on point 0 (a1).
    game = Game.from_position(stones=[0, 30], coins=[9, 45], to_move=COIN, chain_coin=9,
                              stones_placed=10, seed=1234)
    assert game.legal_actions() == [36]
    before = game.rng_state
    assert c_mcts(game, 500) == 36
    assert Bot(spec("mcts:500")).choose(game) == 36
    assert game.rng_state == before


def test_finds_the_immediate_winning_capture():
    # The last coin, on square D4 (27), misses only the corners 23 and 24: placing both wins.
    game = Game.from_position(stones=[16, 17], coins=[27], to_move=GUERRILLA, stones_placed=30, seed=7)
    winning = {23 * 4 + 1, 24 * 4 + 2}
    for text in ("mcts:200", "mcts:200:0.7:random", "mcts:400:1.4:random"):
        action = Bot(spec(text)).choose(game.clone())
        assert action in winning
        after = game.clone()
        after.apply_action(action)
        assert after.winner == GUERRILLA


def test_search_is_deterministic_and_continues_the_generator():
    position = position_after(3, 10)
    a, b = position.clone(), position.clone()
    bot = Bot(spec("mcts:300"))
    assert bot.choose(a) == bot.choose(b)
    assert a.rng_state == b.rng_state
    # A second decision from the advanced generator differs in draws from the first one.
    first_rng = a.rng_state
    bot.choose(a)
    assert a.rng_state != first_rng


@pytest.mark.parametrize("pdep", [0, 1])
@pytest.mark.parametrize("rollout", [0, 1])
def test_rollout_policy_equals_the_bots_everywhere(rollout, pdep):
    """gc_rollout_pick (bitboard fast path, with and without BMI2) vs gc_bot_random /
    gc_bot_greedy over whole games."""
    if pdep and not lib.gc_rollout_pdep():
        pytest.skip("rollouts pick by pdep only on CPUs with AVX2 and a fast BMI2 pdep")
    reference_bot = lib.gc_bot_greedy if rollout else lib.gc_bot_random
    compared = 0
    for seed in range(1, 41):
        game = Game(seed * 7919)
        while not game.is_terminal():
            fast, slow = game.clone(), game.clone()
            action = lib.gc_rollout_pick(fast._state, rollout, pdep)
            assert action == reference_bot(slow._state)
            assert fast.rng_state == slow.rng_state
            game.rng_state = fast.rng_state
            game.apply_action(action)
            compared += 1
        # gc_rollout plays the same game in one call (its loop is compiled once per pick path).
        replay = Game(seed * 7919)
        assert lib.gc_rollout(replay._state, rollout, pdep) == game._state.winner
        assert replay == game
    assert compared > 1000


@pytest.mark.parametrize("pdep", [0, 1])
def test_the_rollouts_nth_action_is_the_index_th_legal_action_by_either_path(pdep):
    """gc_nth_action against the ascending legal list, at every index of every position of 40
    random games, by the walk and by BMI2's pdep (where this CPU runs it fast)."""
    if pdep and not lib.gc_rollout_pdep():
        pytest.skip("rollouts pick by pdep only on CPUs with AVX2 and a fast BMI2 pdep")
    masks, checked = ffi.new("uint64_t[4]"), 0
    for seed in range(1, 41):
        game, choice = Game(seed), random.Random(seed)
        while not game.is_terminal():
            legal = game.legal_actions()
            for d in range(4):
                masks[d] = sum(1 << (a >> 2) for a in legal if a & 3 == d)
            assert [lib.gc_nth_action(masks, i, pdep) for i in range(len(legal))] == legal
            checked += len(legal)
            game.apply_action(choice.choice(legal))
    assert checked > 10_000


def test_greedy_pick_handles_an_already_surrounded_coin():
    # Hand-built: the corner coin on A1 (square 0) is surrounded by the stone on a1 (point 0); the
    # Greedy score counts it for every action touching point 0.
    game = Game.from_position(stones=[0, 1], coins=[0, 36], to_move=GUERRILLA, stones_placed=2, seed=5)
    for seed in range(20):
        fast, slow = game.clone(), game.clone()
        fast.rng_state = slow.rng_state = seed + 1
        assert lib.gc_rollout_pick(fast._state, 1, 1) == lib.gc_bot_greedy(slow._state)
        assert fast.rng_state == slow.rng_state


@pytest.mark.parametrize("coins", [[18, 19, 20, 26], [18, 19, 20, 26, 27, 28], [18, 27]])
def test_greedy_pick_counts_past_three_captures(coins):
    # Hand-built: stones on every corner of squares 18-20 and 26-28 but points 16 and 17, which
    # only the actions 65 and 70 can fill, so each takes every coin there.  Coins on both square
    # colours let one action take four or six (a real game's coins keep to the dark squares).
    stones = [8, 9, 10, 11, 15, 18, 22, 23, 24, 25]
    game = Game.from_position(stones=stones, coins=coins, to_move=GUERRILLA)
    for seed in range(1, 21):
        fast, slow = game.clone(), game.clone()
        fast.rng_state = slow.rng_state = seed
        action = lib.gc_rollout_pick(fast._state, 1, 1)
        assert action == lib.gc_bot_greedy(slow._state) and action in (65, 70)
        assert fast.rng_state == slow.rng_state


def test_dispatch_matches_each_bot():
    position = position_after(8, 12)
    for text, direct in [("random", lib.gc_bot_random), ("greedy", lib.gc_bot_greedy)]:
        a, b = position.clone(), position.clone()
        assert Bot(spec(text)).choose(a) == direct(b._state)
        assert a.rng_state == b.rng_state
    a, b = position.clone(), position.clone()
    assert Bot(spec("mcts:100:0.7:random")).choose(a) == c_mcts(b, 100, 0.7, "random")
    assert a.rng_state == b.rng_state


def test_bot_refuses_a_finished_game():
    game = Game.from_position(stones=[16, 17], coins=[27], to_move=GUERRILLA, stones_placed=30)
    game.apply_action(23 * 4 + 1)
    assert game.is_terminal()
    for text in ("random", "greedy", "mcts:10"):
        with pytest.raises(UserError, match="game is over"):
            Bot(spec(text)).choose(game)


def test_engine_rejects_a_search_larger_than_its_pool():
    pool = ffi.gc(lib.gc_mcts_new(100), lib.gc_mcts_free)
    game = Game(1)
    assert lib.gc_mcts_choose(game._state, 100, 0.7, 1, pool) == -2      # needs 101 nodes
    assert lib.gc_mcts_choose(game._state, 0, 0.7, 1, pool) == -2
    assert lib.gc_mcts_choose(game._state, 10, 0.7, 7, pool) == -2
    assert game.rng_state == 1
    bot = ffi.new("gc_bot *", {"kind": 2, "iterations": 10, "exploration": 0.7, "rollout": 1})
    assert lib.gc_bot_choose(game._state, bot, ffi.NULL) == -2


def test_runner_replays_the_same_games_as_python_stepping():
    seeds = [game_seed(3, 1, g) for g in range(3)]
    results = play_games(spec("mcts:64:0.7:random"), spec("greedy"), seeds)
    for i, seed in enumerate(seeds):
        game, bots = Game(seed), (Bot(spec("mcts:64:0.7:random")), Bot(spec("greedy")))
        while not game.is_terminal():
            game.apply_action(bots[game.current_player()].choose(game))
        assert (results.winners[i], results.plies[i]) == (game.winner, game.plies)
        assert results.end_reason_names()[i] == game.end_reason
    again = play_games(spec("mcts:64:0.7:random"), spec("greedy"), seeds)
    assert np.array_equal(again.winners, results.winners) and np.array_equal(again.plies, results.plies)


def test_runner_ply_cap_declares_coin_the_winner():
    results = play_games(spec("random"), spec("random"), [game_seed(0, 0, g) for g in range(5)], ply_cap=4)
    assert list(results.winners) == [COIN] * 5
    assert list(results.plies) == [4] * 5
    assert results.end_reason_names() == ["ply_cap"] * 5


def test_runner_random_and_greedy_cells_are_its_bots_games():
    # The runner plays exactly the games that the bots, stepped one by one, play.
    for guerrilla, coin, a, b in [("random", "random", 0, 0), ("greedy", "random", 1, 0)]:
        seeds = [game_seed(a, b, g) for g in range(20)]
        results = play_games(spec(guerrilla), spec(coin), seeds)
        for i, seed in enumerate(seeds):
            game, bots = Game(seed), (Bot(spec(guerrilla)), Bot(spec(coin)))
            while not game.is_terminal():
                game.apply_action(bots[game.current_player()].choose(game))
            assert (results.winners[i], results.plies[i]) == (game.winner, game.plies)


@pytest.mark.parametrize("text,expected", [
    ("random", BotSpec("random")),
    ("greedy", BotSpec("greedy")),
    ("mcts", BotSpec("mcts", 256, 0.7, "greedy")),
    ("mcts:2000", BotSpec("mcts", 2000, 0.7, "greedy")),
    ("mcts:2000:1.5", BotSpec("mcts", 2000, 1.5, "greedy")),
    ("mcts:2000:0.7:random", BotSpec("mcts", 2000, 0.7, "random")),
    ("mcts:10::random", BotSpec("mcts", 10, 0.7, "random")),
])
def test_short_specs_give_the_engine_bots(text, expected):
    assert spec(text) == expected


def test_play_games_rejects_bad_seeds():
    with pytest.raises(UserError, match="seeds"):
        play_games(spec("random"), spec("random"), [-1])
    with pytest.raises(UserError, match="seeds"):
        play_games(spec("random"), spec("random"), [0.5])
