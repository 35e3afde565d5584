"""NetworkPlayer and NetworkBot against rules.md §9: per-slot recurrent states, sampling over legal
actions only, and full-turn versus actor-only stepping."""
import numpy as np
import pytest
import torch

from gcpipe.engine import Game, GameBatch
from gcpipe.nn import checkpoint as ckpt
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.nn.player import NetworkBot, NetworkPlayer


def _checkpoint(bias=False, seed=0, layout=None):
    model = MinGRUPolicy(bias=bias, generator=torch.Generator().manual_seed(seed))
    if bias:
        with torch.no_grad():
            model.encoder.bias.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(seed + 1))
            model.decoder.bias.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(seed + 2))
    return ckpt.Checkpoint.from_model(model, layout)


def _observations(k, seed):
    rng = np.random.default_rng(seed)
    obs = rng.integers(0, 2, size=(k, 120)).astype(np.uint8)
    obs[:, 118] = rng.integers(0, 67, size=k)
    return obs


@pytest.mark.parametrize("bias", [False, True])
def test_forward_matches_the_model_step_per_slot(bias):
    checkpoint = _checkpoint(bias, seed=1)
    player = NetworkPlayer(checkpoint)
    player.start(10)
    model_state = checkpoint.model.initial_state(10)
    schedule = [np.arange(10), np.array([7, 2, 5]), np.array([4]), np.arange(10), np.array([9, 0])]
    with torch.no_grad():
        for step, slots in enumerate(schedule):
            obs = _observations(len(slots), step)
            logits = player.forward(slots, obs)
            ref_logits, _, new_state = checkpoint.model.step(torch.from_numpy(obs), model_state[:, slots])
            model_state[:, slots] = new_state
            assert logits.shape == (len(slots), 256) and logits.dtype == np.float32
            assert np.abs(logits - ref_logits.numpy()).max() < 1e-5
            assert np.abs(player.state(np.arange(10)) - model_state.numpy()).max() < 1e-5
    player.reset(np.array([2, 9]))
    state = player.state(np.arange(10))
    assert not state[:, [2, 9]].any() and state[:, [0, 4, 7]].all(axis=(0, 2)).all()


def test_logits_do_not_depend_on_which_games_share_the_call():
    """Bit-identical logits whether slots step alone, in small groups or all together, so match
    results do not depend on batching."""
    checkpoint = _checkpoint(bias=True, seed=2)
    obs = [_observations(64, seed) for seed in range(3)]
    outputs = []
    for groups in ([np.arange(64)], [np.array([s]) for s in range(64)], np.array_split(np.arange(64)[::-1], 9)):
        player = NetworkPlayer(checkpoint)
        player.start(64)
        out = np.zeros((3, 64, 256), np.float32)
        for t in range(3):
            for slots in groups:
                out[t, slots] = player.forward(slots, obs[t][slots])
        outputs.append(out)
    assert np.array_equal(outputs[0], outputs[1]) and np.array_equal(outputs[0], outputs[2])


def test_full_turn_defaults_from_the_layout(tmp_path):
    model = MinGRUPolicy()
    ckpt.save(model, tmp_path / "5c.bin", "5c")
    with pytest.warns(ckpt.CheckpointWarning):
        ckpt.save(model, tmp_path / "legacy.bin", "legacy")
    assert NetworkPlayer(str(tmp_path / "5c.bin")).full_turn is True
    assert NetworkPlayer(tmp_path / "legacy.bin").full_turn is False
    assert NetworkPlayer(tmp_path / "legacy.bin", full_turn=True).full_turn is True
    assert NetworkPlayer(ckpt.load(tmp_path / "5c.bin"), full_turn=False).full_turn is False


def test_forward_checks_its_arguments():
    player = NetworkPlayer(_checkpoint())
    with pytest.raises(RuntimeError, match="start"):
        player.forward(np.array([0]), _observations(1, 0))
    player.start(4)
    with pytest.raises(ValueError, match=r"obs must have shape \(2, 120\)"):
        player.forward(np.array([0, 1]), _observations(3, 0))
    with pytest.raises(IndexError, match="0..3"):
        player.forward(np.array([4]), _observations(1, 0))
    assert player.forward(np.array([], np.int64), np.zeros((0, 120), np.uint8)).shape == (0, 256)


def _forcing_checkpoint(favourite_bias):
    """A 5c-bias net whose logits are its decoder bias alone (zero decoder weights)."""
    checkpoint = _checkpoint(bias=True, seed=3)
    with torch.no_grad():
        checkpoint.model.decoder.weight.zero_()
        checkpoint.model.decoder.bias.zero_()
        for action, value in favourite_bias.items():
            checkpoint.model.decoder.bias[action] = value
    return checkpoint


def test_a_dominant_legal_logit_is_played():
    # Action 101 = first point 25 (the centre), direction right: legal at the start.
    bot = NetworkBot(NetworkPlayer(_forcing_checkpoint({101: 30.0})))
    for seed in range(1, 40):
        game = Game(seed)
        bot.new_game()
        assert 101 in game.legal_actions()
        assert bot.choose(game) == 101


def test_huge_illegal_logits_are_never_chosen():
    """Every COIN and Guerrilla action except a few gets a huge logit; the bots must still only
    play legal moves (Game.apply_action raises on anything else) over whole games."""
    biases = {a: 1e4 for a in range(256) if a % 7}
    bots = [NetworkBot(NetworkPlayer(_forcing_checkpoint(biases))) for _ in range(2)]
    for seed in range(1, 30):
        game = Game(seed)
        for bot in bots:
            bot.new_game()
        while not game.is_terminal():
            mover = bots[game.current_player()]
            bots[1 - game.current_player()].observe(game)
            legal = game.legal_actions()
            action = mover.choose(game)
            assert action in legal
            if any(a % 7 for a in legal):
                assert action % 7      # the mass sits on the huge legal logits
            game.apply_action(action)


def test_sampling_agrees_with_the_batch_and_uses_one_draw():
    logits = np.random.default_rng(4).normal(size=256).astype(np.float32) * 3
    for seed in range(1, 30):
        game, batch = Game(seed), GameBatch(1)
        batch.reset(0, seed)
        action = game.sample_action(logits)
        assert batch.sample_apply(np.array([0]), logits[None]).tolist() == [action]
        game.apply_action(action)
        assert game == batch.game(0)
    with pytest.raises(ValueError, match=r"shape \(256,\)"):
        Game(1).sample_action(logits[:10])


class _CountingPlayer(NetworkPlayer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps = 0

    def forward(self, slots, obs):
        self.steps += len(slots)
        return super().forward(slots, obs)

    def advance(self, slots, obs):
        self.steps += len(slots)
        super().advance(slots, obs)


def _play(seed, bots):
    game = Game(seed)
    for bot in bots:
        bot.new_game()
    plies = [0, 0]
    while not game.is_terminal():
        side = game.current_player()
        bots[1 - side].observe(game)
        game.apply_action(bots[side].choose(game))
        plies[side] += 1
    return game, plies


@pytest.mark.parametrize("full_turn", [True, False])
def test_full_turn_nets_step_every_ply_actor_only_nets_their_own(full_turn):
    checkpoint = _checkpoint(seed=5)
    players = [_CountingPlayer(checkpoint, full_turn=full_turn) for _ in range(2)]
    bots = [NetworkBot(p) for p in players]
    for seed in (3, 4):
        before = [p.steps for p in players]
        game, plies = _play(seed, bots)
        steps = [p.steps - b for p, b in zip(players, before)]
        if full_turn:
            assert steps == [game.plies, game.plies]
        else:
            assert steps == plies and sum(plies) == game.plies


def test_state_resets_between_games_so_replays_agree():
    checkpoint = _checkpoint(seed=6)
    bots = [NetworkBot(NetworkPlayer(checkpoint)) for _ in range(2)]
    first, _ = _play(11, bots)
    _play(12, bots)
    again, _ = _play(11, bots)
    assert first == again
    fresh, _ = _play(11, [NetworkBot(NetworkPlayer(checkpoint)) for _ in range(2)])
    assert fresh == first


def test_full_turn_changes_the_recurrent_state_the_actor_sees():
    """The waiting-side step is not a no-op: the same net plays differently when it also steps
    on the opponent's plies (checked on the logits of the second Guerrilla turn)."""
    checkpoint = _checkpoint(seed=7)
    game = Game(21)
    logits = []
    for full_turn in (True, False):
        bot = NetworkBot(NetworkPlayer(checkpoint, full_turn=full_turn))
        replay = game.clone()
        bot.choose(replay)                      # Guerrilla's first turn (consumes a draw)
        replay.apply_action(replay.legal_actions()[0])
        bot.observe(replay)                     # COIN to move: only the full-turn net steps
        replay.apply_action(replay.legal_actions()[0])
        logits.append(bot.player.forward(np.array([0]), replay.observation()[None]).copy())
    assert not np.allclose(logits[0], logits[1])
