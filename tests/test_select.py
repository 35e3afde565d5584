"""gcpipe.nn.select against torch.where, bit for bit: the C selections (csrc/gc_select.c) must give
the training path the values and gradients it had with torch.where, so trainings keep their bytes."""
import pytest
import torch

from gcpipe.nn.select import ILLEGAL_LOGIT, candidate, mask_logits

# Signed zeros, tiny and huge values, both sides of 0: where the branch and h + 0.5 could go wrong.
EDGES = [0.0, -0.0, 1e-30, -1e-30, 1e-8, -1e-8, 3e-7, -3e-7, 1e30, -1e30, 0.5, -0.5, 88.0, -88.0]


def _bits(t):
    return t.contiguous().view(torch.int32)


def _gates(rows, seed=0):
    """A [rows, 3H] projection with H = 16 and its sigmoid; h = the first H columns (row stride 3H)."""
    c = torch.randn(rows, 48, generator=torch.Generator().manual_seed(seed)) * 3
    c[0, :len(EDGES)] = torch.tensor(EDGES)
    return c, torch.sigmoid(c)


def test_candidate_equals_where_on_strided_rows_forward_and_backward():
    c, gates = _gates(64)
    reference_h = c[:, :16].clone().requires_grad_()
    reference_sigmoid = gates[:, :16].clone().requires_grad_()
    expected = torch.where(reference_h >= 0, reference_h + 0.5, reference_sigmoid)
    leaf = c.clone().requires_grad_()
    leaf_gates = gates.clone().requires_grad_()
    got = candidate(leaf[:, :16], leaf_gates[:, :16])      # views of row stride 48
    assert torch.equal(_bits(got), _bits(expected))
    assert got.detach()[0, :3].tolist() == [0.5, 0.5, 0.5]   # h = 0, -0, 1e-30
    grad = torch.randn(64, 16, generator=torch.Generator().manual_seed(1))
    grad[0, :4] = torch.tensor([-0.0, 0.0, -0.0, 0.0])
    expected.backward(grad)
    got.backward(grad)
    assert torch.equal(_bits(leaf.grad[:, :16]), _bits(reference_h.grad))
    assert torch.equal(_bits(leaf_gates.grad[:, :16]), _bits(reference_sigmoid.grad))
    assert not leaf.grad[:, 16:].any() and not leaf_gates.grad[:, 16:].any()


def test_candidate_over_time_major_segments_forward_and_backward():
    """As the training forward calls it: h a [T, B, H] view of a [T, B, 3H] tensor (row stride 3H),
    its sigmoid a contiguous tensor (row stride H), the gradient not contiguous."""
    c = torch.randn(5, 7, 48, generator=torch.Generator().manual_seed(2))
    grad = torch.randn(7, 5, 16, generator=torch.Generator().manual_seed(5)).transpose(0, 1)
    results = []
    for select in (candidate, lambda h, sig: torch.where(h >= 0, h + 0.5, sig)):
        leaf = c.clone().requires_grad_()
        h = leaf[..., :16]
        out = select(h, torch.sigmoid(h))
        out.backward(grad)
        results.append((_bits(out), _bits(leaf.grad)))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


def test_candidate_falls_back_to_torch_for_other_dtypes_and_layouts():
    h = torch.tensor([[-1.0, 0.0, 2.0]], dtype=torch.float64)
    assert candidate(h, torch.sigmoid(h)).tolist() == [[pytest.approx(1 / (1 + 2.718281828459045)), 0.5, 2.5]]
    c = torch.randn(4, 6, 48, generator=torch.Generator().manual_seed(3))
    for h in (c.transpose(0, 1)[..., :16],                        # rows not at one stride: torch.where
              c.view(-1).as_strided((3, 1, 4, 8), (7, 7, 40, 1))):   # nor here, past a size-1 dimension
        sig = torch.sigmoid(h)
        assert torch.equal(candidate(h, sig), torch.where(h >= 0, h + 0.5, sig))


@pytest.mark.parametrize("layout", ["rows", "batch-major view of time-major"])
def test_mask_logits_equals_where_forward_and_backward(layout):
    generator = torch.Generator().manual_seed(4)
    if layout == "rows":     # the rollout: [rows, 256] of a [rows, 257] decoder output
        out = torch.randn(32, 257, generator=generator).requires_grad_()
        logits = out[:, :256]
    else:                    # the update: [B, T, 256] of a [T, B, 257] decoder output
        out = torch.randn(6, 5, 257, generator=generator).requires_grad_()
        logits = out.transpose(0, 1)[..., :256]
    mask = torch.rand(logits.shape, generator=generator) < 0.1
    reference_out = out.detach().clone().requires_grad_()
    reference = reference_out[:, :256] if layout == "rows" else reference_out.transpose(0, 1)[..., :256]
    expected = torch.where(mask, reference, ILLEGAL_LOGIT)
    got = mask_logits(logits, mask)
    assert got.is_contiguous() and torch.equal(_bits(got), _bits(expected))
    assert float(got.detach()[~mask].max()) == -10000.0 and torch.equal(got[mask], logits[mask])
    grad = torch.randn(tuple(reversed(logits.shape)), generator=generator).permute(*reversed(range(logits.dim())))
    expected.backward(grad)
    got.backward(grad)
    assert torch.equal(_bits(out.grad), _bits(reference_out.grad))
    passed = out.grad[:, :256] if layout == "rows" else out.grad.transpose(0, 1)[..., :256]
    assert torch.equal(passed[mask], grad[mask]) and not passed[~mask].any()   # illegal entries pass nothing


def test_mask_logits_without_grad_and_fallback():
    logits = torch.tensor([[1.0, 2.0, 3.0]])
    mask = torch.tensor([[True, False, True]])
    with torch.inference_mode():
        assert mask_logits(logits, mask).tolist() == [[1.0, -10000.0, 3.0]]
    assert mask_logits(logits.double(), mask).tolist() == [[1.0, -10000.0, 3.0]]   # torch.where
