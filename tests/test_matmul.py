"""The training path's fixed-order matrix products (csrc/gc_gemm.c, gcpipe/train/matmul.py) and
Muon's Newton–Schulz iteration on them: the summation order against hand-computed sums, every
code path and row split to the same bits, gradients against float64 autograd."""
import pytest
import torch

from gcpipe._engine import ffi, lib
from gcpipe.errors import UserError
from gcpipe.nn.inference import SIMD, best_simd, simd_code
from gcpipe.nn.select import floats
from gcpipe.train import matmul as fixed
from gcpipe.train.muon import newton_schulz, orthogonalise

PATHS = [name for name in ("scalar", "avx2", "avx512") if SIMD[name] <= SIMD[best_simd()]]

pytestmark = pytest.mark.usefixtures("one_thread")   # tests/conftest.py


@pytest.fixture
def path(request, monkeypatch):
    """Runs the test's products on one code path."""
    monkeypatch.setattr(fixed, "SIMD_PATH", SIMD[request.param])
    return request.param


def on_every_path(monkeypatch, product):
    """product() on each code path this CPU runs."""
    results = {}
    for name in PATHS:
        monkeypatch.setattr(fixed, "SIMD_PATH", SIMD[name])
        results[name] = product()
    return results


@pytest.mark.parametrize("path", PATHS, indirect=True)
def test_each_element_is_its_bias_then_one_fused_multiply_add_per_input_in_order(path):
    # 2^24 + 1 is not a float32: summed in order, (0 + 2^24) + 1 rounds back to 2^24, then - 2^24
    # gives 0, where the reverse or a pairwise order keeps the 1.  Forty columns reach every path's masked edge.
    a = torch.tensor([[2.0 ** 24, 1.0, -(2.0 ** 24)], [1.0, 2.0 ** 24, -(2.0 ** 24)]])
    b = torch.ones(3, 40)
    assert fixed.matmul(a, b).tolist() == [[0.0] * 40, [0.0] * 40]
    # The bias comes first: (2^24 + 1) rounds to 2^24, then - 2^24 leaves 0 (added last, it gives 1).
    bias = torch.full((40,), 2.0 ** 24)
    assert fixed.matmul(torch.tensor([[1.0, -(2.0 ** 24)]]), torch.ones(2, 40), bias).tolist() == [[0.0] * 40]
    # One rounding per step: (1 + 2^-12)^2 - 1 is 2^-11 + 2^-24 exactly, fused onto the bias -1;
    # with the product rounded first (to 1 + 2^-11) it would be 2^-11.
    one = 1.0 + 2.0 ** -12
    out = fixed.matmul(torch.tensor([[one]]), torch.tensor([[one]]), torch.tensor([-1.0]))
    assert out.item() == 2.0 ** -11 + 2.0 ** -24


def test_small_products_are_exact():
    a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]])
    assert fixed.matmul(a, b).tolist() == [[7.0, -1.0], [16.0, -1.0]]
    assert fixed.matmul(a, b, torch.tensor([0.5, 10.0])).tolist() == [[7.5, 9.0], [16.5, 9.0]]
    assert fixed.matmul(a.T, a[:, :2]).tolist() == [[17.0, 22.0], [22.0, 29.0], [27.0, 36.0]]   # a strided view


@pytest.mark.parametrize("path", PATHS, indirect=True)
def test_a_product_over_no_inputs_is_its_bias(path):
    # (An empty sum: the weights' and bias's gradients over an empty minibatch.)
    assert fixed.matmul(torch.empty(3, 0), torch.empty(0, 40), torch.arange(40.0)).tolist() == [list(range(40))] * 3
    assert fixed.matmul(torch.empty(2, 0), torch.empty(0, 5)).tolist() == [[0.0] * 5] * 2


@pytest.mark.parametrize("product", [fixed.matmul, fixed.matmul_bf16])
@pytest.mark.parametrize("bias", [torch.zeros(3), torch.zeros(5), torch.zeros(1, 4)])
def test_a_bias_of_another_length_than_the_columns_is_refused(product, bias):
    # (The C products read one bias value per column: a short bias would be read past its end.)
    if product is fixed.matmul_bf16 and not fixed.bf16_runs_here():
        pytest.skip("bfloat16 products need x86-64 with AVX2 and FMA")
    shape = ", ".join(map(str, bias.shape))
    with pytest.raises(ValueError, match=rf"a bias of one value per column\): torch.float32 \(2, 3\) @ "
                                         rf"torch.float32 \(3, 4\) \+ torch.float32 \({shape},?\)$"):
        product(torch.ones(2, 3), torch.ones(3, 4), bias)


def test_every_code_path_gives_the_same_bits_at_every_shape(monkeypatch):
    generator = torch.Generator().manual_seed(3)
    # Rows around the 6-row tiles and the 64 from which the vector paths pack B into panels,
    # columns around the 8/16-column vectors (below 64 rows AVX2 reads the last N mod 8 in place),
    # AVX2's 16-column panels with a last panel of 1-7 or 9-15 columns, AVX-512's 64-column panels
    # with every vector count at their edge, and a K long enough to be summed in several passes (the
    # weights' gradients), which start from the bias (on AVX2's padded last panel too).
    for rows, inner, cols in [(1, 1, 1), (5, 7, 9), (7, 33, 17), (13, 120, 40), (6, 1500, 33), (50, 128, 257),
                              (25, 1100, 47), (64, 20, 64), (70, 9, 100), (63, 50, 130), (80, 1030, 200),
                              (64, 40, 9), (67, 128, 257), (70, 1030, 203), (65, 1100, 13)]:
        a = torch.randn(inner, rows, generator=generator).T          # a transposed view
        b = torch.randn(inner, cols, generator=generator)
        bias = torch.randn(cols, generator=generator)
        results = on_every_path(monkeypatch, lambda: (fixed.matmul(a, b), fixed.matmul(a, b, bias)))
        reference = (a.double() @ b.double()).float()
        for plain, biased in results.values():
            assert torch.equal(plain, results[PATHS[0]][0]) and torch.equal(biased, results[PATHS[0]][1])
            assert torch.allclose(plain, reference, rtol=1e-4, atol=1e-4 * inner ** 0.5)


def test_a_products_rows_do_not_depend_on_how_calls_split_them():
    generator = torch.Generator().manual_seed(4)
    a, b = torch.randn(100, 70, generator=generator), torch.randn(70, 45, generator=generator)
    whole = fixed.matmul(a, b)
    parts = torch.empty(100, 45)
    for first, end in [(0, 5), (5, 6), (6, 100)]:     # off the 6-row tiles; only the last packs B
        lib.gc_gemm(fixed.SIMD_PATH, 100, 45, 70, floats(a), 70, 1, floats(b), 45, ffi.NULL, floats(parts), 45,
                    first, end)
    assert torch.equal(parts, whole)
    torch.set_num_threads(2)                          # (the one_thread fixture restores the count)
    assert torch.equal(fixed.matmul(a, b), whole)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "strided input, no input gradient"])
def test_fixed_order_linear_gives_the_layers_gradients(bias, layout):
    generator = torch.Generator().manual_seed(5)
    layer = torch.nn.Linear(24, 40, bias=bias)
    x = torch.randn(3, 7, 24, generator=generator)
    if layout == "contiguous":
        x.requires_grad_()
    else:
        x = torch.randn(7, 3, 24, generator=generator).transpose(0, 1)   # as the encoder's observations
    weights = torch.randn(3, 7, 40, generator=generator)
    # A weighted sum, and a plain one whose gradient arrives expanded (stride 0).
    ((fixed.linear(layer, x) * weights).sum() + fixed.linear(layer, x).sum()).backward()
    mine = ([x.grad] if x.requires_grad else []) + [p.grad for p in layer.parameters()]
    x64 = x.detach().double().requires_grad_(x.requires_grad)
    params64 = [p.detach().double().requires_grad_() for p in layer.parameters()]
    out64 = torch.nn.functional.linear(x64, *params64)
    ((out64 * weights.double()).sum() + out64.sum()).backward()
    wanted = ([x64.grad] if x.requires_grad else []) + [p.grad for p in params64]
    assert len(mine) == len(wanted) == (1 if x.requires_grad else 0) + (2 if bias else 1)
    for got, want in zip(mine, wanted):
        assert got.shape == want.shape and torch.allclose(got.double(), want, rtol=1e-5, atol=1e-5)


def test_gcpipe_simd_names_a_path_this_cpu_runs(monkeypatch):
    monkeypatch.setenv("GCPIPE_SIMD", "scalar")
    assert simd_code() == SIMD["scalar"]
    monkeypatch.setenv("GCPIPE_SIMD", "sse9")
    with pytest.raises(UserError, match="^unknown code path 'sse9'; choose one of scalar, avx2, avx512$"):
        simd_code()


def test_the_c_newton_schulz_is_the_iteration_on_every_path(monkeypatch):
    generator = torch.Generator().manual_seed(6)
    matrices = [torch.randn(rows, cols, generator=generator) for rows, cols in [(384, 128), (128, 120), (7, 30)]]
    results = on_every_path(monkeypatch, lambda: orthogonalise(matrices))
    torch.set_num_threads(2)                          # the matrices dealt to two threads
    results["two threads"] = orthogonalise(matrices)
    for outputs in results.values():
        for got, first, matrix in zip(outputs, results[PATHS[0]], matrices):
            assert torch.equal(got, first)
            assert torch.allclose(got.double(), newton_schulz(matrix.double()), atol=2e-5)


def _newton_schulz_in_fixed_order(matrix: torch.Tensor) -> torch.Tensor:
    """csrc/gc_gemm.c's iteration step by step in torch: the norm summed in float64 in index order,
    each product a full fixed-order `matmul`, each elementwise operation one IEEE rounding."""
    import numpy as np
    from gcpipe.train.muon import NEWTON_SCHULZ_COEFFICIENTS, NEWTON_SCHULZ_EPS
    wide = matrix.shape[0] <= matrix.shape[1]
    x = (matrix if wide else matrix.T).contiguous()
    total = float(np.cumsum(x.double().numpy().ravel() ** 2)[-1])
    x = x / (torch.tensor(total ** 0.5, dtype=torch.float32) + torch.tensor(NEWTON_SCHULZ_EPS, dtype=torch.float32))
    for a, b, c in torch.tensor(NEWTON_SCHULZ_COEFFICIENTS, dtype=torch.float32):
        gram = fixed.matmul(x, x.T.contiguous())
        p = b * gram + fixed.matmul(c * gram, gram)
        x = a * x + fixed.matmul(p, x)
    return x if wide else x.T


@pytest.mark.parametrize("path", PATHS, indirect=True)
def test_the_c_newton_schulz_mirrors_the_gram_to_the_bits_of_the_whole_product(path):
    # gc_newton_schulz computes X X^T on and above the diagonal and mirrors it: sizes around its
    # 12-row blocks, wide and tall.
    generator = torch.Generator().manual_seed(11)
    for rows, cols in [(128, 384), (257, 128), (13, 40), (25, 24), (1, 5)]:
        matrix = torch.randn(rows, cols, generator=generator)
        assert torch.equal(orthogonalise([matrix])[0], _newton_schulz_in_fixed_order(matrix))


def byte_rows(rows: int, inner: int, generator: torch.Generator) -> torch.Tensor:
    """Observation-like bytes: about a fifth nonzero, values 1-63."""
    values = torch.randint(1, 64, (rows, inner), generator=generator, dtype=torch.uint8)
    return values * (torch.rand(rows, inner, generator=generator) < 0.2)


def test_a_byte_input_layer_gives_the_float_products_bits_on_every_path_and_thread_count(monkeypatch):
    """ByteInputLinear sums over the nonzero bytes only (gc_gemm_bytes, gc_gemm_bytes_grad): its
    output and weight and bias gradients are FixedOrderLinear's over the bytes cast to float32.
    Shapes around the vectors' edges, more inputs than a k block (256) and more rows than a block of
    the gradient's bins (256); two threads split the output's rows and the gradient's inputs."""
    generator = torch.Generator().manual_seed(11)
    for rows, inner, cols in [(1, 1, 1), (5, 7, 9), (37, 120, 128), (300, 300, 50), (600, 33, 17)]:
        x = byte_rows(rows, inner, generator)
        weight, bias = torch.randn(cols, inner, generator=generator), torch.randn(cols, generator=generator)
        grad = torch.randn(rows, cols, generator=generator)

        def forward_backward(layer, inputs):
            w, b = weight.clone().requires_grad_(), bias.clone().requires_grad_()
            out = layer(inputs, w, b)
            out.backward(grad)
            return out.detach(), w.grad, b.grad

        expected = forward_backward(lambda i, w, b: fixed.FixedOrderLinear.apply(i, w, b, False), x.float())
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results = on_every_path(monkeypatch, lambda: forward_backward(fixed.ByteInputLinear.apply, x))
            for name, got in results.items():
                assert all(torch.equal(g, e) for g, e in zip(got, expected)), (rows, inner, cols, name, threads)


def test_a_byte_input_layer_skips_zero_bytes_so_a_zero_bias_keeps_its_sign():
    # The one documented difference from the float products: w * 0 is never added, so a -0 bias
    # stays -0 on a row of zero bytes (as in the play-time step's encoder), where +0 is added to it
    # in the float products (-0 + +0 = +0).
    weight, bias = torch.ones(2, 3), torch.tensor([-0.0, 1.0])
    x = torch.tensor([[0, 0, 0], [0, 2, 0]], dtype=torch.uint8)
    out = fixed.ByteInputLinear.apply(x, weight, bias)
    assert out.tolist() == [[0.0, 1.0], [2.0, 3.0]] and torch.signbit(out[0, 0])
    assert not torch.signbit(fixed.FixedOrderLinear.apply(x.float(), weight, bias, False)[0, 0])


def test_a_byte_input_layer_refuses_shapes_that_do_not_chain():
    # The C products would read K inputs and N bias values whatever the tensors hold.
    x = torch.zeros(3, 5, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"^ByteInputLinear takes bytes \[\.\.\., K\] and a weight \[N, K\]: "
                                         r"\(3, 5\) and \(4, 6\)$"):
        fixed.ByteInputLinear.apply(x, torch.zeros(4, 6), None)
    with pytest.raises(ValueError, match=r"\(3, 5\) and \(4, 5\) \+ bias \(3,\)$"):
        fixed.ByteInputLinear.apply(x, torch.zeros(4, 5), torch.zeros(3))
