"""The policy's legal-move distribution for PPO (gcpipe/train/policy.py, csrc/gc_policy.c): sampling,
log-probabilities, entropies and their gradients, in C and on torch's path, against hand-computed
values and float64 autograd; and the rollout's log-probabilities recomputed by the update to the bit."""
import math

import pytest
import torch

from gcpipe.nn.select import mask_logits
from gcpipe.train.config import make_config
from gcpipe.train.policy import draw_legal, inverse_cdf, policy_terms, sample_actions, sample_legal
from gcpipe.train.ppo import PPO
from gcpipe.train.sequence import policy_segments

PASS = 255
pytestmark = pytest.mark.usefixtures("one_thread")   # tests/conftest.py


def random_rows(seed: int, rows: int, legal_share: float):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, 256, generator=generator) * 3
    mask = torch.rand(rows, 256, generator=generator) < legal_share
    mask[:, 200] = True
    return logits, mask, generator


def test_the_log_probability_and_entropy_of_a_hand_computed_row():
    # Two legal moves with logits 0 and ln 3: p = 1/4, 3/4; the other logits are ignored however large.
    logits = torch.full((1, 1, 256), 40.0)
    mask = torch.zeros(1, 1, 256, dtype=torch.bool)
    logits[0, 0, 4], logits[0, 0, 9] = 0.0, math.log(3.0)
    mask[0, 0, [4, 9]] = True
    log_prob, entropy = policy_terms(logits, mask, torch.tensor([[9]]))
    assert log_prob.item() == pytest.approx(math.log(0.75), abs=1e-7)
    assert entropy.item() == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), abs=1e-7)
    # d log p_9 / d l = onehot(9) - p; d H / d l_a = -p_a (log p_a + H).
    logits.requires_grad_()
    log_prob, entropy = policy_terms(logits, mask, torch.tensor([[9]]))
    grad, = torch.autograd.grad(2.0 * log_prob.sum() + 3.0 * entropy.sum(), logits)
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    expected = {4: 2.0 * -0.25 - 3.0 * 0.25 * (math.log(0.25) + h), 9: 2.0 * 0.25 - 3.0 * 0.75 * (math.log(0.75) + h)}
    for a, value in expected.items():
        assert grad[0, 0, a].item() == pytest.approx(value, abs=1e-6)
    assert grad[0, 0].count_nonzero() == 2           # illegal moves get no gradient


def test_the_c_path_gives_illegal_moves_no_probability_where_torchs_gives_them_a_little():
    # Legal logits near -1e4 tell the paths apart: torch's -1e4 illegal logits then weigh e^-10
    # each against the legal moves, where C leaves them out.  (So a fall back to torch's path,
    # which every other test here would pass, fails this one.)
    logits = torch.full((1, 1, 256), 5.0)
    mask = torch.zeros(1, 1, 256, dtype=torch.bool)
    logits[0, 0, 3], logits[0, 0, 8] = -9991.0, -9990.0       # (exact floats: p_8 = e / (1 + e))
    mask[0, 0, [3, 8]] = True
    log_prob, _ = policy_terms(logits, mask, torch.tensor([[8]]))
    # (log Z = top + log(total) is rounded at the magnitude of the logits: float32's spacing near 1e4 is 2^-10.)
    assert log_prob.item() == pytest.approx(-math.log1p(math.exp(-1.0)), abs=1e-3)
    torch_log_prob, _ = policy_terms(logits.double(), mask, torch.tensor([[8]]))
    assert torch_log_prob.item() < -math.log1p(math.exp(-1.0)) - 0.005
    actions, _ = draw_legal(logits[0], mask[0], torch.full((1, 1), 0.999))
    assert actions.tolist() == [8]
    # A row's log-probability of something that is not a move is NaN, not a read out of the row.
    assert math.isnan(policy_terms(logits, mask, torch.tensor([[-1]]))[0].item())


@pytest.mark.parametrize("path", ["c", "torch"])
def test_terms_and_gradients_agree_with_float64_autograd(path):
    logits, mask, generator = random_rows(3, 6 * 7, 0.1)
    logits = logits.view(6, 7, 256).transpose(0, 1)       # a strided view, as the decoder's output
    mask = mask.view(7, 6, 256).contiguous()
    actions = torch.multinomial(mask.view(-1, 256).float(), 1, generator=generator).view(7, 6)
    weights = torch.randn(2, 7, 6, generator=generator)
    leaf = (logits if path == "c" else logits.double()).clone().requires_grad_()
    log_probs, entropies = policy_terms(leaf, mask, actions)
    grad, = torch.autograd.grad((weights[0] * log_probs).sum() + (weights[1] * entropies).sum(), leaf)
    reference = logits.double().masked_fill(~mask, -math.inf).requires_grad_()
    log_softmax = torch.log_softmax(reference, -1)
    ref_log_probs = log_softmax.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    ref_entropies = -(log_softmax.exp() * log_softmax.nan_to_num(0.0, 0.0, 0.0)).sum(-1)
    ref_grad, = torch.autograd.grad((weights[0] * ref_log_probs).sum() + (weights[1] * ref_entropies).sum(), reference)
    assert torch.allclose(log_probs.double(), ref_log_probs, atol=1e-5)
    assert torch.allclose(entropies.double(), ref_entropies, atol=1e-5)
    assert torch.allclose(grad.double(), ref_grad.nan_to_num(0.0), atol=1e-5)


@pytest.mark.parametrize("path", ["c", "torch"])
def test_sampling_never_picks_a_masked_action_and_returns_its_log_prob(path):
    logits, mask, generator = random_rows(3, 2000, 0.1)
    logits[:, 7] = 50.0                      # masked below: must never be chosen
    mask[:, 7] = False
    mask[0] = False
    mask[0, PASS] = True                     # a waiting slot: the pass is the only choice
    actions, log_probs = sample_legal(logits if path == "c" else logits.double(), mask, generator)
    assert mask[torch.arange(2000), actions].all()
    assert actions[0] == PASS and (log_probs[0] == 0 if path == "c" else abs(float(log_probs[0])) < 1e-6)
    reference = torch.log_softmax(mask_logits(logits, mask).double(), -1)[torch.arange(2000), actions]
    assert torch.allclose(log_probs.double(), reference, atol=1e-5)


def test_the_torch_path_draws_the_action_whose_cdf_interval_holds_the_uniform():
    """The action is the number of CDF entries below u = U * total (the inverse-CDF draw the
    training's published runs used, counted over the whole row), for the same uniforms; masked rows
    make long plateaus of the CDF."""
    logits, mask, _ = random_rows(11, 3000, 0.05)
    masked = mask_logits(logits, mask)
    uniforms = torch.rand(3000, 1, generator=torch.Generator().manual_seed(4))
    actions, _ = sample_actions(masked, uniforms)
    cdf = torch.cumsum(torch.softmax(masked, dim=-1), dim=-1)
    assert torch.equal(actions, (cdf < uniforms * cdf[:, -1:]).sum(dim=-1))


def test_the_c_draw_is_the_same_inverse_cdf_over_the_legal_moves():
    """C and torch draw the same move for the same uniform, but where u lies within rounding of a
    boundary of the CDF (their sums round differently)."""
    logits, mask, _ = random_rows(12, 3000, 0.05)
    uniforms = torch.rand(3000, 1, generator=torch.Generator().manual_seed(4))
    c_actions, _ = draw_legal(logits, mask, uniforms)
    torch_actions, _ = draw_legal(logits.double(), mask, uniforms.double())
    cdf = torch.cumsum(torch.softmax(mask_logits(logits, mask).double(), dim=-1), dim=-1)
    near_a_boundary = ((cdf - uniforms.double()).abs() < 1e-5).any(dim=-1)
    assert torch.equal(c_actions[~near_a_boundary], torch_actions[~near_a_boundary])
    assert near_a_boundary.sum() < 10


@pytest.mark.parametrize("path", ["c", "torch"])
def test_a_zero_uniform_draws_the_first_legal_action_and_the_largest_the_last(path):
    """torch.rand returns exactly 0 once in 2^24 draws; with the CDF's leading entries masked (zero),
    counting the entries below u = 0 would pick action 0, which is illegal here."""
    mask = torch.zeros(3, 256, dtype=torch.bool)
    mask[0, [5, 9]] = mask[1, PASS] = mask[2, [0, 255]] = True
    logits = torch.randn(3, 256, generator=torch.Generator().manual_seed(2))
    logits = logits if path == "c" else logits.double()
    assert draw_legal(logits, mask, torch.zeros(3, 1, dtype=logits.dtype))[0].tolist() == [5, PASS, 0]
    assert draw_legal(logits, mask, torch.zeros(3, 1, dtype=torch.float64))[0].tolist() == [5, PASS, 0]
    largest = torch.full((3, 1), 1.0 - 2.0 ** -24, dtype=logits.dtype)
    assert draw_legal(logits, mask, largest)[0].tolist() == [9, PASS, 255]
    if path == "c":                          # inverse_cdf is the torch path's draw
        assert inverse_cdf(mask_logits(logits, mask), torch.zeros(3, 1)).tolist() == [5, PASS, 0]


def test_the_update_recomputes_the_rollouts_log_probabilities_and_values_bit_for_bit():
    """PPO's first ratios are exactly 1: the update's forward (fixed-order products, the rollout's
    gates) and log-probabilities (the sampler's arithmetic) give the rollout's numbers to the bit."""
    ppo = PPO(make_config(dict(num_envs=24, horizon=16, minibatch_size=128, total_timesteps=10**6,
                               historical_fraction=0.25, seed=9)))
    try:
        ppo.collect()
        ppo.update()                         # weights that are not the initial ones
        ppo.collect()
        with torch.no_grad():
            log_probs, _, values, pass_logits = policy_segments(ppo.policy, ppo.buf_obs, ppo.buf_initial_state,
                                                                ppo.buf_starts, ppo.buf_masks, ppo.buf_actions)
        assert torch.equal(log_probs, ppo.buf_logprobs)
        assert torch.equal(torch.where(ppo.buf_coin, pass_logits, values), ppo.buf_values)
        assert ppo.buf_logprobs.count_nonzero() > 0
    finally:
        ppo.close()
