"""Value calibration and value accuracy (gcpipe/search/calibration.py, gcpipe/train/values.py): the logistic fit
is the maximum-likelihood one, the held-out split is by game, Brier scores and reliability bins
are what their definitions give, and bad files or outputs are one line before any game."""
import json

import numpy as np
import pytest
import torch

from gcpipe.errors import UserError
from gcpipe.nn import checkpoint as ckpt
from gcpipe.nn.inference import CompiledNet
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.search.calibration import calibrate, calibrated_settings, fit_logistic, selfplay_values, write_calibration
from gcpipe.search.settings import make_settings
from gcpipe.train.values import value_accuracy


@pytest.fixture(scope="module")
def net_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("values") / "net.bin"
    model = MinGRUPolicy(generator=torch.Generator().manual_seed(21))
    with torch.no_grad():
        model.decoder.weight[255:] *= 20.0       # value outputs of order 1
    ckpt.save(model, path, "5c")
    return path


def test_the_logistic_fit_is_the_maximum_likelihood_one():
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.normal(size=(4000, 3)), np.ones(4000)])
    won = (rng.random(4000) < 1 / (1 + np.exp(-(x @ [1.5, -0.7, 0.3, 0.2])))).astype(float)
    w = np.zeros(4)
    for _ in range(30):                          # Newton's method, the textbook solution
        p = 1 / (1 + np.exp(-(x @ w)))
        w += np.linalg.solve(x.T @ (x * (p * (1 - p))[:, None]), x.T @ (won - p))
    assert np.allclose(fit_logistic(x, won), w, atol=1e-4)


def test_calibration_holds_out_the_last_fifth_of_the_games(net_file):
    record = calibrate(net_file, games=20, seed=4)
    x, owner, outcome = selfplay_values(CompiledNet(ckpt.load(net_file).model), 20, 4)
    won = (outcome[owner] > 0).astype(float)
    train = owner < 16
    assert record["held_out_games"] == 4 and record["positions"] == len(x)
    assert np.allclose(record["value_coef"], fit_logistic(x[train].astype(np.float64), won[train]))
    held = ~train
    fitted = 1 / (1 + np.exp(-(x[held] @ np.array(record["value_coef"]))))
    for label, side in (("guerrilla_to_move", 1), ("coin_to_move", 0)):
        rows = x[held, 2] == side
        brier = record["brier_held_out"][label]
        assert brier["calibrated"] == pytest.approx(np.mean((fitted[rows] - won[held][rows]) ** 2))
        raw = (np.clip((x[held][rows, 0] - x[held][rows, 1]) / 2, -1, 1) + 1) / 2
        assert brier["outcome_mapping"] == pytest.approx(np.mean((raw - won[held][rows]) ** 2))
        assert brier["base_rate"] == pytest.approx(np.mean((won[train].mean() - won[held][rows]) ** 2))


def test_value_accuracy_is_brier_and_reliability_of_the_search_games(net_file):
    from gcpipe.engine import NO_SIDE
    from gcpipe.nn.inference import net_arrays
    from gcpipe.players import define
    from gcpipe.train.expert import game_seed, play_games, search_expert
    from gcpipe.train.values import _SEED_OFFSET

    report = value_accuracy(net_file, games=6, simulations=4, seed=2)
    seeds = np.array([game_seed(2 + _SEED_OFFSET, 0, j) for j in range(6)], np.uint32)
    games = play_games(search_expert(net_arrays(ckpt.load(net_file).model), make_settings(simulations=4)), seeds,
                       np.full(6, NO_SIDE), (define("greedy", {"kind": "greedy"}),) * 2)
    for label, side in (("guerrilla_to_move", 1), ("coin_to_move", 2)):
        net = np.concatenate([(g.root_values[g.obs[:, 113] == side] + 1) / 2 for g in games])
        search = np.concatenate([(g.search_values[g.obs[:, 113] == side] + 1) / 2 for g in games])
        won = np.concatenate([np.full(int((g.obs[:, 113] == side).sum()), float(g.outcome > 0)) for g in games])
        part = report[label]
        assert part["positions"] == len(won)
        assert part["brier_net_value"] == pytest.approx(np.mean((net - won) ** 2))
        assert part["brier_search_value"] == pytest.approx(np.mean((search - won) ** 2))
        bins = part["reliability"]
        assert sum(b["positions"] for b in bins) == len(won)
        for b in bins:
            rows = (net >= b["low"]) & ((net < b["high"]) | (b["high"] == 1.0))
            assert b["positions"] == rows.sum()
            assert b["mean_predicted"] == pytest.approx(net[rows].mean())
            assert b["observed"] == pytest.approx(won[rows].mean())


@pytest.mark.parametrize("record, message", [
    ({"value_coef": 5, "value_squash": "logistic"}, "is not a calibration file"),
    ({"value_coef": [1, 2, 3], "value_squash": "logistic"}, "is not a calibration file"),
    ({"value_coef": [1, 2, 3, "x"], "value_squash": "logistic"}, "is not a calibration file"),
    ({"value_coef": [1, 2, 3, 4], "value_squash": "cubic"}, "is not a calibration file"),
    ({"value_coef": [1, 2, 3, 4], "value_squash": "logistic", "checkpoint_sha256": 7}, "is not a calibration file"),
    ({"value_coef": [1, 2, 3, 4], "value_squash": "logistic", "checkpoint_sha256": "ab" * 32},
     "calibrates checkpoint abababababab..., not this one"),
])
def test_a_bad_calibration_file_is_one_line(tmp_path, record, message):
    record = {"checkpoint_sha256": "cd" * 32, **record}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(record))
    with pytest.raises(UserError, match=message):
        calibrated_settings(make_settings(), path, "cd" * 32, "players.s")


def test_a_calibration_into_a_folder_is_refused_before_any_game(tmp_path, net_file):
    with pytest.raises(UserError, match="is a folder"):
        write_calibration(net_file, tmp_path, games=10)


def test_calibrate_refuses_to_write_over_its_checkpoint_and_a_seed_out_of_range(tmp_path, net_file):
    copy = tmp_path / "net.bin"
    copy.write_bytes(net_file.read_bytes())
    with pytest.raises(UserError, match=rf"--out {copy} is the checkpoint itself"):
        write_calibration(copy, copy, games=10)
    assert copy.read_bytes() == net_file.read_bytes()
    for seed in (-1, 2**32):
        with pytest.raises(UserError, match=rf"a seed is an unsigned 32-bit integer, got {seed}"):
            calibrate(net_file, games=10, seed=seed)
        with pytest.raises(UserError, match=rf"a seed is an unsigned 32-bit integer, got {seed}"):
            value_accuracy(net_file, games=1, simulations=2, seed=seed)


def test_values_refuses_one_name_twice_and_a_file_for_its_folder_before_any_game(tmp_path, net_file):
    from typer.testing import CliRunner

    from gcpipe.cli import app

    twice = CliRunner().invoke(app, ["values", f"a={net_file}", f"a={net_file}", "--out", str(tmp_path / "v")])
    assert twice.exit_code == 2 and "gcpipe: error: two checkpoints are named 'a'" in twice.output
    (tmp_path / "file").write_text("not a folder")
    into_file = CliRunner().invoke(app, ["values", str(net_file), "--out", str(tmp_path / "file")])
    assert into_file.exit_code == 2 and "is a file; give a folder" in into_file.output
    unnamed = CliRunner().invoke(app, ["values", f"={net_file}", "--out", str(tmp_path / "v")])
    assert unnamed.exit_code == 2 and "the name before '=' is empty" in unnamed.output


def test_every_checkpoint_has_a_line_in_the_reliability_plot():
    from gcpipe.report import reliability_png

    side = {"brier_net_value": 0.2, "reliability": [{"mean_predicted": 0.3, "observed": 0.4}]}
    reports = {f"net{i}": {"guerrilla_to_move": side, "coin_to_move": side} for i in range(6)}
    assert reliability_png(reports) != reliability_png(dict(list(reports.items())[:4]))
