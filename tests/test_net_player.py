"""NetworkPlayer (the network's slots and forward pass) and the `net` player kind that plays it
through the player protocol, against rules.md §9: per-slot recurrent states, sampling over legal
actions only, and full-turn versus actor-only stepping."""
import numpy as np
import pytest
import torch

from gcpipe.engine import Game, GameBatch
from gcpipe.nn import checkpoint as ckpt
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.nn.player import NetworkPlayer
from gcpipe.players.network import NetPlayer

SLOT = np.zeros(1, np.int32)


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


def _net(checkpoint, full_turn=None) -> NetPlayer:
    return NetPlayer(NetworkPlayer(checkpoint, full_turn=full_turn))


def _one_game(seed, players, check=None):
    """A game in a batch of one, both players driven through the protocol as the match loop does;
    `check(games, side, action)` sees every move before it is applied.  Returns the final Game and
    the plies each side played."""
    games = GameBatch(1)
    games.reset(0, seed)
    for player in players:
        player.start(1)
        player.new_games(SLOT)
    plies = [0, 0]
    while not games.game(0).is_terminal():
        side = int(games.to_move[0])
        players[1 - side].observe(games, SLOT)
        action = players[side].choose(games, SLOT)
        if check is not None:
            check(games, side, int(action[0]))
        games.apply(SLOT, action)
        plies[side] += 1
    return games.game(0), plies


def test_a_dominant_legal_logit_is_played():
    # Action 101 = first point 25 (the centre), direction right: legal at the start.
    player = _net(_forcing_checkpoint({101: 30.0}))
    player.start(1)
    for seed in range(1, 40):
        games = GameBatch(1)
        games.reset(0, seed)
        player.new_games(SLOT)
        assert 101 in games.game(0).legal_actions()
        assert player.choose(games, SLOT).tolist() == [101]
        assert games.game(0).plies == 0          # choosing leaves the position alone


def test_huge_illegal_logits_are_never_chosen():
    """Every COIN and Guerrilla action except a few gets a huge logit; the players must still only
    play legal moves over whole games."""
    biases = {a: 1e4 for a in range(256) if a % 7}
    players = [_net(_forcing_checkpoint(biases)) for _ in range(2)]
    moves = 0

    def check(games, side, action):
        nonlocal moves
        legal = games.game(0).legal_actions()
        assert action in legal
        if any(a % 7 for a in legal):
            assert action % 7      # the mass sits on the huge legal logits
        moves += 1

    for seed in range(1, 30):
        _one_game(seed, players, check)
    assert moves > 29 * 10


def test_sampling_agrees_with_the_batch_and_uses_one_draw():
    logits = np.random.default_rng(4).normal(size=256).astype(np.float32) * 3
    for seed in range(1, 30):
        game, batch = Game(seed), GameBatch(1)
        batch.reset(0, seed)
        action = game.sample_action(logits)
        assert batch.sample(SLOT, logits[None]).tolist() == [action]
        assert game == batch.game(0)             # the same one draw, the position unchanged
        game.apply_action(action)
        batch.apply(SLOT, [action])
        assert game == batch.game(0)
    with pytest.raises(ValueError, match=r"shape \(256,\)"):
        Game(1).sample_action(logits[:10])


class _CountingNetwork(NetworkPlayer):
    """Counts the slot-steps of its forwards and keeps the last logits."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps = 0
        self.logits = None

    def forward(self, slots, obs):
        self.steps += len(slots)
        self.logits = super().forward(slots, obs).copy()
        return self.logits

    def advance(self, slots, obs):
        self.steps += len(slots)
        super().advance(slots, obs)


@pytest.mark.parametrize("full_turn", [True, False])
def test_full_turn_nets_step_every_ply_actor_only_nets_their_own(full_turn):
    checkpoint = _checkpoint(seed=5)
    networks = [_CountingNetwork(checkpoint, full_turn=full_turn) for _ in range(2)]
    players = [NetPlayer(network) for network in networks]
    for seed in (3, 4):
        before = [network.steps for network in networks]
        game, plies = _one_game(seed, players)
        steps = [network.steps - b for network, b in zip(networks, before)]
        if full_turn:
            assert steps == [game.plies, game.plies]
        else:
            assert steps == plies and sum(plies) == game.plies


def test_state_resets_between_games_so_replays_agree():
    checkpoint = _checkpoint(seed=6)
    players = [_net(checkpoint) for _ in range(2)]
    first = _one_game(11, players)[0]
    _one_game(12, players)
    again = _one_game(11, players)[0]
    assert first == again
    fresh = _one_game(11, [_net(checkpoint) for _ in range(2)])[0]
    assert fresh == first


def test_full_turn_changes_the_recurrent_state_the_actor_sees():
    """The waiting-side step is not a no-op: the same net plays differently when it also steps
    on the opponent's plies (checked on the logits of the second Guerrilla turn)."""
    checkpoint = _checkpoint(seed=7)
    logits = []
    for full_turn in (True, False):
        network = _CountingNetwork(checkpoint, full_turn=full_turn)
        player = NetPlayer(network)
        games = GameBatch(1)
        games.reset(0, 21)
        player.start(1)
        player.new_games(SLOT)
        player.choose(games, SLOT)                     # Guerrilla's first turn (consumes a draw)
        games.apply(SLOT, games.game(0).legal_actions()[:1])
        player.observe(games, SLOT)                    # COIN to move: only the full-turn net steps
        games.apply(SLOT, games.game(0).legal_actions()[:1])
        player.choose(games, SLOT)                     # Guerrilla's second turn
        logits.append(network.logits)
        assert network.steps == (3 if full_turn else 2)
    assert not np.allclose(logits[0], logits[1])
