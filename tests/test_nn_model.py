"""MinGRUPolicy against model.md §1: shapes, init, the step formulas, and the log-space scan over
sequences (tests/sequence_oracle.py, with episode resets) against step-by-step evaluation."""
import math

import numpy as np
import pytest
import torch

from gcpipe.nn.model import MinGRUPolicy
from sequence_oracle import forward_sequence


def _model(bias=False, seed=0):
    model = MinGRUPolicy(bias=bias, generator=torch.Generator().manual_seed(seed))
    if bias:
        with torch.no_grad():
            model.encoder.bias.normal_(generator=torch.Generator().manual_seed(seed + 1))
            model.decoder.bias.normal_(generator=torch.Generator().manual_seed(seed + 2))
    return model


def _observations(shape, seed=0):
    """Byte observations shaped like the game's: 0/1 cells, side 1/2, counters up to 66."""
    rng = np.random.default_rng(seed)
    obs = rng.integers(0, 2, size=shape + (120,)).astype(np.uint8)
    obs[..., 113] = rng.integers(1, 3, size=shape)
    obs[..., 115] = rng.integers(0, 65, size=shape)
    obs[..., 118] = rng.integers(0, 67, size=shape)
    obs[..., 119] = rng.integers(0, 40, size=shape)
    return torch.from_numpy(obs)


def _reference_step(model, obs, state):
    """model.md §1 written out in float64 numpy, one formula per line of the spec."""
    def linear(module, x):
        w = module.weight.detach().double().numpy()
        out = x @ w.T
        return out if module.bias is None else out + module.bias.detach().double().numpy()

    sigmoid = lambda v: 1 / (1 + np.exp(-v))
    H = model.hidden
    x = linear(model.encoder, obs.numpy().astype(np.float64))
    new_state = []
    for layer, gru in enumerate(model.grus):
        c = linear(gru, x)
        h, k, p = c[:, :H], c[:, H:2 * H], c[:, 2 * H:]
        g = np.where(h >= 0, h + 0.5, sigmoid(h))
        z = sigmoid(k)
        s = state[layer].numpy().astype(np.float64)
        s = s + z * (g - s)
        x = sigmoid(p) * s + (1 - sigmoid(p)) * x
        new_state.append(s)
    out = linear(model.decoder, x)
    return out[:, :256], out[:, 256], np.stack(new_state)


def test_shapes_and_native_trainer_init():
    model = MinGRUPolicy()
    assert tuple(model.encoder.weight.shape) == (128, 120) and model.encoder.bias is None
    assert [tuple(g.weight.shape) for g in model.grus] == [(384, 128), (384, 128)]
    assert all(g.bias is None for g in model.grus)
    assert tuple(model.decoder.weight.shape) == (257, 128) and model.decoder.bias is None
    for weight, bound in [(model.encoder.weight, math.sqrt(2) / math.sqrt(120)), (model.decoder.weight, 1 / math.sqrt(128)),
                          (model.grus[0].weight, 1 / math.sqrt(128)), (model.grus[1].weight, 1 / math.sqrt(128))]:
        w = weight.detach().abs()
        assert w.max() <= bound and w.max() > 0.99 * bound
        assert abs(float(w.mean()) - bound / 2) < 0.02 * bound          # uniform: mean |w| = bound/2
    biased = MinGRUPolicy(bias=True)
    assert biased.encoder.bias.shape == (128,) and biased.decoder.bias.shape == (257,)
    assert not biased.encoder.bias.any() and not biased.decoder.bias.any()
    assert torch.equal(MinGRUPolicy(generator=torch.Generator().manual_seed(5)).encoder.weight,
                       MinGRUPolicy(generator=torch.Generator().manual_seed(5)).encoder.weight)


def test_initial_state_is_zeros():
    state = MinGRUPolicy(hidden=16, layers=3).initial_state(5)
    assert state.shape == (3, 5, 16) and not state.any()


@pytest.mark.parametrize("bias", [False, True])
def test_step_follows_the_spec_formulas(bias):
    model = _model(bias)
    obs = _observations((64,))
    state = torch.rand(2, 64, 128) * 2
    with torch.no_grad():
        logits, value, new_state = model.step(obs, state)
        float_logits, _, _ = model.step(obs.float(), state)
    ref_logits, ref_value, ref_state = _reference_step(model, obs, state)
    assert logits.shape == (64, 256) and value.shape == (64,) and new_state.shape == (2, 64, 128)
    assert np.abs(logits.numpy() - ref_logits).max() < 1e-4
    assert np.abs(value.numpy() - ref_value).max() < 1e-4
    assert np.abs(new_state.numpy() - ref_state).max() < 1e-5
    assert torch.equal(logits, float_logits)      # the uint8 -> float cast happens inside


def test_candidate_is_h_plus_half_above_zero_and_sigmoid_below():
    """One unit with h = x and z = sigmoid(0) = 1/2, so the first state is g(x) / 2."""
    model = MinGRUPolicy(hidden=1, layers=1, obs_size=1, num_actions=1)
    with torch.no_grad():
        model.encoder.weight.fill_(1.0)
        model.grus[0].weight.copy_(torch.tensor([[1.0], [0.0], [-100.0]]))   # h = x, k = 0, p ~ 0
        model.decoder.weight.fill_(1.0)
    for x, g in [(2.0, 2.5), (0.0, 0.5), (-1.0, 1 / (1 + math.e))]:
        with torch.no_grad():
            _, _, state = model.step(torch.tensor([[x]]), model.initial_state(1))
        assert float(state) == pytest.approx(g / 2, abs=1e-6)


def _step_through(model, obs, state, starts):
    logits, values = [], []
    for t in range(obs.shape[1]):
        state = state * (~starts[:, t]).to(state.dtype)[None, :, None]
        step_logits, step_value, state = model.step(obs[:, t], state)
        logits.append(step_logits)
        values.append(step_value)
    return torch.stack(logits, 1), torch.stack(values, 1), state


@pytest.mark.parametrize("bias", [False, True])
def test_sequence_scan_equals_stepping_with_resets(bias):
    model = _model(bias, seed=3)
    B, T = 12, 40
    obs = _observations((B, T), seed=4)
    starts = torch.from_numpy(np.random.default_rng(5).random((B, T)) < 0.08)
    starts[0] = False                      # one row carries the initial state through
    starts[1, 0] = True                    # one starts a fresh episode at once
    starts[2, 10:13] = True                # resets on consecutive steps
    starts[3, T - 1] = True                # a reset on the last step
    state = torch.rand(2, B, 128) * 3
    with torch.no_grad():
        seq_logits, seq_values, seq_final = forward_sequence(model, obs, state, starts)
        ref_logits, ref_values, ref_final = _step_through(model, obs, state, starts)
    assert seq_logits.shape == (B, T, 256) and seq_values.shape == (B, T) and seq_final.shape == (2, B, 128)
    assert (seq_logits - ref_logits).abs().max() <= 1e-5
    assert (seq_values - ref_values).abs().max() <= 1e-5
    assert (seq_final - ref_final).abs().max() <= 1e-5


def test_sequence_from_zero_state_has_finite_gradients():
    model = _model(seed=6)
    obs = _observations((4, 16), seed=7)
    starts = torch.zeros(4, 16, dtype=torch.bool)
    starts[:, 0] = True
    starts[2, 9] = True
    logits, values, _ = forward_sequence(model, obs, model.initial_state(4), starts)
    (logits.logsumexp(-1).sum() + values.square().sum()).backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)


def test_sequence_chunks_chain_through_the_final_state():
    """Two half sequences, the second starting from the first's final state, equal one whole."""
    model = _model(seed=8)
    obs = _observations((6, 20), seed=9)
    starts = torch.from_numpy(np.random.default_rng(10).random((6, 20)) < 0.1)
    with torch.no_grad():
        whole, _, final = forward_sequence(model, obs, model.initial_state(6), starts)
        first, _, middle = forward_sequence(model, obs[:, :10], model.initial_state(6), starts[:, :10])
        second, _, final2 = forward_sequence(model, obs[:, 10:], middle, starts[:, 10:])
    assert (torch.cat([first, second], 1) - whole).abs().max() <= 1e-5
    assert (final2 - final).abs().max() <= 1e-5
