"""The C network step (csrc/gc_net.c) for play: equal to the torch model within 1e-5, the same bits
on every code path and batch split, and bit for bit the golden outputs in tests/golden/, so a
platform whose arithmetic differs turns the suite red."""
from pathlib import Path

import numpy as np
import pytest
import torch

from gcpipe._engine import ffi, lib
from gcpipe.engine import PASS_ACTION, Game
from gcpipe.engine.bots import Bot, BotSpec
from gcpipe.errors import UserError
from gcpipe.nn.inference import OUTPUTS, SIMD, CompiledNet, best_simd
from gcpipe.nn.model import MinGRUPolicy

GOLDEN = Path(__file__).with_name("golden") / "net_step.txt"
PATHS = [name for name in ("scalar", "avx2", "avx512") if SIMD[name] <= SIMD[best_simd()]]


def _hashed_model(bias: bool) -> MinGRUPolicy:
    """A network whose weights are multiples of 2^-13 in [-0.25, 0.25] from an integer hash of their
    position: the same floats on every machine and library version (unlike a seeded generator)."""
    model = MinGRUPolicy(bias=bias)
    counter = 0
    with torch.no_grad():
        for parameter in model.parameters():
            index = np.arange(counter, counter + parameter.numel(), dtype=np.uint64)
            counter += parameter.numel()
            mixed = (index * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)
            values = ((mixed % np.uint64(4097)).astype(np.int64) - 2048).astype(np.float32) / 8192.0
            parameter.copy_(torch.from_numpy(values.reshape(parameter.shape)))
    return model.eval()


def _game_observations(plies: int, seed: int) -> np.ndarray:
    """Observations before each ply of a greedy-vs-greedy game (restarted when it ends)."""
    game, bot, rows = Game(seed), Bot(BotSpec("greedy")), []
    while len(rows) < plies:
        if game.is_terminal():
            game = Game(game.rng_state)
        rows.append(game.observation())
        game.apply_action(bot.choose(game))
    return np.array(rows)


def _run(net: CompiledNet, obs: np.ndarray, groups) -> np.ndarray:
    """Outputs [T, slots, 257] of stepping every slot over obs [T, slots, 120], in the given slot groups."""
    steps, slots = obs.shape[:2]
    states = net.new_states(slots)
    out = np.zeros((steps, slots, OUTPUTS), np.float32)
    for t in range(steps):
        for group in groups:
            rows = np.zeros((len(group), OUTPUTS), np.float32)
            net.step(states, np.asarray(group, np.int32), np.ascontiguousarray(obs[t, group]), rows)
            out[t, group] = rows
    return out


def _slot_observations(steps: int, slots: int) -> np.ndarray:
    """obs [steps, slots, 120]: slot s follows its own greedy game."""
    return np.stack([_game_observations(steps, 100 + s) for s in range(slots)], axis=1)


@pytest.mark.parametrize("bias", [False, True])
def test_c_step_equals_the_torch_model_step(bias):
    model = MinGRUPolicy(bias=bias, generator=torch.Generator().manual_seed(11))
    if bias:
        with torch.no_grad():
            model.encoder.bias.uniform_(-0.5, 0.5)
            model.decoder.bias.uniform_(-0.5, 0.5)
    obs = _slot_observations(40, 6)
    out = _run(CompiledNet(model), obs, [np.arange(6)])
    state = model.initial_state(6)
    with torch.no_grad():
        for t in range(len(obs)):
            logits, value, state = model.step(torch.from_numpy(obs[t]), state)
            assert np.abs(out[t, :, :256] - logits.numpy()).max() < 1e-5
            assert np.abs(out[t, :, 256] - value.numpy()).max() < 1e-5


# More rows than two of gc_net_step's chunks (32 rows each), the last chunk's last block part padding.
MANY_SLOTS = 75


@pytest.mark.parametrize("simd", PATHS)
def test_every_code_path_and_batch_split_gives_the_same_bits(simd):
    model = _hashed_model(bias=True)
    obs = _slot_observations(12, 9)
    reference = _run(CompiledNet(model, "scalar"), obs, [np.arange(9)])
    net = CompiledNet(model, simd)
    assert net.simd == simd
    for groups in ([np.arange(9)], [[s] for s in range(9)], [[8, 1, 3], [0], [7, 2, 6, 5, 4]]):
        assert np.array_equal(_run(net, obs, groups).view(np.uint32), reference.view(np.uint32))


@pytest.mark.parametrize("simd", PATHS)
def test_a_batch_of_several_chunks_gives_each_row_its_own_bits(simd):
    model = _hashed_model(bias=True)
    obs = _slot_observations(4, MANY_SLOTS)
    net = CompiledNet(model, simd)
    one_by_one = _run(net, obs, [[s] for s in range(MANY_SLOTS)])
    shuffled = np.random.default_rng(3).permutation(MANY_SLOTS)
    for groups in ([np.arange(MANY_SLOTS)], [shuffled[:33], shuffled[33:]]):
        assert np.array_equal(_run(net, obs, groups).view(np.uint32), one_by_one.view(np.uint32))


@pytest.mark.parametrize("simd", PATHS)
def test_rows_without_logits_get_the_same_values_and_states(simd):
    # Rows flagged as needing no logits (the waiting slots in training) skip the decoder's block
    # but must give the bits of a full step: their pass logit and value, and their states, for
    # every pattern of flags (the flagged rows change which rows share a decoder block).
    model, (steps, slots) = _hashed_model(bias=True), (12, MANY_SLOTS)
    obs = _slot_observations(steps, slots)
    net, rows = CompiledNet(model, simd), np.arange(slots, dtype=np.int32)
    flags = np.random.default_rng(5).integers(0, 2, (steps, slots)).astype(np.uint8)
    flags[0] = 0
    states, reference_states = net.new_states(slots), net.new_states(slots)
    got, reference = (np.full((steps, slots, OUTPUTS), np.nan, np.float32) for _ in range(2))
    for t in range(steps):
        net.step(states, rows, np.ascontiguousarray(obs[t]), got[t], flags[t])
        net.step(reference_states, rows, np.ascontiguousarray(obs[t]), reference[t])
        assert np.array_equal(states.view(np.uint32), reference_states.view(np.uint32))
    full = flags.astype(bool)
    assert np.array_equal(got[full].view(np.uint32), reference[full].view(np.uint32))
    values = [PASS_ACTION, OUTPUTS - 1]
    assert np.array_equal(got[~full][:, values].view(np.uint32), reference[~full][:, values].view(np.uint32))
    assert not got[~full][:, :PASS_ACTION].any()


def _golden_outputs() -> np.ndarray:
    return _run(CompiledNet(_hashed_model(bias=True)), _slot_observations(8, 2), [np.arange(2)])


def test_outputs_are_the_golden_bits():
    """tests/golden/net_step.txt: every output of 8 steps of 2 games, as float.hex of the float32.
    Regenerate (only after a deliberate change of the arithmetic) with
    `python -c "import tests.test_net_inference as t; t.write_golden()"`."""
    expected = [float.fromhex(line) for line in GOLDEN.read_text().split()]
    got = _golden_outputs().ravel()
    assert len(expected) == got.size
    mismatches = np.flatnonzero(np.array(expected, np.float32).view(np.uint32) != got.view(np.uint32))
    assert not len(mismatches), f"{len(mismatches)} outputs differ, first at flat index {mismatches[0]}"


def write_golden() -> None:
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text("\n".join(float(v).hex() for v in _golden_outputs().ravel()) + "\n")


def test_deterministic_exp_is_within_two_ulp():
    xs = np.linspace(-87, 88, 20001, dtype=np.float32)
    ours = np.array([lib.gc_expf(float(x)) for x in xs], np.float64)
    exact = np.exp(xs.astype(np.float64))
    ulp = np.spacing(exact.astype(np.float32)).astype(np.float64)
    assert (np.abs(ours - exact) <= 2 * ulp).all()
    assert lib.gc_expf(0.0) == 1.0 and lib.gc_expf(-1000.0) == lib.gc_expf(-87.3) > 0


def test_unsupported_shapes_and_paths_are_refused():
    with pytest.raises(UserError, match="H=24"):
        CompiledNet(MinGRUPolicy(hidden=24))
    with pytest.raises(UserError, match="unknown code path"):
        CompiledNet(MinGRUPolicy(), "sse9")
    assert lib.GC_NET_OUTPUTS == 257 and ffi.sizeof("gc_net") > 0



_GUARDED_STEPS = """
import ctypes, mmap, sys
import numpy as np
from gcpipe._engine import ffi
from gcpipe.nn.inference import CompiledNet

page = mmap.PAGESIZE
area = mmap.mmap(-1, 2 * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
start = ctypes.addressof(ctypes.c_char.from_buffer(area))
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
assert libc.mprotect(start + page, page, 0) == 0          # PROT_NONE
rng = np.random.default_rng(3)
for hidden in (16, 48, 80):
    arrays = {"encoder": rng.normal(size=(hidden, 120)), "encoder_bias": rng.normal(size=hidden),
              "decoder": rng.normal(size=(257, hidden)), "decoder_bias": rng.normal(size=257),
              "gru0": rng.normal(size=(3 * hidden, hidden))}
    for simd in sys.argv[1:]:
        net = CompiledNet.from_arrays({k: v.astype(np.float32) for k, v in arrays.items()}, simd)
        guarded = np.frombuffer(area, np.float32, count=hidden, offset=page - 4 * hidden)
        guarded[:] = net._arrays["encoder_bias"]
        net.c_net.encoder_bias = ffi.from_buffer("float[]", guarded)
        net.step(net.new_states(1), np.zeros(1, np.int32), np.ones((1, 120), np.uint8), np.zeros((1, 257), np.float32))
        print(hidden, simd, flush=True)
"""


def test_the_step_reads_no_weight_past_its_end():
    """Every accepted hidden size (a multiple of 16) on every code path, with the encoder bias right
    before an unreadable page: a read past its H floats ends the process."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _GUARDED_STEPS, *PATHS], capture_output=True, text=True)
    assert run.stdout.split() == [str(v) for h in (16, 48, 80) for p in PATHS for v in (h, p)], run.stderr[-2000:]
