"""Checkpoint files against model.md §2: exact sizes and tensor offsets of the three layouts,
conversions, and the errors a user gets for files that are not checkpoints."""
import hashlib
import os
import warnings

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from gcpipe.cli import app
from gcpipe.errors import UserError
from gcpipe.io import sha256_file
from gcpipe.nn import checkpoint as ckpt
from gcpipe.nn.model import MinGRUPolicy

# (name, first float, float count) straight from the table of model.md §2.
OFFSETS = {
    "legacy": [("enc.W", 0, 15360), ("enc.b", 15360, 128), ("dec.W", 15488, 32768), ("dec.b", 48256, 256),
               ("gru0.W", 48512, 49152), ("gru1.W", 97664, 49152)],
    "5c": [("enc.W", 0, 15360), ("dec.W", 15360, 32896), ("gru0.W", 48256, 49152), ("gru1.W", 97408, 49152)],
    "5c-bias": [("enc.W", 0, 15360), ("enc.b", 15360, 128), ("dec.W", 15488, 32896), ("dec.b", 48384, 264),
                ("gru0.W", 48648, 49152), ("gru1.W", 97800, 49152)],
}


def _known_model(bias: bool) -> MinGRUPolicy:
    """Every float distinct and tied to its tensor: tensor t holds t*1000 + i/1e5 (i = flat index)."""
    model = MinGRUPolicy(bias=bias)
    with torch.no_grad():
        named = [model.encoder.weight, model.decoder.weight, model.grus[0].weight, model.grus[1].weight]
        if bias:
            named += [model.encoder.bias, model.decoder.bias]
        for t, tensor in enumerate(named, start=1):
            tensor.copy_((t * 1000 + torch.arange(tensor.numel(), dtype=torch.float64) / 1e5).reshape(tensor.shape))
    return model


def _floats(path) -> np.ndarray:
    return np.fromfile(path, dtype="<f4")


def _logits(model, steps=3, seed=0):
    rng = np.random.default_rng(seed)
    obs = torch.from_numpy(rng.integers(0, 3, size=(steps, 8, 120)).astype(np.uint8))
    state, out = model.initial_state(8), []
    with torch.no_grad():
        for t in range(steps):
            logits, value, state = model.step(obs[t], state)
            out.append((logits, value))
    return out


def test_layout_sizes():
    assert ckpt.LAYOUTS == {"legacy": 587264, "5c": 586240, "5c-bias": 587808}


@pytest.mark.parametrize("layout", ["legacy", "5c", "5c-bias"])
def test_tensor_offsets_match_the_spec_table(tmp_path, layout):
    model = _known_model(bias=layout != "5c")
    path = tmp_path / "m.bin"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ckpt.CheckpointWarning)
        ckpt.save(model, path, layout)
    floats = _floats(path)
    assert path.stat().st_size == ckpt.LAYOUTS[layout] == 4 * sum(n for _, _, n in OFFSETS[layout])
    tensors = {"enc.W": model.encoder.weight, "gru0.W": model.grus[0].weight, "gru1.W": model.grus[1].weight,
               "dec.W": model.decoder.weight, "enc.b": model.encoder.bias, "dec.b": model.decoder.bias}
    for name, start, count in OFFSETS[layout]:
        expected = tensors[name].detach().numpy().ravel()[:count]   # legacy keeps dec rows/biases 0..255
        if name == "dec.b" and layout == "5c-bias":
            expected = np.concatenate([expected, np.zeros(7, np.float32)])
        np.testing.assert_array_equal(floats[start:start + count], expected, err_msg=name)
    assert {name: offset for name, (offset, _) in ckpt.tensor_offsets(layout).items()} == \
           {name: 4 * start for name, start, _ in OFFSETS[layout]}


def test_5c_bias_decoder_bias_holds_value_bias_then_seven_zero_pads(tmp_path):
    model = _known_model(bias=True)
    ckpt.save(model, tmp_path / "m.bin", "5c-bias")
    dec_b = _floats(tmp_path / "m.bin")[48384:48384 + 264]
    assert dec_b[256] == np.float32(6000 + 256 / 1e5)
    assert not dec_b[257:].any()


@pytest.mark.parametrize("layout", ["legacy", "5c", "5c-bias"])
def test_save_load_round_trip(tmp_path, layout):
    model = _known_model(bias=layout != "5c")
    if layout == "legacy":
        with torch.no_grad():
            model.decoder.weight[256] = 0
            model.decoder.bias[256] = 0
    ckpt.save(model, tmp_path / "m.bin", layout)
    loaded = ckpt.load(tmp_path / "m.bin")
    assert (loaded.layout, loaded.size) == (layout, ckpt.LAYOUTS[layout])
    assert loaded.has_value_head == (layout != "legacy") and loaded.full_turn == (layout != "legacy")
    assert not loaded.model.training
    for mine, theirs in zip(model.state_dict().values(), loaded.model.state_dict().values()):
        assert torch.equal(mine, theirs)
    assert ckpt.detect_layout(tmp_path / "m.bin") == layout


@pytest.mark.parametrize("layout", ["legacy", "5c", "5c-bias"])
def test_the_arrays_play_reads_are_the_torch_modules_weights(tmp_path, layout):
    """Play builds the C step from the file's arrays (no torch); training and conversions use the
    module: the two are the same floats in every layout (legacy: a zero value row)."""
    from gcpipe.nn.inference import net_arrays

    model = _known_model(bias=layout != "5c")
    if layout == "legacy":          # no value row in the file
        with torch.no_grad():
            model.decoder.weight[256] = 0
            model.decoder.bias[256] = 0
    ckpt.save(model, tmp_path / "m.bin", layout)
    loaded = ckpt.load(tmp_path / "m.bin")
    expected = net_arrays(model)
    assert list(loaded.net) == list(expected)
    for name, array in expected.items():
        assert loaded.net[name].dtype == np.float32 and np.array_equal(loaded.net[name], array), name
    assert "model" not in loaded.__dict__          # the torch module is built only when asked for


def test_a_match_of_net_and_search_players_never_imports_torch(tmp_path):
    import subprocess
    import sys

    ckpt.save(MinGRUPolicy(generator=torch.Generator().manual_seed(3)), tmp_path / "a.bin", "5c")
    ckpt.save(_known_model(bias=True), tmp_path / "b.bin", "5c-bias")
    script = f"""
import sys
from gcpipe.match import match
result = match("net:{tmp_path / 'a.bin'}", "search:{tmp_path / 'b.bin'}:2", 2, out="{tmp_path / 'g.jsonl'}",
               workers=1, progress=False)
print(result.summary["games"], "torch" in sys.modules)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["2", "False"], run.stderr[-2000:]


def test_legacy_to_5c_bias_keeps_logits_and_adds_a_zero_value_row(tmp_path):
    legacy = _known_model(bias=True)
    with torch.no_grad():
        legacy.encoder.weight.mul_(1e-4)          # keep the activations in a sane range
        legacy.decoder.weight[256] = 0
        legacy.decoder.bias[256] = 0
    ckpt.save(legacy, tmp_path / "legacy.bin", "legacy")
    converted = ckpt.convert(tmp_path / "legacy.bin", tmp_path / "5cb.bin", "5c-bias")
    assert converted.layout == "5c-bias" and converted.has_value_head
    assert not converted.model.decoder.weight[256].any() and converted.model.decoder.bias[256] == 0
    original = ckpt.load(tmp_path / "legacy.bin").model
    for (a, _), (b, value) in zip(_logits(original), _logits(converted.model)):
        assert torch.equal(a, b) and not value.any()


def test_legacy_with_biases_is_refused_for_the_bias_free_layout(tmp_path):
    with pytest.warns(ckpt.CheckpointWarning):
        ckpt.save(_known_model(bias=True), tmp_path / "legacy.bin", "legacy")
    with pytest.raises(UserError, match="nonzero biases.*5c-bias"):
        ckpt.convert(tmp_path / "legacy.bin", tmp_path / "5c.bin", "5c")
    assert not (tmp_path / "5c.bin").exists()


def test_5c_to_legacy_and_back_keeps_logits_and_warns_about_the_value_head(tmp_path):
    model = MinGRUPolicy(generator=torch.Generator().manual_seed(1))
    ckpt.save(model, tmp_path / "a.bin", "5c")
    with pytest.warns(ckpt.CheckpointWarning, match="value head"):
        legacy = ckpt.convert(tmp_path / "a.bin", tmp_path / "legacy.bin", "legacy")
    assert legacy.layout == "legacy" and not legacy.has_value_head and not legacy.full_turn
    back = ckpt.convert(tmp_path / "legacy.bin", tmp_path / "b.bin", "5c")
    for (a, value_a), (b, value_b), (c, _) in zip(_logits(model), _logits(back.model), _logits(legacy.model)):
        assert torch.equal(a, b) and torch.equal(a, c)
        assert value_a.any() and not value_b.any()
    # Legacy stores the zero biases explicitly; apart from them and the value row, the floats agree.
    a, b = _floats(tmp_path / "a.bin"), _floats(tmp_path / "b.bin")
    np.testing.assert_array_equal(a[:15360 + 256 * 128], b[:15360 + 256 * 128])
    assert not b[15360 + 256 * 128:15360 + 257 * 128].any()
    np.testing.assert_array_equal(a[48256:], b[48256:])


def test_load_reports_sha256_and_never_modifies_the_file(tmp_path):
    path = tmp_path / "m.bin"
    ckpt.save(MinGRUPolicy(), path, "5c")
    before, stat = path.read_bytes(), path.stat()
    loaded = ckpt.load(path)
    assert loaded.sha256 == hashlib.sha256(before).hexdigest() == sha256_file(path)
    assert path.read_bytes() == before and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert ckpt.load(path, expected_sha256=loaded.sha256.upper()).sha256 == loaded.sha256
    with pytest.raises(UserError, match=f"has SHA-256 {loaded.sha256}, expected 0+$"):
        ckpt.load(path, expected_sha256="0" * 64)


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path):
    ckpt.save(MinGRUPolicy(), tmp_path / "m.bin", "5c")
    ckpt.save(MinGRUPolicy(bias=True), tmp_path / "m.bin", "5c-bias")   # replaces the first
    assert sorted(os.listdir(tmp_path)) == ["m.bin", "m.bin.sha256"]
    assert ckpt.detect_layout(tmp_path / "m.bin") == "5c-bias"
    # The sidecar is `sha256sum` format for the bytes now there; the .bin itself is the raw layout.
    digest = hashlib.sha256((tmp_path / "m.bin").read_bytes()).hexdigest()
    assert (tmp_path / "m.bin.sha256").read_text() == f"{digest}  m.bin\n"


_ACCEPTED = "accepted sizes: 587264 (legacy), 586240 (5c), 587808 (5c-bias)"


@pytest.mark.parametrize("size", [0, 1000, 586236, 586244, 587264 + 4, 587808 * 2])
def test_wrong_sizes_name_the_size_and_the_accepted_ones(tmp_path, size):
    path = tmp_path / "bad.bin"
    path.write_bytes(bytes(size))
    for reader in (ckpt.load, ckpt.detect_layout):
        with pytest.raises(UserError) as error:
            reader(path)
        assert str(error.value) == f"checkpoint {path} has {size} bytes, which is no known layout; {_ACCEPTED}"


def test_missing_file_and_directory_errors(tmp_path):
    with pytest.raises(UserError, match=r"does not exist$"):
        ckpt.load(tmp_path / "nope.bin")
    with pytest.raises(UserError, match=r"is a directory, not a \.bin file$"):
        ckpt.load(tmp_path)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_weights_are_rejected(tmp_path, bad):
    path = tmp_path / "m.bin"
    ckpt.save(MinGRUPolicy(), path, "5c")
    floats = _floats(path)
    floats[50000] = bad                      # inside gru0.W (from float 48256)
    floats.tofile(path)
    with pytest.raises(UserError, match="is damaged: its bytes do not match m.bin.sha256"):
        ckpt.load(path)
    (tmp_path / "m.bin.sha256").unlink()     # a file from elsewhere, without gcpipe's sidecar
    with pytest.raises(UserError, match="holds 1 NaN/inf value\\(s\\) in tensor gru0.W"):
        ckpt.load(path)


def test_convert_refuses_to_overwrite_its_input(tmp_path):
    path = tmp_path / "m.bin"
    ckpt.save(MinGRUPolicy(), path, "5c")
    before = path.read_bytes()
    link = tmp_path / "link.bin"
    link.symlink_to(path)
    for target in (path, link):
        with pytest.raises(UserError, match="is the input file"):
            ckpt.convert(path, target, "5c-bias")
    assert path.read_bytes() == before
    with pytest.raises(UserError, match="unknown checkpoint layout 'big'"):
        ckpt.convert(path, tmp_path / "x.bin", "big")


def test_cli_info_and_convert(tmp_path):
    source = tmp_path / "a.bin"
    ckpt.save(MinGRUPolicy(generator=torch.Generator().manual_seed(2)), source, "5c")
    runner = CliRunner()
    result = runner.invoke(app, ["ckpt", "info", str(source)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:6] == [f"file: {source}", "layout: 5c", "bytes: 586240", f"sha256: {sha256_file(source)}",
                         "value head: yes", "recurrence: full-turn"]
    assert [line.split()[:2] for line in lines[6:]] == [["enc.W", "128x120"], ["dec.W", "257x128"],
                                                        ["gru0.W", "384x128"], ["gru1.W", "384x128"]]
    norm = float(np.linalg.norm(_floats(source)[:15360].astype(np.float64)))
    assert float(lines[6].split()[-1]) == pytest.approx(norm, rel=1e-5)

    result = runner.invoke(app, ["ckpt", "convert", str(source), str(tmp_path / "b.bin"), "--layout", "legacy"])
    assert result.exit_code == 0, result.output
    assert "gcpipe: warning: layout legacy has no value head: the value head is dropped" in result.output
    assert ckpt.detect_layout(tmp_path / "b.bin") == "legacy"
    result = runner.invoke(app, ["ckpt", "info", str(tmp_path / "b.bin")])
    assert "value head: no" in result.output and "recurrence: actor-only" in result.output

    result = runner.invoke(app, ["ckpt", "info", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"gcpipe: error: checkpoint {tmp_path} is a directory, not a .bin file"]
    result = runner.invoke(app, ["ckpt", "convert", str(source), str(source), "--layout", "5c-bias"])
    assert result.exit_code == 2 and "is the input file" in result.output
