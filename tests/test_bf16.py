"""bfloat16 products (csrc/gc_bf16.c, matmul_bf16 and `update_precision: bfloat16` in
gcpipe/train): AVX512_BF16's arithmetic against hand-computed values, the instruction and its
float32 emulation on every code path to the same bits, and the update's products on them."""
import pytest
import torch

from gcpipe.errors import UserError
from gcpipe.nn.inference import SIMD, best_simd
from gcpipe.train import matmul as fixed
from gcpipe.train import sequence
from gcpipe.train.config import make_config
from gcpipe.train.ppo import PPO
from test_train import rollout_segments

# (instruction?, code path) pairs this CPU runs: the emulation on AVX2 and AVX-512, the instruction
# where the CPU has it.
WAYS = ([(False, name) for name in ("avx2", "avx512") if SIMD[name] <= SIMD[best_simd()]]
        + ([(True, "avx512")] if fixed.BF16_HARDWARE else []))

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not fixed.bf16_runs_here(), reason="bfloat16 products need x86-64 with AVX2")]


def every_way(monkeypatch, product):
    """product() by the instruction and by the emulation on each path this CPU has."""
    results = {}
    for hardware, path in WAYS:
        monkeypatch.setattr(fixed, "BF16_HARDWARE", hardware)
        monkeypatch.setattr(fixed, "SIMD_PATH", SIMD[path])
        results[hardware, path] = product()
    return results


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32)


@pytest.mark.parametrize("a, b, bias, expected, float32", [
    # Each pair's odd element first: 2^24 + 1 rounds to 2^24 (a tie, to even), then - 2^24 leaves 0,
    # where k in order (float32's products) keeps the 1.
    ([[-2.0 ** 24, 1.0]], [[1.0], [1.0]], [2.0 ** 24], 0.0, 1.0),
    # Operands to bfloat16 (8 significant bits), ties to even: 1 + 2^-8 -> 1, 1 + 5 2^-8 -> 1 + 2^-6.
    ([[1 + 2.0 ** -8, 1 + 5 * 2.0 ** -8]], [[1.0], [1.0]], None, 2.015625, 2.0234375),
    # A product below float's normal range is flushed to zero (float32 keeps 2^-140).
    ([[2.0 ** -70]], [[2.0 ** -70]], None, 0.0, 2.0 ** -140),
    # An odd K ends with a zero element.
    ([[1.0, 2.0, 3.0]], [[1.0], [1.0], [-1.0]], [3.0], 3.0, 3.0),
])
def test_bfloat16_products_sum_as_the_instruction_does(monkeypatch, a, b, bias, expected, float32):
    a, b = torch.tensor(a), torch.tensor(b)
    bias = None if bias is None else torch.tensor(bias)
    for way, got in every_way(monkeypatch, lambda: fixed.matmul_bf16(a, b, bias)).items():
        assert got.tolist() == [[expected]], way
    assert fixed.matmul(a, b, bias).tolist() == [[float32]]


@pytest.mark.parametrize("rows, inner, cols", [(37, 129, 45), (13, 64, 32), (30, 700, 33), (5, 1, 3), (3, 0, 5)])
def test_the_instruction_and_its_emulation_give_the_same_bits(monkeypatch, rows, inner, cols):
    # Magnitudes over float's whole range (products that overflow, underflow or land in the
    # denormals), NaNs and a transposed operand; past 512 inputs the instruction's path sums in two
    # passes.
    generator = torch.Generator().manual_seed(rows + inner)
    spread = lambda *shape: torch.randn(*shape, generator=generator) * torch.exp(  # noqa: E731
        torch.randn(*shape, generator=generator) * 30)
    a, b = spread(rows, inner), spread(inner, cols)
    if inner > 3:                                # NaNs of other bits in both operands
        a[0, :3] = float("nan")
        b[:2, 0] = -float("nan")
        b[2, 1] = torch.tensor(0x7FC12345, dtype=torch.int32).view(torch.float32)
    bias = torch.randn(cols, generator=generator)
    a_t = torch.randn(inner, rows, generator=generator).T
    for operands in ((a, b, bias), (a_t, b, None)):
        results = every_way(monkeypatch, lambda: fixed.matmul_bf16(*operands))
        torch.set_num_threads(2)                 # the rows split between two threads
        results["two threads"] = fixed.matmul_bf16(*operands)
        torch.set_num_threads(1)
        first = next(iter(results.values()))
        for way, got in results.items():
            assert torch.equal(bits(got), bits(first)), way
    b = torch.randn(inner, cols, generator=generator)
    ordinary = fixed.matmul_bf16(a_t, b)
    scale = (a_t.abs() @ b.abs()).clamp_min(1e-30)
    assert ((ordinary - a_t @ b).abs() / scale).max() < 2 ** -7   # bfloat16 operands: 2^-8 each


def test_the_update_in_bfloat16_takes_its_products_in_bfloat16_on_every_path(monkeypatch):
    model, obs, state, starts, masks, actions, coin = rollout_segments(bias=False)
    generator = torch.Generator().manual_seed(2)
    weights = [torch.randn(actions.shape, generator=generator) for _ in range(3)]

    def terms_and_gradients(bfloat16: bool) -> list:
        terms = sequence.policy_segments(model, obs, state, starts, masks, actions, bfloat16=bfloat16)
        log_probs, entropies, values, pass_logits = terms
        loss = ((log_probs * weights[0]).sum() + (entropies * weights[1]).sum()
                + (torch.where(coin, pass_logits, values) * weights[2]).sum())
        return [*terms, *torch.autograd.grad(loss, list(model.parameters()))]

    results = every_way(monkeypatch, lambda: terms_and_gradients(True))
    float32 = terms_and_gradients(False)
    first = next(iter(results.values()))
    for way, got in results.items():
        for g, f in zip(got, first):
            assert torch.equal(bits(g), bits(f)), way
    for g, f in zip(first, float32):             # near float32's, not its bits
        assert not torch.equal(g, f)
        assert (g - f).abs().max() <= 0.05 * f.abs().max() + 1e-3

    # The layers' products, gradients included, in bfloat16.
    x = torch.randn(50, 128, generator=generator, requires_grad=True)
    layer = model.grus[0]
    out = fixed.linear(layer, x, bfloat16=True)
    grad = torch.randn(out.shape, generator=generator)
    grad_x, grad_w = torch.autograd.grad(out, [x, layer.weight], grad)
    assert torch.equal(out, fixed.matmul_bf16(x.detach(), layer.weight.detach().T))
    assert torch.equal(grad_x, fixed.matmul_bf16(grad, layer.weight.detach()))
    assert torch.equal(grad_w, fixed.matmul_bf16(grad.T, x.detach()))


@pytest.mark.parametrize("settings, message", [
    (dict(update_precision="bfloat16", algorithm="expert", selfplay=True),
     "'update_precision' bfloat16 is for PPO's update on the CPU"),
    (dict(update_precision="bfloat16", device="auto"), "'update_precision' bfloat16 is for PPO's update on the CPU"),
    (dict(update_precision="half"), "update_precision: 'half' is not one of float32, bfloat16"),
])
def test_bfloat16_settings_that_cannot_work_are_refused_in_one_line(settings, message):
    with pytest.raises(UserError, match=message):
        make_config(settings, where="t")


def test_a_cpu_without_the_float32_paths_is_refused_before_any_step(monkeypatch):
    monkeypatch.setattr(fixed, "BF16_HARDWARE", False)
    monkeypatch.setattr(fixed, "SIMD_PATH", SIMD["scalar"])
    with pytest.raises(UserError, match="^'update_precision' bfloat16 needs an x86-64 CPU with AVX2 and FMA"):
        PPO(make_config(dict(update_precision="bfloat16", num_envs=8, horizon=8, minibatch_size=64), where="t"))
