"""The batched training environment (rules.md §4.4, §5, §6) against scripted games and a
Python reference that steps `Game` objects with the same semantics."""
import math

import numpy as np
import pytest

from gcpipe.engine import COIN as C, GUERRILLA as G, NO_SIDE, Game, VecEnv
from gcpipe.engine.bots import Bot, BotSpec, kinds_by_side
from gcpipe.errors import UserError
from oracle import park_miller

OBS_G, OBS_C = 1, 2  # the side to move in observation byte 113 (rules.md §5)
PASS = 255
U64 = (1 << 64) - 1
START_LEGAL = 168
LOG_FIELDS = ["games", "episode_return", "episode_length", "invalid_rate", "stalemate_rate",
              "games_as_guerrilla", "wins_as_guerrilla", "games_as_coin", "wins_as_coin",
              "slot_0_score", "slot_1_score", "slot_0_score_as_guerrilla", "slot_0_score_as_coin",
              "hist_score", "hist_n",
              *(f"hist_{what}_bank_{i}" for i in range(8) for what in ("score", "n")), "bot_score", "bot_n"]


def splitmix64(state: int) -> tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & U64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & U64
    return state, z ^ (z >> 31)


def first_draw(seed: int, index: int) -> int:
    return splitmix64(((seed << 32) + index) & U64)[1]


class RefEnv:
    """One env of the batch, stepped through `Game` (the rules core's own mask and observation)."""

    def __init__(self, index, seed, *, selfplay, side, max_len, slot1_bots=None):
        self.rng = ((seed << 32) + index) & U64
        self.selfplay, self.side, self.max_len = selfplay, side, max_len
        self.slot1_bots = slot1_bots  # self-play: the Bot of each side (G, C) for slot 1 (opponent tag < 0)
        self.start()

    def start(self):
        self.rng, draw = splitmix64(self.rng)
        self.game = Game(draw & 0xFFFFFFFF)
        self.side0 = self.side if self.side is not None else (C if draw >> 32 & 1 else G)
        self.tick = 0
        if not self.selfplay:
            self.bot_replies()

    def to_move(self):
        return self.game.current_player()

    def bot_replies(self):  # the random bot: legal[rand() % n] from the game's generator
        while not self.game.is_terminal() and self.to_move() != self.side0:
            legal = self.game.legal_actions()
            self.game.rng_state = park_miller(self.game.rng_state)
            self.game.apply_action(legal[self.game.rng_state % len(legal)])

    def step(self, row):
        slots = 2 if self.selfplay else 1
        rewards, terminals = [np.float32(0)] * slots, [0] * slots
        actor_side = self.to_move()
        actor = 0 if actor_side == self.side0 else 1
        action = self.slot1_bots[actor_side].choose(self.game) if actor == 1 and self.slot1_bots else int(row[actor])
        self.tick += 1
        if action in self.game.legal_actions():
            captured = self.game.apply_action(action)
            per_piece = np.float32(0.05) if actor_side == G else np.float32(0.03)
            rewards[actor] = min(np.float32(captured) * per_piece, np.float32(1))
            if not self.selfplay:
                self.bot_replies()
        else:
            rewards[actor] = np.float32(-1)
        winner = self.game.winner
        if self.tick >= self.max_len and (winner is None or self.game.end_reason == "stalemate"):
            winner = C
        if winner is not None:
            rewards[0] = np.float32(1 if winner == self.side0 else -1)
            if slots == 2:
                rewards[1] = -rewards[0]
            terminals = [1] * slots
            self.start()
        return rewards, terminals

    def view(self):
        obs, mask = self.game.observation(), self.game.action_mask()
        if not self.selfplay:
            return [obs], [mask], [self.side0]
        pass_only = np.zeros(256, np.uint8)
        pass_only[PASS] = 1
        actor = 0 if self.to_move() == self.side0 else 1
        masks = [mask, pass_only] if actor == 0 else [pass_only, mask]
        return [obs, obs], masks, [self.side0, 1 - self.side0]


def random_actions(env: VecEnv, rng: np.random.Generator) -> np.ndarray:
    """Mostly legal actions from the masks, with illegal, out-of-range and pass actions mixed in."""
    actions = np.empty(env.actions.shape, np.int64)
    for i in range(env.num_envs):
        for s in range(env.num_slots):
            u = rng.random()
            if u < 0.8:
                actions[i, s] = rng.choice(np.flatnonzero(env.action_masks[i, s]))
            elif u < 0.9:
                actions[i, s] = rng.integers(0, 256)
            elif u < 0.95:
                actions[i, s] = rng.choice([-1, 256, 10**6, -(2**31)])
            else:
                actions[i, s] = PASS
    return actions


def assert_matches_reference(env: VecEnv, refs: list[RefEnv]):
    for i, ref in enumerate(refs):
        obs, masks, sides = ref.view()
        for s in range(env.num_slots):
            np.testing.assert_array_equal(env.observations[i, s], obs[s])
            np.testing.assert_array_equal(env.action_masks[i, s], masks[s])
        assert list(env.slot_sides[i]) == sides


@pytest.mark.parametrize("selfplay,side,max_len", [(True, None, 256), (True, G, 24), (True, C, 40),
                                                   (False, G, 30), (False, C, 256), (False, None, 50)])
def test_matches_python_reference_on_random_action_streams(selfplay, side, max_len):
    n, seed = 6, 12345
    env = VecEnv(n, selfplay=selfplay, side=side, opponent="random", max_episode_length=max_len, seed=seed)
    env.reset()
    refs = [RefEnv(i, seed, selfplay=selfplay, side=side, max_len=max_len) for i in range(n)]
    assert_matches_reference(env, refs)
    rng = np.random.default_rng(7)
    terminals_seen = 0
    for _ in range(300):
        actions = random_actions(env, rng)
        env.step(actions)
        for i, ref in enumerate(refs):
            rewards, terminals = ref.step(actions[i])
            assert list(env.rewards[i]) == rewards
            assert list(env.terminals[i]) == terminals
            terminals_seen += terminals[0]
        assert_matches_reference(env, refs)
    assert terminals_seen > 0


@pytest.mark.parametrize("opponent", ["random", "greedy", {"guerrilla": "greedy", "coin": "random"},
                                      {"guerrilla": "random", "coin": "greedy"}])
def test_selfplay_envs_tagged_negative_play_slot_1_with_the_bot(opponent):
    """The bot of slot 1's side moves for it: one kind for both sides, or one per side."""
    n, seed = 6, 99
    env = VecEnv(n, opponent=opponent, seed=seed)
    env.reset()
    env.opponent_tags[3:] = -1
    guerrilla_bot, coin_bot = kinds_by_side(opponent)
    bots = {G: Bot(BotSpec(guerrilla_bot)), C: Bot(BotSpec(coin_bot))}
    refs = [RefEnv(i, seed, selfplay=True, side=None, max_len=256, slot1_bots=bots if i >= 3 else None)
            for i in range(n)]
    rng = np.random.default_rng(3)
    games = bot_games = 0
    for _ in range(400):
        actions = random_actions(env, rng)
        actions[3:, 1] = 0                     # ignored: the bot moves for slot 1 there
        env.step(actions)
        for i, ref in enumerate(refs):
            rewards, terminals = ref.step(actions[i])
            assert list(env.rewards[i]) == rewards and list(env.terminals[i]) == terminals
            games += terminals[0]
            bot_games += terminals[0] * (i >= 3)
        assert_matches_reference(env, refs)
    log = env.pop_log()
    assert bot_games > 3 and (log["games"], log["bot_n"], log["hist_n"]) == (games, bot_games, 0)


def test_waiting_slot_may_only_pass_and_actor_gets_the_legal_mask():
    env = VecEnv(16, seed=3)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(40):
        for i in range(16):
            to_move = G if env.observations[i, 0, 113] == OBS_G else C
            actor = 0 if env.slot_sides[i, 0] == to_move else 1
            waiting = env.action_masks[i, 1 - actor]
            assert waiting.sum() == 1 and waiting[PASS] == 1
            assert env.action_masks[i, actor, PASS] == 0 and env.action_masks[i, actor].sum() > 0
            np.testing.assert_array_equal(env.observations[i, 0], env.observations[i, 1])
        env.step(random_actions(env, rng))


def test_sides_per_slot():
    for side, expected in ((G, [G, C]), (C, [C, G])):
        env = VecEnv(8, side=side, seed=5)
        env.reset()
        assert (env.slot_sides == expected).all()
        actor = 0 if side == G else 1          # Guerrilla moves first
        assert (env.action_masks[:, actor].sum(axis=1) == START_LEGAL).all()
        assert (env.action_masks[:, 1 - actor].sum(axis=1) == 1).all()
    env = VecEnv(64, side=None, seed=9)
    env.reset()
    expected = [C if first_draw(9, i) >> 32 & 1 else G for i in range(64)]
    assert list(env.slot_sides[:, 0]) == expected
    assert set(expected) == {G, C}
    assert (env.slot_sides.sum(axis=1) == G + C).all()


def test_sides_per_env_fix_theirs_and_leave_the_rest_to_the_draw():
    """Envs 0-3 always Guerrilla, 4-7 always COIN over many games; the NO_SIDE envs play exactly
    the games of side=None (the draw is taken either way)."""
    sides = [G] * 4 + [C] * 4 + [NO_SIDE] * 24
    fixed, drawn = VecEnv(32, side=sides, seed=9, max_episode_length=12), VecEnv(32, side=None, seed=9, max_episode_length=12)
    fixed.reset()
    drawn.reset()
    rng = np.random.default_rng(1)
    games = 0
    for _ in range(60):
        assert (fixed.slot_sides[:4, 0] == G).all() and (fixed.slot_sides[4:8, 0] == C).all()
        np.testing.assert_array_equal(fixed.slot_sides[8:], drawn.slot_sides[8:])
        np.testing.assert_array_equal(fixed.observations[8:], drawn.observations[8:])
        actions = random_actions(fixed, rng)
        fixed.step(actions)
        drawn.step(actions)
        games += fixed.terminals[:8, 0].sum()
    assert games >= 16                       # every fixed env started new games


@pytest.mark.parametrize("sides", [[G] * 7, [G] * 7 + [2], [None] * 8])
def test_bad_sides_per_env_are_user_errors(sides):
    with pytest.raises(UserError, match=r"^per-env sides must be 8 values, each NO_SIDE \(-1\), GUERRILLA \(0\) or COIN \(1\)$"):
        VecEnv(8, side=sides)


def test_illegal_action_is_a_penalised_no_op():
    env = VecEnv(1, side=G, seed=0)
    env.reset()
    obs, mask = env.observations.copy(), env.action_masks.copy()
    for bad in (PASS, 300, -7):              # pass, out of range above and below
        env.step(np.array([[bad, PASS]]))
        assert list(env.rewards[0]) == [-1.0, 0.0]
        assert list(env.terminals[0]) == [0, 0]
        np.testing.assert_array_equal(env.observations, obs)
        np.testing.assert_array_equal(env.action_masks, mask)
    log = env.pop_log()
    assert log["games"] == 0 and math.isnan(log["slot_0_score"])


def test_timeout_counts_illegal_steps_and_coin_wins():
    env = VecEnv(1, side=G, max_episode_length=3, seed=0)   # slot 0 = Guerrilla
    env.reset()
    env.step(np.array([[PASS, PASS]]))
    env.step(np.array([[PASS, PASS]]))
    assert list(env.terminals[0]) == [0, 0]
    env.step(np.array([[PASS, PASS]]))
    assert list(env.rewards[0]) == [-1.0, 1.0]
    assert list(env.terminals[0]) == [1, 1]


def test_terminal_reward_replaces_the_illegal_penalty():
    env = VecEnv(1, side=C, max_episode_length=2, seed=0)   # slot 0 = COIN, slot 1 opens
    env.reset()
    env.step(np.array([[PASS, 0]]))
    assert list(env.rewards[0]) == [0.0, 0.0]
    env.step(np.array([[PASS, PASS]]))     # COIN's illegal move hits the timeout: COIN wins
    assert list(env.rewards[0]) == [1.0, -1.0]
    assert list(env.terminals[0]) == [1, 1]


def capture_script(actor_side):
    """A legal game prefix ending with a capture by `actor_side`; returns (actions, captured)."""
    rng = np.random.default_rng(11)
    while True:
        game, actions = Game(1), []
        while not game.is_terminal():
            side = game.current_player()
            action = int(rng.choice(game.legal_actions()))
            captured = game.apply_action(action)
            actions.append(action)
            if captured and side == actor_side and not game.is_terminal():
                return actions, captured


@pytest.mark.parametrize("side", [G, C])
def test_capture_shaping(side):
    actions, last_captured = capture_script(side)
    env = VecEnv(1, side=side, seed=0)
    env.reset()
    game = Game(0)
    for action in actions:
        actor_side = game.current_player()
        actor = 0 if actor_side == side else 1
        row = [PASS, PASS]
        row[actor] = action
        env.step(np.array([row]))
        captured = game.apply_action(action)
        expected = [0.0, 0.0]
        expected[actor] = float(np.float32(captured) * np.float32(0.05 if actor_side == G else 0.03))
        assert list(env.rewards[0]) == expected
    assert last_captured >= 1 and env.rewards[0, 0] == np.float32(last_captured) * np.float32(
        0.05 if side == G else 0.03)


def test_coin_mobility_reward_pays_the_fall_in_the_guerrillas_legal_actions():
    # Random legal self-play in 8 envs, against a reference read from the buffers: where a COIN move
    # hands the turn to the Guerrilla and the game goes on, the COIN's slot gets m * (the Guerrilla's
    # legal actions at its previous such turn - now), nothing at the first; 0 everywhere else.
    m = 0.25
    env = VecEnv(8, seed=3, max_episode_length=50, coin_mobility_reward=m)
    plain = VecEnv(8, seed=3, max_episode_length=50)
    env.reset()
    plain.reset()
    previous = [None] * 8
    paid = fell = 0
    for _ in range(400):
        sides = env.slot_sides.copy()
        actors = np.argmin(env.action_masks[:, :, PASS], axis=1)     # the waiting slot may only pass
        env.random_actions()
        plain.actions[:] = env.actions
        env.step()
        plain.step()
        # The reward changes no game: every other buffer is the plain env's.
        for a, b in [(env.observations, plain.observations), (env.rewards, plain.rewards),
                     (env.terminals, plain.terminals)]:
            np.testing.assert_array_equal(a, b)
        expected = np.zeros((8, 2), np.float32)
        for i in range(8):
            actor = actors[i]
            if env.terminals[i, 0]:
                previous[i] = None
            elif sides[i, actor] == C and env.observations[i, 0, 113] == OBS_G:
                now = int(env.action_masks[i, 1 - actor].sum())
                if previous[i] is not None:
                    expected[i, actor] = np.float32(m) * np.float32(previous[i] - now)
                    paid += 1
                    fell += now < previous[i]
                previous[i] = now
        np.testing.assert_array_equal(env.mobility_rewards, expected)
    assert plain.mobility_rewards is None
    assert paid > 100 and 0 < fell < paid


def test_auto_reset_keeps_the_finished_games_reward():
    env = VecEnv(2, side=G, max_episode_length=1, seed=4)
    env.reset()
    start_obs, start_mask = env.observations.copy(), env.action_masks.copy()
    env.step(np.array([[0, PASS], [PASS, PASS]]))      # env 0 legal, env 1 illegal; both time out
    assert (env.terminals == 1).all()
    assert (env.rewards == [[-1.0, 1.0], [-1.0, 1.0]]).all()
    # The returned view is the next game's first position: the start again.
    np.testing.assert_array_equal(env.observations, start_obs)
    np.testing.assert_array_equal(env.action_masks, start_mask)
    env.step(np.array([[PASS, PASS], [PASS, PASS]]))   # the new games also last one tick
    assert (env.terminals == 1).all()


def test_bot_mode_coin_agent_sees_the_bots_opening():
    env = VecEnv(4, selfplay=False, side=C, opponent="random", seed=21)
    env.reset()
    assert env.num_slots == 1 and env.observations.shape == (4, 1, 120)
    for i in range(4):
        game = Game(first_draw(21, i) & 0xFFFFFFFF)
        game.rng_state = park_miller(game.rng_state)
        opening = game.legal_actions()[game.rng_state % START_LEGAL]
        game.apply_action(opening)
        obs = env.observations[i, 0]
        assert obs[113] == OBS_C and obs[118] == 2 and obs[119] == 2
        np.testing.assert_array_equal(obs, game.observation())
        np.testing.assert_array_equal(env.action_masks[i, 0], game.action_mask())
    assert (env.slot_sides == C).all()


@pytest.mark.parametrize("opponent", ["greedy", "mcts"])
def test_bot_mode_returns_to_the_agent(opponent):
    env = VecEnv(3, selfplay=False, side=G, opponent=opponent, mcts_iterations=16, seed=2)
    env.reset()
    rng = np.random.default_rng(1)
    games = 0
    for _ in range(60):
        assert (env.observations[:, 0, 113] == OBS_G).all()
        actions = np.array([[rng.choice(np.flatnonzero(env.action_masks[i, 0]))] for i in range(3)])
        env.step(actions)
        assert set(env.rewards[:, 0][env.terminals[:, 0] == 1]) <= {-1.0, 1.0}
        games += int(env.terminals.sum())
    log = env.pop_log()
    assert log["games"] == games > 0
    assert log["games_as_guerrilla"] == games and log["games_as_coin"] == 0
    assert log["invalid_rate"] == 0.0


def test_log_fields_on_scripted_games():
    env = VecEnv(2, side=G, max_episode_length=2, seed=0)   # slot 0 = Guerrilla
    env.reset()
    env.opponent_tags[:] = [0, 3]                          # env 1 plays frozen bank 2
    env.step(np.array([[PASS, PASS], [0, PASS]]))           # env 0 illegal, env 1 legal
    env.step(np.array([[PASS, PASS], [PASS, PASS]]))       # env 0 Guerrilla illegal again; env 1 COIN illegal
    assert (env.terminals == 1).all()                       # both time out: COIN (slot 1) wins
    log = env.pop_log()
    assert log["games"] == 2 and log["slot_0_score"] == 0.0
    assert log["episode_return"] == pytest.approx((-2.0 + -1.0) / 2)  # env 0: -1 then -1; env 1: 0 then -1
    assert log["episode_length"] == 2.0
    assert log["invalid_rate"] == pytest.approx((1.0 + 0.5) / 2)
    assert log["stalemate_rate"] == 0.0                     # time-outs, not stalemates
    assert (log["games_as_guerrilla"], log["wins_as_guerrilla"], log["games_as_coin"], log["wins_as_coin"]) \
        == (2, 0, 0, 0)
    assert log["slot_0_score"] == 0.0 and log["slot_1_score"] == 1.0
    assert log["slot_0_score_as_guerrilla"] == 0.0 and math.isnan(log["slot_0_score_as_coin"])
    assert log["hist_n"] == 1 and log["hist_score"] == 0.0
    assert log["hist_n_bank_2"] == 1 and log["hist_score_bank_2"] == 0.0
    assert all(log[f"hist_n_bank_{i}"] == 0 for i in range(8) if i != 2)
    assert log["bot_n"] == 0 and math.isnan(log["bot_score"])
    assert list(log) == LOG_FIELDS

    env = VecEnv(1, side=C, max_episode_length=2, seed=0)   # slot 0 = COIN, wins by timeout
    env.reset()
    env.step(np.array([[PASS, 0]]))
    env.step(np.array([[PASS, PASS]]))
    log = env.pop_log()
    assert (log["games"], log["slot_0_score"], log["episode_return"], log["invalid_rate"]) == (1, 1.0, 1.0, 0.5)
    assert (log["games_as_coin"], log["wins_as_coin"], log["slot_0_score_as_coin"]) == (1, 1, 1.0)
    assert log["hist_n"] == 0 and math.isnan(log["hist_score"])
    assert env.pop_log()["games"] == 0


def run_stream(seed, steps=120):
    env = VecEnv(8, seed=seed, max_episode_length=64)
    env.reset()
    rng = np.random.default_rng(99)
    frames = []
    for _ in range(steps):
        env.step(random_actions(env, rng))
        frames.append(b"".join(a.tobytes() for a in (env.observations, env.action_masks, env.rewards,
                                                     env.terminals, env.slot_sides)))
    return frames, env.pop_log()


def test_same_seed_same_buffers():
    first, log_a = run_stream(17)
    second, log_b = run_stream(17)
    assert first == second and log_a == log_b
    other, _ = run_stream(18)
    assert other != first


def test_reset_restarts_the_generators():
    env = VecEnv(4, side=None, seed=8)
    env.reset()
    obs, sides = env.observations.copy(), env.slot_sides.copy()
    env.step(random_actions(env, np.random.default_rng(0)))
    env.reset()
    np.testing.assert_array_equal(env.observations, obs)
    np.testing.assert_array_equal(env.slot_sides, sides)


@pytest.mark.parametrize("kwargs,message", [
    ({"num_envs": 0}, "num_envs"),
    ({"num_envs": 2, "opponent": "alphazero"}, "unknown opponent"),
    ({"num_envs": 2, "opponent": {"guerrilla": "greedy", "coin": "alphazero"}}, "unknown opponent 'alphazero'"),
    ({"num_envs": 2, "opponent": {"guerrilla": "greedy"}}, "mapping with keys guerrilla and coin"),
    ({"num_envs": 2, "opponent": {"guerrilla": "greedy", "coin": "mcts"}, "mcts_iterations": 0}, "mcts_iterations"),
    ({"num_envs": 2, "side": 3}, "side"),
    ({"num_envs": 2, "max_episode_length": 0}, "max_episode_length"),
    ({"num_envs": 2, "selfplay": False, "opponent": "mcts", "mcts_iterations": 0}, "mcts_iterations"),
    ({"num_envs": 2, "selfplay": False, "opponent": "mcts", "mcts_rollout": "smart"}, "mcts_rollout"),
    ({"num_envs": 2, "seed": -1}, "seed"),
    ({"num_envs": 2, "coin_mobility_reward": -0.1}, "coin_mobility_reward must be a finite number >= 0"),
    ({"num_envs": 2, "coin_mobility_reward": math.nan}, "coin_mobility_reward"),
    ({"num_envs": 2, "coin_mobility_reward": True}, "coin_mobility_reward must be a finite number >= 0, got True"),
    ({"num_envs": 2, "opponent": "mcts", "mcts_exploration": math.inf}, "mcts_exploration must be a finite number"),
])
def test_bad_configuration_is_a_user_error(kwargs, message):
    with pytest.raises(UserError, match=message):
        VecEnv(**kwargs)


def test_numpy_numbers_are_accepted_as_settings():
    env = VecEnv(2, opponent="mcts", mcts_exploration=np.float32(0.5), coin_mobility_reward=np.float32(0.01))
    assert env.mobility_rewards.shape == (2, 2)


def test_bad_actions_are_user_errors():
    env = VecEnv(2, seed=0)
    env.reset()
    with pytest.raises(UserError, match="shape"):
        env.step(np.zeros((2, 1), np.int32))
    with pytest.raises(UserError, match="integers"):
        env.step(np.zeros((2, 2), np.float32))
    with pytest.raises(UserError, match="int32"):
        env.step(np.full((2, 2), 2**40, np.int64))
    env.step(np.zeros((2, 2), np.int64))               # any integer dtype that fits is accepted
    env.close()
    with pytest.raises(UserError, match="closed"):
        env.step()


def test_random_actions_are_legal_and_deterministic():
    runs = []
    for _ in range(2):
        env = VecEnv(32, seed=6, max_episode_length=80)
        env.reset()
        chosen = []
        for _ in range(150):
            env.random_actions()
            for i in range(32):
                for s in range(2):
                    assert env.action_masks[i, s, env.actions[i, s]] == 1
            chosen.append(env.actions.copy())
            env.step()
        assert env.pop_log()["invalid_rate"] == 0.0
        runs.append(np.array(chosen))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert len(np.unique(runs[0])) > 100     # spread over many actions, not a fixed pick


def test_saved_state_resumes_exactly():
    env = VecEnv(6, seed=2, max_episode_length=40, coin_mobility_reward=0.5)   # its per-env count too
    env.reset()
    rng = np.random.default_rng(4)
    for _ in range(30):
        env.step(random_actions(env, rng))
    saved = env.get_state()
    streams = [random_actions(env, rng) for _ in range(60)]

    def replay():
        frames = []
        for actions in streams:
            env.step(actions)
            frames.append(env.observations.tobytes() + env.rewards.tobytes() + env.terminals.tobytes()
                          + env.mobility_rewards.tobytes())
        return frames, env.pop_log()

    first = replay()
    env.set_state(saved)
    assert replay() == first
    with pytest.raises(UserError):
        VecEnv(5, seed=2).set_state(saved)


def self_driven_frames(env: VecEnv, steps: int) -> list[bytes]:
    """The buffers of a reset VecEnv after each of `steps` steps of its own random actions
    (the first frame: the observations after reset)."""
    frames = [env.observations.tobytes()]
    for _ in range(steps):
        env.random_actions()
        env.step()
        frames.append(b"".join(a.tobytes() for a in (env.observations, env.action_masks, env.rewards,
                                                     env.terminals)))
    return frames


def bot_mode_frames(num_envs: int, steps: int, **settings) -> list[bytes]:
    """self_driven_frames of a bot-mode VecEnv."""
    env = VecEnv(num_envs, selfplay=False, **settings)
    env.reset()
    return self_driven_frames(env, steps)


@pytest.mark.parametrize("side", [G, C])
def test_bot_mode_plays_the_bot_of_the_other_side(side):
    """opponent {guerrilla: A, coin: B}: an agent playing Guerrilla meets B, one playing COIN meets A,
    exactly as with that bot alone."""
    def frames(opponent):
        return bot_mode_frames(3, 40, side=side, opponent=opponent, mcts_iterations=8, seed=5)
    per_side = frames({"guerrilla": "greedy", "coin": "mcts"})
    assert per_side == frames("mcts" if side == G else "greedy")
    assert per_side != frames("greedy" if side == G else "mcts")


def test_mcts_bot_mode_is_deterministic():
    def run():
        return bot_mode_frames(2, 25, side=C, opponent="mcts", mcts_iterations=24, mcts_rollout="random", seed=3)
    assert run() == run()


def test_mcts_iterations_change_between_steps_up_to_the_pools_size():
    def run(built: int, played: int | None):
        env = VecEnv(2, selfplay=False, side=G, opponent="mcts", mcts_iterations=built, seed=3)
        if played is not None:
            env.set_mcts_iterations(played)
        env.reset()
        return self_driven_frames(env, 25)
    assert run(40, 10) == run(10, None) != run(40, None)
    env = VecEnv(2, selfplay=False, opponent="mcts", mcts_iterations=40)
    with pytest.raises(UserError, match=r"^mcts_iterations must be an integer in 1\.\.40, got 41$"):
        env.set_mcts_iterations(41)
    with pytest.raises(UserError, match="^set_mcts_iterations: this env has no MCTS bot$"):
        VecEnv(2, opponent="greedy").set_mcts_iterations(8)


def threaded_run(threads: int, selfplay: bool, steps: int = 50) -> tuple[list[bytes], dict]:
    """Frames and log of 40 envs, three blocks of 16 (self-play: 3 in 7 against per-side bots, 2 in 7
    tagged frozen; bot mode: MCTS) driven by their own random actions, stepped on `threads` threads."""
    env = VecEnv(40, selfplay=selfplay, opponent={"guerrilla": "greedy", "coin": "mcts"}, mcts_iterations=16,
                 max_episode_length=48, seed=11, threads=threads)
    if selfplay:
        env.opponent_tags[:] = np.resize([0, -1, 2, -1, 0, 1, -1], 40)
    env.reset()
    frames = self_driven_frames(env, steps)
    log = env.pop_log()
    env.close()
    return frames, log


@pytest.mark.parametrize("selfplay", [True, False])
def test_any_thread_count_steps_and_logs_the_same(selfplay):
    frames, log = threaded_run(1, selfplay)
    assert log["games"] >= 20 and (not selfplay or log["bot_n"] >= 5)
    for threads in (2, 3, 16):   # 16 runs as 3, one thread per block
        assert threaded_run(threads, selfplay) == (frames, log)


def test_threads_must_be_positive():
    with pytest.raises(UserError, match="threads must be an integer >= 1, got 0"):
        VecEnv(2, threads=0)


@pytest.mark.parametrize("selfplay", [True, False])
def test_envs_split_by_their_numbers_step_save_and_log_as_the_whole(selfplay):
    """A run's envs split over processes (PPO over ranks): envs 0, 2, 4, .. and 1, 3, 5, .. with
    their numbers play the whole's games; their states join into the whole's and split back; their
    ended games, logged in the whole's order, give the whole's log."""
    kwargs = dict(selfplay=selfplay, opponent={"guerrilla": "greedy", "coin": "mcts"}, mcts_iterations=8,
                  max_episode_length=20, seed=11)
    whole = VecEnv(7, side=[G, C, NO_SIDE, G, C, NO_SIDE, NO_SIDE] if selfplay else G, **kwargs)
    numbers = [np.arange(0, 7, 2), np.arange(1, 7, 2)]
    parts = [VecEnv(len(envs), side=[[G, C, NO_SIDE, G, C, NO_SIDE, NO_SIDE][i] for i in envs] if selfplay else G,
                    env_numbers=envs, **kwargs) for envs in numbers]
    if selfplay:
        whole.opponent_tags[5:] = -1
        for part, envs in zip(parts, numbers):
            part.opponent_tags[:] = np.where(envs >= 5, -1, 0)
    for env in [whole, *parts]:
        env.reset()
    ended = []
    for tick in range(60):
        whole.random_actions()
        for part, envs in zip(parts, numbers):
            part.step(whole.actions[envs])
            games, records = part.game_ends()
            ended += [(tick, envs[i], record) for i, record in zip(games, records)]
        whole.step()
        for part, envs in zip(parts, numbers):
            for name in ("observations", "action_masks", "rewards", "terminals", "slot_sides"):
                assert np.array_equal(getattr(part, name), getattr(whole, name)[envs]), (tick, name)
    assert len(ended) > 10
    expected = whole.pop_log()
    whole_state = whole.get_state()
    parts[0].pop_log()        # (the joined state's log is this env's: a run joins states with its log popped)
    assert parts[0].join_states([part.get_state() for part in parts], numbers, 7) == whole_state
    for part, envs in zip(parts, numbers):
        part.set_state(parts[0].share_of_state(whole_state, envs, 7))
        assert part.get_state() == parts[0].share_of_state(whole_state, envs, 7)
    ended.sort(key=lambda game: (game[0], game[1]))
    parts[0].pop_log()
    parts[0].log_games(np.array([record for _, _, record in ended]))
    got = parts[0].pop_log()
    assert expected["games"] == len(ended) and got.keys() == expected.keys()
    assert all(got[k] == expected[k] or (math.isnan(got[k]) and math.isnan(expected[k])) for k in expected)
