"""PPO training: the numerical pieces against hand-computed values, the self-play bookkeeping,
the run folder (checkpoint cadence, names, layouts, no-op rerun), exact resume, and learning."""
import csv
import ctypes
import json
import math
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from gcpipe.cli import app
from gcpipe.config import run_config
from gcpipe.engine import COIN, GUERRILLA
from gcpipe.errors import UserError
from gcpipe.nn.inference import SIMD, CompiledNet, best_simd
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.train.bench import bench_train, flops_per_step, forward_flops
from gcpipe.train.config import TrainConfig, make_config, torch_device
from gcpipe.train.evaluate import win_rate
from gcpipe.train.muon import Muon, newton_schulz
from gcpipe.train.policy import policy_terms
from gcpipe.train.ppo import PPO, vtrace_gae
from gcpipe.train.rollout_net import RolloutNet
from gcpipe.train.run import METRIC_FIELDS, checkpoint_name, train
from gcpipe.train import matmul as products, row_threads, sequence
from gcpipe.train.sequence import DecoderColumns, forward_segments
from gcpipe.torch_env import cpu_flags
from devices import CUDA

from sequence_oracle import forward_sequence

# The bfloat16 cases run where matmul_bf16 does (x86-64 with AVX2 and FMA).
BF16 = pytest.mark.skipif(not products.bf16_runs_here(), reason="bfloat16 products need x86-64 with AVX2")

PATHS = [name for name in ("scalar", "avx2", "avx512") if SIMD[name] <= SIMD[best_simd()]]

PASS = 255


pytestmark = pytest.mark.usefixtures("one_thread")   # tests/conftest.py


# ------------------------------------------------------------------ config
def test_defaults_are_model_md_section_4():
    c = make_config()
    assert (c.total_timesteps, c.num_envs * c.num_slots, c.horizon, c.minibatch_size) == (100_000_000, 4096, 64, 8192)
    assert c.steps_per_epoch == 262_144
    assert (c.learning_rate, c.muon_momentum, c.gamma, c.gae_lambda) == (0.015, 0.95, 0.98, 0.90)
    assert (c.clip_coef, c.vf_clip_coef, c.vf_coef, c.ent_coef, c.max_grad_norm) == (0.2, 0.2, 2.0, 0.0001, 1.5)
    assert (c.vtrace_rho_clip, c.vtrace_c_clip, c.prio_alpha, c.prio_beta0) == (1.0, 1.0, 0.8, 0.2)
    assert (c.checkpoint_interval, c.pool_size, c.historical_fraction, c.seed, c.max_episode_length) == \
        (20, 100, 0.2, 42, 256)


def test_run_config_is_read_from_the_runs_mapping(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("players: {r: {kind: random}}\nruns:\n  small: {num_envs: 64, total_timesteps: 1.0e+6, selfplay: false}\n")
    config = run_config(path, "small")
    assert (config.num_envs, config.total_timesteps, config.selfplay, config.horizon) == (64, 1_000_000, False, 64)
    assert isinstance(config.total_timesteps, int) and isinstance(config.learning_rate, float)
    # `gcpipe train` reads the whole config through the pipeline's schema, as `gcpipe match` does.
    path.write_text("players: {r: {kind: robot}}\nruns:\n  small: {}\n")
    with pytest.raises(UserError, match=r"players\.r\.kind: 'robot' is not one of random, greedy, mcts, net, search, openspiel$"):
        run_config(path, "small")
    path.write_text("players: {r: {kind: random}}\nruns:\n  small: {total_timesteps: 1e6}\n")
    with pytest.raises(UserError, match=r"runs\.small\.total_timesteps: must be an integer, got '1e6' \(YAML reads "
                                        r"1e6 as text: write the number in full, or as 1\.0e\+6; Snakemake's "
                                        r"--config reads a nested value as text: give it in a --configfile\)$"):
        run_config(path, "small")


@pytest.mark.parametrize("settings, message", [
    ({"learning_rat": 0.1}, "unknown key 'learning_rat' (allowed: total_timesteps, num_envs, "),
    ({"num_envs": "many"}, "num_envs: must be an integer, got 'many'"),
    ({"num_envs": 0}, "num_envs: 0 is less than the minimum of 1"),
    ({"gamma": 1.5}, "gamma: 1.5 is greater than the maximum of 1"),
    ({"reward_shaping": -0.5}, "reward_shaping: -0.5 is less than the minimum of 0"),
    ({"reward_shaping": {"coin": 0}}, "reward_shaping: missing key 'guerrilla'"),
    ({"reward_shaping_from": 1.5}, "reward_shaping_from: 1.5 is greater than the maximum of 1"),
    ({"learning_rate": float("nan")}, "learning_rate: must be a finite number, got nan"),
    ({"layout": "5d"}, "layout: '5d' is not one of 5c, 5c-bias, legacy"),
    ({"side": 1}, "side: 1 is not one of random, guerrilla, coin"),
    ({"device": "gpu"}, "device: 'gpu' is not one of cpu, cuda, auto"),
    ({"rollout_net": "numpy"}, "rollout_net: 'numpy' is not one of auto, torch, c"),
    ({"rollout_net": "c", "device": "auto"}, "'rollout_net' c steps the rollout on the CPU; set 'device' cpu (got auto)"),
    ({"rollout_net": "c", "algorithm": "expert"},
     "'rollout_net' c is PPO's rollout step; algorithm 'expert' plays its games through the C network already"),
    ({"selfplay": "yes"}, "selfplay: must be true or false, got 'yes'"),
    ({"opponent": "alphazero"},
     "opponent: 'alphazero' is not one of random, greedy, mcts nor a mapping with keys guerrilla and coin"),
    ({"opponent": {"guerrilla": "greedy"}}, "opponent: missing key 'coin'"),
    ({"opponent": {"guerrilla": "greedy", "coin": "mcts", "both": "random"}},
     "opponent: unknown key 'both' (allowed: guerrilla, coin)"),
    ({"opponent": {"guerrilla": "greedy", "coin": "mcts2k"}}, "opponent.coin: 'mcts2k' is not one of random, greedy, mcts"),
    ({"minibatch_size": 100}, "'minibatch_size' (100) must be a multiple of 'horizon' (64)"),
    ({"bot_fraction": 0.9}, "'bot_fraction' + 'historical_fraction' must not exceed 1"),
    ({"bot_fraction": 0.1, "selfplay": False}, "'bot_fraction' applies to self-play only"),
    ({"bot_fraction": {"guerrilla": 0.2}}, "bot_fraction: missing key 'coin'"),
    ({"bot_fraction": {"guerrilla": 0.2, "coin": 1.5}}, "bot_fraction.coin: 1.5 is greater than the maximum of 1"),
    ({"bot_fraction": {"guerrilla": 0.5, "coin": 0.4}},
     "'bot_fraction' + 'historical_fraction' must not exceed 1, got {'guerrilla': 0.5, 'coin': 0.4} + 0.2"),
    ({"bot_fraction": {"guerrilla": 0.0001, "coin": 0.2}},
     "'bot_fraction.guerrilla' 0.0001 of 2048 envs rounds to no env; raise num_envs or set the fraction to 0"),
    ({"bot_fraction": {"guerrilla": 0.2, "coin": 0.2}, "side": "coin"},
     "'bot_fraction' per side sets the network's side in the bot envs; set 'side' to random (got coin)"),
    ({"mcts_iterations_from": 0, "opponent": "mcts"}, "mcts_iterations_from: 0 is less than the minimum of 1"),
    ({"mcts_iterations_from": 64},
     "'mcts_iterations_from' schedules the sparring MCTS, but 'opponent' names no mcts bot (got greedy)"),
    ({"mcts_iterations_from": 64, "opponent": "mcts", "algorithm": "expert"},
     "'mcts_iterations_from' schedules PPO's sparring MCTS; algorithm 'expert' plays mcts_iterations throughout"),
])
def test_bad_settings_are_user_errors_naming_the_key(settings, message):
    with pytest.raises(UserError, match="^" + re.escape(f"runs.r: {message}")):
        make_config(settings, where="runs.r")


def test_cli_reports_a_missing_run_in_one_line(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("players: {r: {kind: random}}\nruns:\n  a: {}\n")
    result = CliRunner().invoke(app, ["train", "b", "--config", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output == f"gcpipe: error: config {path} has no run 'b' (runs: a)\n"
    assert "Traceback" not in result.output


# ------------------------------------------------------------------ numerics
def test_vtrace_gae_matches_a_hand_computed_example():
    # Row 0: V-trace clips (rho 1.0, c 0.5), a terminal at t=1.  Row 1: on-policy GAE with a bootstrap.
    rewards = torch.tensor([[0.1, 0.0, 1.0], [0.0, 0.0, 0.0]])
    values = torch.tensor([[0.5, 0.4, 0.3], [0.0, 0.0, 0.0]])
    terminals = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    bootstrap = torch.tensor([0.2, 1.0])
    ratios = torch.tensor([[2.0, 0.5, 1.0], [1.0, 1.0, 1.0]])
    advantages = vtrace_gae(rewards, values, terminals, bootstrap, ratios, gamma=0.9, lam=0.8,
                            rho_clip=1.0, c_clip=0.5)
    # t=2: 1.0 + 0.9*0.2 - 0.3 = 0.88;  t=1 (terminal): 0.5*(0 - 0.4) = -0.2;
    # t=0: (0.1 + 0.9*0.4 - 0.5) + 0.9*0.8*min(2, 0.5)*(-0.2) = -0.04 - 0.072.
    # Row 1 (c clip 0.5 applies to ratio 1 too): A2 = 0.9, A1 = 0.72*0.5*0.9, A0 = 0.72*0.5*A1.
    expected = torch.tensor([[-0.112, -0.2, 0.88], [0.36 * 0.324, 0.324, 0.9]])
    assert torch.allclose(advantages, expected, atol=1e-6)


def test_vtrace_gae_of_some_rows_is_those_rows_of_the_whole_buffer_bit_for_bit():
    """The update recomputes only the minibatch's rows after each step (PPO.update): that needs a
    row's advantages to be the same bits whatever other rows are computed with it."""
    g = torch.Generator().manual_seed(3)
    shape = (300, 64)
    rewards, values = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    terminals = (torch.rand(shape, generator=g) < 0.05).float()
    ratios = torch.rand(shape, generator=g) * 2
    bootstrap = torch.randn(300, generator=g)
    gae = dict(gamma=0.98, lam=0.95, rho_clip=1.0, c_clip=1.0)
    whole = vtrace_gae(rewards, values, terminals, bootstrap, ratios, **gae)
    idx = torch.randperm(300, generator=g)[:37]
    part = vtrace_gae(rewards[idx], values[idx], terminals[idx], bootstrap[idx], ratios[idx], **gae)
    assert torch.equal(part, whole[idx])


def test_flops_per_step_counts_the_rows_each_phase_multiplies():
    """Hand count: a step of the default network is 2 x (120x128 + 2 x 128x384 + 128x257) = 293,120
    flops.  8 envs x 2 slots x 4 ticks = 64 counted steps; a quarter of the envs play the bot (2 rows
    no network steps), so the rollout steps 14 rows a tick plus the 8 trained rows' bootstrap, which
    the C step gives only its pass logit and value (skipping 2 x 128x255 = 65,280 flops):
    293,120 x (14 x 4 + 8) - 65,280 x 8, over 64.  The update passes once over the 32 trained steps
    with a forward, the weights' gradients and every input gradient but the encoder's (2 x 120x128
    = 30,720), the pass logit computed twice (256): 32 x (3 x 293,120 - 30,720 + 256) / 64.  Half
    the rows waiting: the rollout skips 65,280 for 28 of its 56 rows, the update 3 x 65,280 for half
    its steps and computes the pass logit twice for the other half.  With train_slot_1, slot 1 of the
    4 current-policy envs is trained too: 12 trained rows, 48 trained steps."""
    policy = MinGRUPolicy()
    assert forward_flops(policy) == 293_120
    settings = dict(num_envs=8, horizon=4, bot_fraction=0.25, historical_fraction=0.25, rollout_net="c")
    ppo = PPO(make_config(settings))
    try:
        assert flops_per_step(ppo) == {"rollout": (293_120 * 64 - 65_280 * 8) / 64,
                                       "update": 32 * (3 * 293_120 - 30_720 + 256) / 64}
        assert flops_per_step(ppo, waiting=0.5) == {
            "rollout": (293_120 * 64 - 65_280 * (28 + 8)) / 64,
            "update": 32 * (3 * 293_120 - 30_720 + 128 - 1.5 * 65_280) / 64}
    finally:
        ppo.close()
    ppo = PPO(make_config(dict(settings, train_slot_1=True, rollout_net="torch")))
    try:
        assert flops_per_step(ppo) == {"rollout": 293_120 * (14 * 4 + 12) / 64,
                                       "update": 48 * (3 * 293_120 - 30_720 + 256) / 64}
    finally:
        ppo.close()


def test_bench_train_measures_a_runs_own_settings():
    """--run: the run's envs, horizon and bots, not the bench's defaults (2048 envs x 2 slots x 64)."""
    run = make_config(dict(num_envs=8, horizon=4, minibatch_size=16, bot_fraction=0.25,
                           opponent={"guerrilla": "greedy", "coin": "mcts"}, mcts_iterations=4))
    figures = bench_train(epochs=1, warmup=0, threads=1, run=run)
    assert figures["steps_per_epoch"] == 64 and figures["threads"] == 1
    expert = make_config(dict(algorithm="expert"))
    with pytest.raises(UserError, match="bench train measures PPO; this run's algorithm is 'expert'"):
        bench_train(run=expert)


def test_newton_schulz_output_is_near_orthogonal():
    generator = torch.Generator().manual_seed(0)
    for rows, cols in [(384, 128), (128, 120), (257, 128), (120, 128)]:
        x = newton_schulz(torch.randn(rows, cols, generator=generator))
        singular = torch.linalg.svdvals(x)
        assert singular.min() > 0.9 and singular.max() < 1.15, (rows, cols, singular.min(), singular.max())
        gram = x.T @ x if rows >= cols else x @ x.T
        assert torch.dist(gram, torch.eye(min(rows, cols))) / math.sqrt(min(rows, cols)) < 0.1


def test_muon_orthogonalises_matrices_and_steps_vectors_with_plain_momentum():
    matrix = torch.nn.Parameter(torch.zeros(256, 128))
    vector = torch.nn.Parameter(torch.zeros(5))
    optimizer = Muon([matrix, vector], lr=0.1, momentum=0.5)
    generator = torch.Generator().manual_seed(1)
    matrix.grad = torch.randn(256, 128, generator=generator)
    vector.grad = torch.tensor([1.0, -2.0, 0.0, 3.0, 4.0])
    optimizer.step()
    # Nesterov: buffer = 0.5 g, update = g lerp buffer by 0.5 = 0.75 g.
    assert torch.allclose(vector, -0.1 * 0.75 * vector.grad)
    singular = torch.linalg.svdvals(matrix.detach() / -0.1 / math.sqrt(256 / 128))
    assert singular.min() > 0.9 and singular.max() < 1.15


def random_segments(seed: int, batch: int, horizon: int):
    """A random network and a batch of segments for it: (model, obs, state, starts, generator), the
    states reset before a fifth of the steps."""
    generator = torch.Generator().manual_seed(seed)
    model = MinGRUPolicy(generator=generator)
    obs = torch.randint(0, 3, (batch, horizon, 120), dtype=torch.uint8, generator=generator)
    state = torch.rand(2, batch, 128, generator=generator)
    starts = torch.rand(batch, horizon, generator=generator) < 0.2
    return model, obs, state, starts, generator


def test_fast_segment_forward_equals_stepping_the_network():
    batch, horizon = 5, 9
    model, obs, state, starts, generator = random_segments(2, batch, horizon)
    starts[0, 0] = True
    logits, values, pass_logits = forward_segments(model, obs, state, starts)
    assert torch.equal(pass_logits, logits[..., PASS])
    s = state.clone()
    for t in range(horizon):
        s = s * (~starts[:, t]).float().view(1, -1, 1)
        step_logits, step_values, s = model.step(obs[:, t], s)
        assert torch.allclose(logits[:, t], step_logits, atol=1e-5)
        assert torch.allclose(values[:, t], step_values, atol=1e-5)
    # Gradients agree with autograd through the reference sequence forward.
    weights = torch.randn(batch, horizon, 256, generator=generator)
    ref_logits, ref_values, _ = forward_sequence(model, obs, state, starts)
    params = list(model.parameters())
    expected = torch.autograd.grad((ref_logits * weights).sum() + ref_values.sum(), params)
    got = torch.autograd.grad((logits * weights).sum() + values.sum(), params)
    for e, g in zip(expected, got):
        assert torch.allclose(e, g, rtol=1e-4, atol=1e-4)


def segment_outputs_and_gradients(layer, threads: int) -> list:
    """forward_segments' outputs and the gradients of the parameters and the initial state with
    `layer` as its MinGRU layer, on a batch with state resets, split among `threads` threads."""
    batch, horizon = 37, 19
    model, obs, state, starts, generator = random_segments(6, batch, horizon)
    weights, value_weights = torch.randn(batch, horizon, 256, generator=generator), torch.randn(batch, horizon,
                                                                                        generator=generator)
    previous_layer, previous_threads = sequence.mingru_layer, torch.get_num_threads()
    sequence.mingru_layer = layer
    torch.set_num_threads(threads)
    try:
        state = state.clone().requires_grad_()
        logits, values, pass_logits = forward_segments(model, obs, state, starts)
        loss = (logits * weights).sum() + (values * value_weights).sum() + pass_logits.sum()
        return [logits, values, pass_logits, *torch.autograd.grad(loss, [*model.parameters(), state])]
    finally:
        sequence.mingru_layer, _ = previous_layer, torch.set_num_threads(previous_threads)


def test_the_update_recomputes_the_rollouts_outputs_bit_for_bit(monkeypatch):
    """forward_segments (fixed-order products, the C MinGRU layers) gives the C rollout step's logits
    and values to the bit, on every code path: PPO's first ratios are exactly 1."""
    batch, horizon = 11, 13
    model, obs, state, starts, _ = random_segments(8, batch, horizon)
    starts[3, 0] = True
    for name in PATHS:
        monkeypatch.setattr(products, "SIMD_PATH", SIMD[name])
        logits, values, _ = forward_segments(model, obs, state, starts)
        net, states = CompiledNet(model, name), state.permute(1, 0, 2).contiguous().numpy()
        out = np.empty((batch, 257), np.float32)
        for t in range(horizon):
            states *= (~starts[:, t]).numpy().astype(np.float32)[:, None, None]   # as the rollout resets
            net.step(states, np.arange(batch, dtype=np.int32), np.ascontiguousarray(obs[:, t].numpy()), out)
            assert torch.equal(logits[:, t], torch.from_numpy(out[:, :256])), name
            assert torch.equal(values[:, t], torch.from_numpy(out[:, 256])), name


def rollout_segments(bias: bool):
    """A PPO buffer of real self-play segments (half their rows a waiting slot's, whose one legal move
    is the pass) and a network with random biases where it has them: (model, obs, state, starts,
    masks, actions, coin)."""
    ppo = PPO(make_config(dict(num_envs=24, horizon=64, minibatch_size=1536, total_timesteps=10**6, seed=4,
                               layout="5c-bias" if bias else "5c")))
    try:
        ppo.collect()
        ppo.collect()                        # (its games end: state resets)
    finally:
        ppo.close()
    model = ppo.policy
    with torch.no_grad():
        for layer in (model.encoder, model.decoder):
            if layer.bias is not None:
                layer.bias.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(3))
    return (model, ppo.buf_obs, ppo.buf_initial_state, ppo.buf_starts, ppo.buf_masks, ppo.buf_actions,
            ppo.buf_coin)


@pytest.mark.parametrize("bias", [False, True])
def test_policy_segments_skips_the_waiting_rows_logits_and_keeps_every_bit(monkeypatch, bias):
    """PPO's update (policy_segments: the waiting rows skip the decoder's logits) gives forward_segments
    + policy_terms' log-probabilities, entropies, values and pass logits, and the gradients of every
    parameter and of the initial state, to the bit, on every code path and at one and two threads;
    under a loss that weighs every row's log-probability and entropy (a waiting row's included) and
    the COIN rows' values through the pass logit, as PPO's does."""
    model, obs, state, starts, masks, actions, coin = rollout_segments(bias)
    waiting = masks[..., PASS]
    assert 0.3 < waiting.float().mean() < 0.7 and (masks.sum(-1)[waiting] == 1).all()
    assert starts.sum() > 5 and starts.numel() > 1024     # state resets; the products' sums in passes
    generator = torch.Generator().manual_seed(8)
    weights = [torch.randn(actions.shape, generator=generator) for _ in range(3)]

    def outputs_and_gradients(fast: bool) -> list:
        initial = state.clone().requires_grad_()
        if fast:
            terms = sequence.policy_segments(model, obs, initial, starts, masks, actions)
        else:
            logits, values, pass_logits = forward_segments(model, obs, initial, starts)
            terms = (*policy_terms(logits, masks, actions), values, pass_logits)
        log_probs, entropies, values, pass_logits = terms
        loss = ((log_probs * weights[0]).sum() + (entropies * weights[1]).sum()
                + (torch.where(coin, pass_logits, values) * weights[2]).sum())
        return [*terms, *torch.autograd.grad(loss, [*model.parameters(), initial])]

    for name in PATHS:
        monkeypatch.setattr(products, "SIMD_PATH", SIMD[name])
        for threads in (1, 2):
            torch.set_num_threads(threads)
            expected, got = outputs_and_gradients(False), outputs_and_gradients(True)
            assert len(got) == len(expected) == 4 + len(list(model.parameters())) + 1
            for e, g in zip(expected, got):      # every bit: -0.0 is not +0.0 here
                assert torch.equal(e.view(torch.int32), g.view(torch.int32)), (name, threads)
    assert torch.equal(got[0][waiting], torch.zeros(int(waiting.sum())))      # log p of the pass: 0
    assert got[0][~waiting].min() < -0.5 and got[1][~waiting].max() > 1      # (the actors: real terms)


@pytest.mark.parametrize("bias", [False, True])
def test_waiting_rows_decoder_is_the_decoder_on_the_rows_and_columns_it_gives(monkeypatch, bias):
    """WaitingRowsDecoder's logits (every column, the pass's included) and pass logit and value equal
    the decoder's on those rows, and under any loss of them its gradients are the decoder's under
    the same loss, to the bit (a loss on a full row's pass logit reaches the weights through both
    outputs that hold it); empty sets of full or waiting rows included."""
    generator = torch.Generator().manual_seed(5)
    decoder = torch.nn.Linear(128, 257, bias=bias)
    with torch.no_grad():
        for p in decoder.parameters():
            p.uniform_(-0.3, 0.3, generator=generator)
    x = torch.randn(700, 128, generator=generator)
    for full_share in (0.5, 0.0, 1.0):
        needs = torch.rand(700, generator=generator) < full_share
        full, waiting = needs.nonzero().view(-1), (~needs).nonzero().view(-1)
        w_logits = torch.randn(len(full), 256, generator=generator)
        w_tail = torch.randn(700, 2, generator=generator)
        for name in PATHS:
            monkeypatch.setattr(products, "SIMD_PATH", SIMD[name])
            leaf = x.clone().requires_grad_()
            out = products.linear(decoder, leaf)
            dense_logits, dense_tail = out[full, :256], out[:, PASS:]
            loss = (dense_logits * w_logits).sum() + (dense_tail * w_tail).sum()
            expected = [dense_logits, dense_tail, *torch.autograd.grad(loss, [leaf, *decoder.parameters()])]
            leaf = x.clone().requires_grad_()
            logits, tail = sequence.WaitingRowsDecoder.apply(leaf, decoder.weight, decoder.bias, full, waiting)
            loss = (logits * w_logits).sum() + (tail * w_tail).sum()
            got = [logits, tail, *torch.autograd.grad(loss, [leaf, *decoder.parameters()])]
            for e, g in zip(expected, got):
                assert torch.equal(e.view(torch.int32), g.view(torch.int32)), (name, full_share)


def test_the_c_mingru_layer_gives_the_same_bits_on_every_path_and_thread_count(monkeypatch):
    results = {}
    for name in PATHS:
        monkeypatch.setattr(products, "SIMD_PATH", SIMD[name])
        for threads in (1, 2):
            results[name, threads] = segment_outputs_and_gradients(sequence.mingru_layer, threads)
    reference = results[PATHS[0], 1]
    for got in results.values():
        assert all(torch.equal(e, g) for e, g in zip(reference, got))
    # torch's expressions (other devices) compute the same function, rounded otherwise; the gradient
    # of the initial state included.
    for e, g in zip(segment_outputs_and_gradients(sequence.mingru_layer_torch, 1), reference):
        assert torch.allclose(e, g, rtol=1e-4, atol=1e-4)


def test_a_forked_child_splits_rows_over_threads_of_its_own():
    """A forked process has the parent's row-thread pool object but not its threads; work handed
    to them would never run."""
    torch.set_num_threads(2)                 # (the one_thread fixture restores the count)
    row_threads.run_rows(lambda first, end: None, 4)
    pid = os.fork()
    if pid == 0:
        code = 3
        try:                                 # the child never returns into pytest
            signal.signal(signal.SIGALRM, signal.SIG_DFL)   # (whatever the test run inherited)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
            signal.alarm(20)                 # a hang ends the child, not the test run
            parts = []
            row_threads.run_rows(lambda first, end: parts.append((first, end)), 4)
            code = 0 if sorted(parts) == [(0, 2), (2, 4)] else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


HEAP_PROBE = """
import ctypes, sys
from gcpipe.train.heap import keep_freed_blocks
if sys.argv[1] == "keep":
    assert keep_freed_blocks()
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
before = libc.mallinfo2().hblkhd
block = libc.malloc(24 << 20)
mapped = libc.mallinfo2().hblkhd - before >= 24 << 20
libc.free(block)
print(mapped, libc.mallinfo2().fordblks >= 24 << 20)
"""


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="not glibc >= 2.33")
def test_freed_blocks_of_several_mib_stay_in_the_heap_for_reuse():
    """In a fresh process glibc maps a 24 MiB block of its own and unmaps it when freed (the next
    one faults in fresh pages); after keep_freed_blocks it takes the block from the heap and keeps
    it there once freed."""
    def probe(mode: str) -> str:
        return subprocess.run([sys.executable, "-c", HEAP_PROBE, mode], capture_output=True, text=True,
                              check=True).stdout.split()
    assert probe("default") == ["True", "False"]
    assert probe("keep") == ["False", "True"]


@pytest.mark.parametrize("preset, expected", [({}, "1000"), ({"GOMP_SPINCOUNT": "50"}, "50"),
                                              ({"OMP_WAIT_POLICY": "passive"}, None)])
def test_the_cli_shortens_openmps_spin_before_torch_loads_unless_the_user_chose(preset, expected):
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    probe = "import os, sys, gcpipe.cli; print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], env={**env, **preset}, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [str(expected), "False"]       # libgomp reads it when torch loads: torch must not be loaded yet


@pytest.mark.parametrize("preset, expected", [({}, ("AVX2", "COMPATIBLE")),
                                              ({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AUTO"},
                                               ("DEFAULT", "AUTO"))])
def test_the_cli_pins_torchs_avx2_kernels_and_mkls_portable_branch_unless_the_user_chose(preset, expected):
    if preset == {} and not {"avx2", "fma"} <= cpu_flags():
        pytest.skip("a CPU without AVX2 and FMA keeps torch's own kernel choice")
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    probe = ("import os, gcpipe.cli, torch; "
             "print(torch.backends.cpu.get_cpu_capability(), os.environ.get('MKL_CBWR'))")
    out = subprocess.run([sys.executable, "-c", probe], env={**env, **preset}, capture_output=True, text=True,
                         check=True).stdout.split()
    assert tuple(out) == expected


TRAIN_BYTES = """
import hashlib, pathlib, sys, tempfile
from gcpipe.torch_env import before_torch
before_torch()
import torch
from gcpipe.train.config import make_config
from gcpipe.train.run import train
torch.set_num_threads(2)
config = make_config(dict(num_envs=64, horizon=16, minibatch_size=512, total_timesteps=64 * 2 * 16 * 3,
                          checkpoint_interval=100, seed=3))
with tempfile.TemporaryDirectory() as tmp:
    out = train("x", config, pathlib.Path(tmp) / "x", echo=lambda line: None)
    print(hashlib.sha256((out / "final.bin").read_bytes()).hexdigest())
"""


def test_training_bytes_do_not_depend_on_mkls_kernels_or_the_products_code_path():
    """What differs between CPUs, played on one: MKL's own choice of kernels and its AVX2 branch
    (MKL picks by vendor and model; the CLI's COMPATIBLE branch is the third), and GCPIPE_SIMD runs
    another of gcpipe's own code paths (an AVX2-only CPU's).  With torch's products, MKL_CBWR
    alone changed the run's bytes."""
    other_path = "avx2" if best_simd() == "avx512" else "scalar"
    env = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR", "GCPIPE_SIMD", "ATEN_CPU_CAPABILITY")}
    digests = [subprocess.run([sys.executable, "-c", TRAIN_BYTES], env={**env, **extra}, capture_output=True,
                              text=True, check=True).stdout.strip()
               for extra in ({"MKL_CBWR": "AUTO"}, {"MKL_CBWR": "AVX2"}, {"GCPIPE_SIMD": other_path})]
    assert len(digests[0]) == 64 and digests == [digests[0]] * 3


def test_decoder_columns_give_autograds_slicing_gradient_bit_for_bit():
    """DecoderColumns only moves data: its gradient is the one autograd's slices of the transposed
    output give, to the bit, with the pass column's two uses (a logit, a COIN value) summed."""
    generator = torch.Generator().manual_seed(5)
    steps, batch = 7, 6
    out = torch.randn(steps, batch, 257, generator=generator, requires_grad=True)
    weights = torch.randn(batch, steps, 256, generator=generator)
    pass_weights, value_weights = torch.randn(2, batch, steps, generator=generator)

    def loss(logits, pass_logits, values):
        return (logits * weights).sum() + (pass_logits * pass_weights).sum() + (values * value_weights).sum()

    batch_major = out.transpose(0, 1)
    expected, = torch.autograd.grad(loss(batch_major[..., :256], batch_major[..., PASS], batch_major[..., 256]), out)
    logits, pass_logits, values = DecoderColumns.apply(out)
    assert torch.equal(logits, batch_major[..., :256]) and torch.equal(values, batch_major[..., 256])
    got, = torch.autograd.grad(loss(logits, pass_logits, values), out)
    assert torch.equal(got, expected)
    unused_pass, = torch.autograd.grad((logits * weights).sum() + values.sum(), out)
    assert torch.equal(unused_pass[..., PASS], weights[..., PASS].T)


# ------------------------------------------------------------------ self-play bookkeeping
def _tiny(**settings) -> TrainConfig:
    base = dict(num_envs=10, horizon=16, minibatch_size=64, total_timesteps=10**7, historical_fraction=0.2,
                frozen_banks=2, checkpoint_interval=2, seed=5)
    base.update(settings)
    return make_config(base)


def test_the_rollout_nets_c_step_is_the_networks_step_on_its_rows_alone():
    torch.manual_seed(0)
    model = MinGRUPolicy()
    net = RolloutNet(rows=40, layers=2, hidden=128)
    net.states.copy_(torch.rand(2, 40, 128))
    before = net.states.clone()
    rows = torch.tensor([3, 17, 5, 39, 0, 22, 8], dtype=torch.int32)
    obs = torch.randint(0, 3, (len(rows), 120), dtype=torch.uint8)
    logits, values, state = model.step(obs, before[:, rows.long()])
    peeked = net.peek(model, rows, obs)
    assert torch.equal(net.states, before)                       # peek leaves the states as they were
    torch.set_num_threads(2)                                     # (rows split over two threads: the same bits)
    stepped = net.step(model, rows, obs)
    for c_out, torch_out in zip(stepped, (logits, values)):
        assert c_out.shape == torch_out.shape
        torch.testing.assert_close(c_out, torch_out, rtol=1e-5, atol=1e-5)   # another summation order
    # peek gives the values alone (the pass logit and the value), the other logits 0.
    assert torch.equal(peeked[0][:, PASS], stepped[0][:, PASS]) and torch.equal(peeked[1], stepped[1])
    assert not peeked[0][:, :PASS].any()
    torch.testing.assert_close(net.states[:, rows.long()], state, rtol=1e-5, atol=1e-5)
    others = torch.ones(40, dtype=torch.bool)
    others[rows.long()] = False
    assert torch.equal(net.states[:, others], before[:, others])   # the other rows' states untouched


def test_a_ppo_epoch_with_the_c_rollout_step_plays_what_the_torch_step_plays():
    # Same seed, same draws: the C step's logits differ from torch's in the last bits only, so the
    # epoch's actions are the same and its log-probs and values agree to float32 rounding - over
    # every tick, the frozen snapshots' rows and the games' resets included.
    epochs = {}
    for rollout_net in ("torch", "c"):
        ppo = PPO(_tiny(rollout_net=rollout_net, num_envs=16, horizon=160, minibatch_size=160))
        ppo.collect()
        epochs[rollout_net] = ppo
        ppo.close()
    torch_epoch, c_epoch = epochs["torch"], epochs["c"]
    assert torch_epoch.buf_terminals.sum() > 0                    # games ended and restarted inside the epoch
    assert torch.equal(c_epoch.buf_actions, torch_epoch.buf_actions)
    for name in ("buf_logprobs", "buf_values", "buf_bootstrap", "buf_initial_state"):
        torch.testing.assert_close(getattr(c_epoch, name), getattr(torch_epoch, name), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(c_epoch.state, torch_epoch.state, rtol=1e-4, atol=1e-5)
    assert not torch.equal(c_epoch.buf_values, torch_epoch.buf_values)   # (it is the C step that ran)


def test_selfplay_slots_passes_rewards_and_pool_swaps_at_boundaries():
    ppo = PPO(_tiny())
    env, pool = ppo.env, ppo.pool
    assert ppo.trained_rows.tolist() == list(range(0, 20, 2))                 # slot 0 of every env
    assert ppo.historical_rows.tolist() == [17, 19]                           # slot 1 of envs 8, 9
    assert env.opponent_tags.tolist() == [0] * 8 + [1, 2]                     # bank i -> tag i + 1
    ticks = []
    real_step = env.step

    def recording_step(actions=None):
        before = dict(masks=env.action_masks.copy(), actions=env.actions.copy(), sides=env.slot_sides.copy(),
                      snapshots=pool.env_snapshot.copy(), state=ppo.state.clone())
        real_step(actions)
        ticks.append(dict(before, rewards=env.rewards.copy(), terminals=env.terminals.copy()))

    env.step = recording_step
    ppo.collect()
    pool.add(123, ppo.policy)    # a new snapshot; each bank draws again, envs switch at their game's end
    pool.refresh()
    target = pool.bank_snapshot.copy()
    for _ in range(12):
        ppo.collect()
        if pool.pending_swaps() == 0:
            break
    assert pool.pending_swaps() == 0
    assert set(pool.env_snapshot.tolist()) <= set(target.tolist())

    wins = games = 0
    for i, tick in enumerate(ticks):
        actor = tick["masks"][:, :, PASS] == 0                   # the pass is never legal for the actor
        assert (actor.sum(axis=1) == 1).all()                   # exactly one actor per env
        assert (tick["actions"][~actor] == PASS).all()           # the waiting slot passes
        chosen = np.take_along_axis(tick["masks"], tick["actions"][..., None], axis=2)[..., 0]
        assert chosen[actor].all()                               # the actor's action is legal
        assert (tick["sides"][:, 0] != tick["sides"][:, 1]).all()
        ended = tick["terminals"][:, 0] == 1
        assert (tick["terminals"][:, 0] == tick["terminals"][:, 1]).all()
        # A finished game: +1 to the winner's slot, -1 to the loser's.
        assert (tick["rewards"][ended].sum(axis=1) == 0).all() and (np.abs(tick["rewards"][ended]) == 1).all()
        wins += int((tick["rewards"][ended, 0] == 1).sum())
        games += int(ended.sum())
        if i + 1 < len(ticks):
            changed = ticks[i + 1]["snapshots"] != tick["snapshots"]
            assert not (changed & ~ended[8:]).any()              # opponents change only between games
            # Both slots' recurrent states move every tick (the waiting slot steps on the pass).
            moved = (ticks[i + 1]["state"] != tick["state"]).flatten(start_dim=2).any(dim=2).any(dim=0)
            assert moved[~torch.from_numpy(np.repeat(ended, 2))].all()
    assert games > 10
    # The trainer's buffers credit slot 0's rewards: the last epoch's terminal rewards are its wins.
    last = ticks[-ppo.config.horizon:]
    assert torch.equal(ppo.buf_rewards, torch.tensor(np.stack([t["rewards"][:, 0] for t in last], axis=1)))
    assert torch.equal(ppo.buf_terminals, torch.tensor(np.stack([t["terminals"][:, 0] for t in last], axis=1),
                                                       dtype=torch.float32))
    assert 0 < wins < games


def test_coin_mobility_reward_is_added_to_the_coins_rewards_after_the_capture_scaling():
    # The same seeds with and without the reward play the same epoch (collect alone: no update);
    # the trained rows' rewards differ by the env's mobility rewards, not scaled by reward_shaping.
    settings = dict(reward_shaping={"guerrilla": 1.0, "coin": 0.0}, total_timesteps=8 * 320)
    plain, shaped = PPO(_tiny(**settings)), PPO(_tiny(coin_mobility_reward=0.05, **settings))
    mobility = []
    real_step = shaped.env.step

    def recording_step(actions=None):
        real_step(actions)
        mobility.append(shaped.env.mobility_rewards[:, 0].copy())

    shaped.env.step = recording_step
    plain.collect()
    shaped.collect()
    paid = torch.from_numpy(np.stack(mobility, axis=1))
    assert torch.equal(shaped.buf_terminals, plain.buf_terminals)
    assert torch.equal(shaped.buf_rewards, (plain.buf_rewards + paid).clamp(-1.0, 1.0))
    assert (paid != 0).sum() > 20 and plain.env.mobility_rewards is None


@pytest.mark.parametrize("settings, epochs", [
    (dict(opponent="mcts", bot_fraction=0.4, total_timesteps=8 * 320), (0, 7)),   # 4 of 10 envs against MCTS
    # Bot mode: the bot's first moves are made in the envs' reset, at the first epoch's iterations.
    (dict(opponent="mcts", selfplay=False, side="coin", total_timesteps=8 * 160), (0,)),
])
def test_sparring_curriculum_plays_each_epoch_at_its_iterations(settings, epochs):
    # 8 epochs of 10 envs x 16 ticks.
    ramp = _tiny(mcts_iterations=40, mcts_iterations_from=8, **settings)
    assert [ramp.sparring_iterations(e) for e in range(8)] == [8, 13, 17, 22, 26, 31, 35, 40]
    assert ramp.mcts_pool_iterations == 40 and ramp.to_dict()["mcts_iterations_from"] == 8
    flat = _tiny(**settings)        # unset: mcts_iterations throughout, and config.json as it always was
    assert {flat.sparring_iterations(e) for e in range(8)} == {256} and "mcts_iterations_from" not in flat.to_dict()
    # Epoch e of the ramp plays the games of a run at its iterations throughout, and not those of another.

    def first_epoch(config: TrainConfig, epoch: int) -> dict:
        ppo = PPO(config)
        ppo.epoch = epoch      # what update() would count; collect reads it
        ppo.collect()
        ppo.close()
        return {name: getattr(ppo, f"buf_{name}") for name in ("obs", "actions", "rewards")}

    def same(a: dict, b: dict) -> bool:
        return all(torch.equal(a[name], b[name]) for name in a)

    for epoch in epochs:
        iterations = ramp.sparring_iterations(epoch)
        played = first_epoch(ramp, epoch)
        assert same(played, first_epoch(_tiny(mcts_iterations=iterations, **settings), epoch))
        assert not same(played, first_epoch(_tiny(mcts_iterations=48 - iterations, **settings), epoch))


@pytest.mark.parametrize("shaping, start, scales", [(0.0, 0.0, (0.0, 0.0)), (0.5, 0.0, (0.5, 0.5)),
                                                    ({"coin": 0.0, "guerrilla": 2.0}, 0.0, (2.0, 0.0)),
                                                    ({"coin": 0.0, "guerrilla": 2.0}, 0.5, (2.0, 0.0))])
def test_reward_shaping_scales_each_sides_capture_rewards_and_leaves_the_outcome(shaping, start, scales):
    # 8 epochs of 10 envs x 2 slots x 16 ticks: with reward_shaping_from 0.5, epochs 4..7 are scaled.
    ppo = PPO(_tiny(reward_shaping=shaping, reward_shaping_from=start, total_timesteps=8 * 320))
    first_scaled = 4 if start else 0
    assert [ppo.config.shaping_scales(e) for e in (3, 4)] == [(1.0, 1.0) if start else scales, scales]
    rewards, terminals, coin = [], [], []
    real_step = ppo.env.step

    def recording_step(actions=None):
        coin.append(ppo.env.slot_sides[:, 0] == COIN)      # the side slot 0 plays in this step's game
        real_step(actions)
        rewards.append(ppo.env.rewards[:, 0].copy())
        terminals.append(ppo.env.terminals[:, 0].copy())

    ppo.env.step = recording_step
    captures_by_side = np.zeros(2, int)
    n_ended = 0
    for epoch in range(8):
        ppo.epoch = epoch      # what update() would count; collect reads it
        ppo.collect()
        env_rewards = np.stack(rewards[-ppo.config.horizon:], axis=1)
        ended = np.stack(terminals[-ppo.config.horizon:], axis=1) == 1
        is_coin = np.stack(coin[-ppo.config.horizon:], axis=1)
        captures = (env_rewards > 0) & ~ended
        guerrilla_scale, coin_scale = scales if epoch >= first_scaled else (1.0, 1.0)
        scale = np.where(is_coin, np.float32(coin_scale), np.float32(guerrilla_scale))
        expected = np.where(captures, env_rewards * scale, env_rewards)
        assert torch.equal(ppo.buf_rewards, torch.from_numpy(expected))
        assert set(np.abs(env_rewards[ended]).tolist()) <= {1.0}
        captures_by_side += [(captures & ~is_coin).sum(), (captures & is_coin).sum()]
        n_ended += ended.sum()
    assert (captures_by_side > 5).all() and n_ended > 5


def test_a_run_from_an_init_checkpoint_plays_it_as_its_first_frozen_opponent(tmp_path):
    from gcpipe.nn import checkpoint as ckpt

    ckpt.save(MinGRUPolicy(generator=torch.Generator().manual_seed(77)), tmp_path / "init.bin", "5c")
    init = ckpt.load(tmp_path / "init.bin").model
    ppo = PPO(_tiny(), init=init)
    for name, tensor in init.state_dict().items():
        assert torch.equal(ppo.policy.state_dict()[name], tensor)
        assert torch.equal(ppo.pool._weights[0][name], tensor), name


def test_selfplay_bot_share_plays_the_bot_in_slot_1():
    ppo = PPO(_tiny(bot_fraction=0.3))      # 10 envs: 5 current, 3 against the bot, 2 historical
    assert ppo.env.opponent_tags.tolist() == [0] * 5 + [-1] * 3 + [1, 2]
    assert ppo.current_rows.tolist() == sorted(list(range(0, 20, 2)) + [1, 3, 5, 7, 9])
    assert ppo.trained_rows.tolist() == list(range(0, 20, 2))
    for _ in range(6):
        ppo.collect()
    log = ppo.env.pop_log()
    assert log["bot_n"] >= 3 and log["hist_n"] >= 1 and log["games"] > log["bot_n"] + log["hist_n"]
    assert log["invalid_rate"] == 0.0             # the bot's slot is never read as an (illegal) action


def _record_slot_0_sides(ppo: PPO) -> list[np.ndarray]:
    """A list that gets slot 0's side in every env at each env step of `ppo` from now on."""
    sides = []
    real_step = ppo.env.step

    def recording_step(actions=None):
        sides.append(ppo.env.slot_sides[:, 0].copy())
        real_step(actions)

    ppo.env.step = recording_step
    return sides


def test_selfplay_bot_share_per_side_fixes_the_networks_side_in_the_bot_envs():
    """10 envs: 5 current policy, 2 where the bot plays the Guerrilla (the network the COIN), 1 where
    it plays the COIN, 2 historical; the other envs draw their sides per game."""
    ppo = PPO(_tiny(bot_fraction={"coin": 0.1, "guerrilla": 0.2}, opponent={"guerrilla": "greedy", "coin": "random"}))
    assert list(ppo.config.bot_fraction.items()) == [("guerrilla", 0.2), ("coin", 0.1)]    # recorded in one order
    assert ppo.env.opponent_tags.tolist() == [0] * 5 + [-1] * 3 + [1, 2]
    sides = _record_slot_0_sides(ppo)
    for _ in range(4):
        ppo.collect()
    sides = np.stack(sides)
    assert (sides[:, 5:7] == COIN).all() and (sides[:, 7] == GUERRILLA).all()
    assert set(sides[:, :5].ravel()) == {GUERRILLA, COIN}
    log = ppo.env.pop_log()
    assert log["bot_n"] >= 1 and log["invalid_rate"] == 0.0       # the bot slot is never read as an action


@pytest.mark.parametrize("side_value", [True, False])
def test_selfplay_values_are_read_per_side(side_value):
    """Both slots see the same observations, so with side_value the COIN rows take their value
    from the pass logit (decoder row 255) and the Guerrilla rows from the value row."""
    ppo = PPO(_tiny(side_value=side_value))
    sides = _record_slot_0_sides(ppo)
    ppo.collect()
    coin = torch.from_numpy(np.stack(sides, axis=1) == COIN)
    assert coin.any() and (~coin).any()
    logits, values, _ = forward_segments(ppo.policy, ppo.buf_obs, ppo.buf_initial_state, ppo.buf_starts)
    expected = torch.where(coin, logits[..., PASS], values) if side_value else values
    assert torch.allclose(ppo.buf_values, expected, atol=1e-5)
    assert not torch.allclose(logits[..., PASS][coin], values[coin], atol=1e-3)   # the two really differ
    if side_value:
        assert torch.equal(ppo.buf_coin, coin)


# ------------------------------------------------------------------ run folder
def _metrics(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_checkpoint_cadence_names_layouts_and_noop_rerun(tmp_path):
    config = _tiny(total_timesteps=10 * 2 * 16 * 5, eval_interval=4, eval_games=8)   # 5 epochs
    out = train("tiny", config, tmp_path / "tiny", echo=lambda line: None)
    steps_per_epoch = 10 * 2 * 16
    names = sorted(p.name for p in (out / "checkpoints").glob("*.bin"))
    assert names == [checkpoint_name(e * steps_per_epoch) for e in (2, 4, 5)]
    assert names[0] == "0000000000000640.bin"
    assert all((out / "checkpoints" / n).stat().st_size == 586_240 for n in names)
    assert (out / "final.bin").read_bytes() == (out / "checkpoints" / names[-1]).read_bytes()
    rows = _metrics(out / "metrics.csv")
    assert list(rows[0]) == METRIC_FIELDS
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3, 4, 5]
    assert [int(r["global_step"]) for r in rows] == [e * steps_per_epoch for e in range(1, 6)]
    assert [bool(r["eval_win_rate_as_coin"]) for r in rows] == [False, False, False, True, True]
    # Unchanged config and final.bin present: nothing is redone.
    final_mtime = (out / "final.bin").stat().st_mtime_ns
    lines = []
    train("tiny", config, tmp_path / "tiny", echo=lines.append)
    assert (out / "final.bin").stat().st_mtime_ns == final_mtime and "nothing to do" in lines[0]


@pytest.mark.parametrize("sees_gpu", [False, True])
def test_device_auto_is_cuda_only_where_torch_sees_a_gpu_and_cuda_without_one_is_refused(monkeypatch, sees_gpu):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: sees_gpu)
    assert torch_device(make_config(dict(device="cpu"))) == torch.device("cpu")
    assert torch_device(make_config(dict(device="auto"))) == torch.device("cuda" if sees_gpu else "cpu")
    if sees_gpu:
        assert torch_device(make_config(dict(device="cuda"))) == torch.device("cuda")
    else:
        with pytest.raises(UserError, match=r"^runs.r: 'device' is cuda but torch sees no GPU here"):
            torch_device(make_config(dict(device="cuda")), where="runs.r")


def test_a_run_recorded_before_a_setting_existed_is_the_same_run_with_its_default(tmp_path):
    """Adding a setting (here device and expert_value_mix) must not retrain or restart old runs:
    a record without it counts as the default, what the older version trained with."""
    config = _tiny(total_timesteps=10 * 2 * 16 * 2)
    out = train("tiny", config, tmp_path / "tiny", echo=lambda line: None)
    record = json.loads((out / "config.json").read_text())
    assert record["derived"].pop("device") == "cpu"
    del record["config"]["device"], record["config"]["expert_value_mix"]
    (out / "config.json").write_text(json.dumps(record))
    lines = []
    train("tiny", config, out, echo=lines.append)
    assert lines == [f"tiny: already trained ({out / 'final.bin'}), nothing to do"]
    lines.clear()
    train("tiny", _tiny(total_timesteps=10 * 2 * 16 * 2, expert_value_mix=0.5), out, echo=lines.append)
    assert "the settings differ from the run in" in lines[0] and "(expert_value_mix)" in lines[0]


def test_another_device_keeps_a_finished_run_and_starts_a_stopped_one_over(tmp_path):
    """A run saved on CUDA (its record says so) is not retrained on the CPU once finished; stopped,
    its state (CUDA random streams) cannot continue here, so it starts over, saying what it discards."""
    def saved_on_cuda(out):
        record = json.loads((out / "config.json").read_text())
        record["derived"]["device"] = "cuda"
        (out / "config.json").write_text(json.dumps(record))

    finished = train("tiny", _tiny(total_timesteps=10 * 2 * 16 * 2), tmp_path / "finished", echo=lambda line: None)
    saved_on_cuda(finished)
    lines = []
    train("tiny", _tiny(total_timesteps=10 * 2 * 16 * 2, device="auto"), finished, echo=lines.append)
    assert lines == [f"tiny: already trained ({finished / 'final.bin'}), nothing to do"]
    stopped = train("tiny", _tiny(total_timesteps=10 * 2 * 16 * 4, max_epochs=2), tmp_path / "stopped",
                    echo=lambda line: None)
    saved_on_cuda(stopped)
    lines.clear()
    train("tiny", _tiny(total_timesteps=10 * 2 * 16 * 4), stopped, echo=lines.append)
    assert lines[0] == (f"tiny: the run in {stopped} was saved on cuda and continues only there; starting over "
                        f"on cpu, which discards 1 checkpoint(s), state.pt")
    assert json.loads((stopped / "config.json").read_text())["derived"]["device"] == "cpu"


def test_legacy_baseline_run_writes_the_legacy_layout(tmp_path):
    config = make_config(dict(selfplay=False, opponent="greedy", layout="legacy", num_envs=8, horizon=16,
                              minibatch_size=64, total_timesteps=8 * 16 * 2, checkpoint_interval=1))
    out = train("baseline", config, tmp_path / "baseline", echo=lambda line: None)
    assert (out / "final.bin").stat().st_size == 587_264
    assert sorted(p.name for p in (out / "checkpoints").glob("*.bin")) == [checkpoint_name(128), checkpoint_name(256)]


@pytest.mark.parametrize("bots", [
    {}, {"bot_fraction": {"guerrilla": 0.2, "coin": 0.1}}, {"rollout_net": "torch"}, pytest.param({"update_precision": "bfloat16"}, marks=BF16),
    pytest.param({"device": "cuda"}, marks=CUDA.marks),
    pytest.param({"device": "cuda", "bot_fraction": {"guerrilla": 0.2, "coin": 0.1}}, marks=CUDA.marks),
], ids=["selfplay", "bots_per_side", "rollout_net_torch", "bfloat16_update", "cuda_selfplay", "cuda_bots_per_side"])
def test_resumed_run_matches_an_uninterrupted_one(tmp_path, bots):
    # On CUDA too: the same GPU and software give the same bytes, a resumed run included.
    settings = dict(total_timesteps=10 * 2 * 16 * 6, checkpoint_interval=2, **bots)        # 6 epochs
    whole = train("r", _tiny(**settings), tmp_path / "whole", echo=lambda line: None)
    part = tmp_path / "part"
    train("r", _tiny(**settings, max_epochs=3), part, echo=lambda line: None)  # "killed" after epoch 3
    assert not (part / "final.bin").exists()
    assert len(_metrics(part / "metrics.csv")) == 3
    lines = []
    train("r", _tiny(**settings), part, echo=lines.append)  # a rerun continues: replays epoch 3 from the state
    assert any("continuing from its saved state" in line for line in lines)
    assert (part / "final.bin").read_bytes() == (whole / "final.bin").read_bytes()
    names = sorted(p.name for p in (whole / "checkpoints").iterdir())
    assert names == sorted(p.name for p in (part / "checkpoints").iterdir())
    for name in names:
        assert (part / "checkpoints" / name).read_bytes() == (whole / "checkpoints" / name).read_bytes()
    timing = {"wall_time", "sps", "rollout_seconds", "update_seconds"}
    strip = lambda rows: [{k: v for k, v in r.items() if k not in timing} for r in rows]  # noqa: E731
    assert strip(_metrics(part / "metrics.csv")) == strip(_metrics(whole / "metrics.csv"))


# ------------------------------------------------------------------ learning
@pytest.mark.parametrize("device, precision", [("cpu", "float32"), pytest.param("cuda", "float32", marks=CUDA.marks),
                                               pytest.param("cpu", "bfloat16", marks=BF16)])
def test_bot_mode_training_against_random_raises_the_win_rate(device, precision):
    # Guerrilla against random: about 6 % of games won untrained.  Replay ratio 2 learns fastest per
    # step at this size (seeds 3, 4, 5 gained 14, 9 and 14 points in 164k steps).
    config = make_config(dict(selfplay=False, opponent="random", side="guerrilla", num_envs=128, horizon=32,
                              replay_ratio=2.0, minibatch_size=1024, total_timesteps=128 * 32 * 40,
                              checkpoint_interval=100, seed=3, device=device, update_precision=precision))
    ppo = PPO(config)
    before = win_rate(ppo.policy, side=GUERRILLA, games=400, seed=11, opponent="random")
    for _ in range(config.total_epochs):
        ppo.collect()
        ppo.update()
    after = win_rate(ppo.policy, side=GUERRILLA, games=400, seed=11, opponent="random")
    ppo.env.close()
    assert before < 0.1 and after > before + 0.06, (before, after)


def test_restart_and_changed_settings_start_the_run_over(tmp_path):
    settings = dict(total_timesteps=10 * 2 * 16 * 4, checkpoint_interval=2)
    for restart, changed in ((True, {}), (False, {"seed": 99})):
        out = tmp_path / f"r{restart}"
        train("r", _tiny(**settings, max_epochs=2), out, echo=lambda line: None)
        lines = []
        train("r", _tiny(**settings, **changed), out, restart=restart, echo=lines.append)
        assert not any("continuing" in line for line in lines)
        assert len(_metrics(out / "metrics.csv")) == 4  # all four epochs from the start, none kept
    # --restart also redoes a finished run (final.bin present) instead of calling it done.
    lines = []
    train("r", _tiny(**settings), tmp_path / "rTrue", restart=True, echo=lines.append)
    assert not any("nothing to do" in line for line in lines)
    assert len(_metrics(tmp_path / "rTrue" / "metrics.csv")) == 4

