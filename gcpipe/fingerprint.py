"""The engine's behaviour fingerprint: a digest of what the loaded C engine does on fixed inputs.

The probe (`probe_outputs`) plays fixed-seed games between the random, greedy and MCTS bots (in
C, as bot-vs-bot matches play), steps the training environment (VecEnv) with its sparring bots,
and plays a small network and a search on it, ply by ply, against the bots (as the `net` and
`search` players do).  The network's weights come from a seeded numpy generator, not from a
file.  Every move, observation, reward, output and result goes into one SHA-256; the
fingerprint is its first 16 hex digits.  Two engines with the same fingerprint played these
inputs identically; an edit that changes no game (a speed-up, a comment) keeps it.  The engine
gives the same bits on every CPU with AVX2 and on every code path (csrc/gc_net.h), so the
fingerprint is the same there too.

Where it comes from: the engine loaded in this process, computed once per process (about a
second of work) or read from a cache file beside the compiled library, keyed by the library's
SHA-256, so a rebuilt library is never described by an older one's fingerprint.  `gcpipe build`
writes it into the build record too.  `python -m gcpipe.fingerprint` prints it.

Ledger records (gcpipe/match/ledger.py) and training runs (gcpipe/train/run.py) carry it; the
pipeline's jobs depend on it (Snakefile).  See docs/engine-fingerprint.md.
"""
from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

# The version of the probe itself: a change to what `probe_outputs` plays is a change of every
# fingerprint, so it is part of the digest.
PROBE_VERSION = 1
FINGERPRINT_DIGITS = 16
_SEEDS = np.array([(0x9E3779B9 * (k + 1)) & 0xFFFFFFFF | 1 for k in range(24)], np.uint32)


def _bot_games() -> Iterator[tuple[str, bytes]]:
    """Whole bot-vs-bot games in C (gcpipe.engine.bots.play_games, what bot cells play)."""
    from gcpipe.engine.bots import BotSpec, play_games

    bots = {"random": BotSpec("random"), "greedy": BotSpec("greedy"),
            "mcts": BotSpec("mcts", iterations=24, exploration=0.7, rollout="greedy"),
            "mcts-random": BotSpec("mcts", iterations=16, exploration=1.4, rollout="random")}
    pairs = [("random", "random"), ("random", "greedy"), ("greedy", "random"), ("greedy", "greedy"),
             ("mcts", "greedy"), ("greedy", "mcts"), ("mcts-random", "random")]
    for guerrilla, coin in pairs:
        seeds = _SEEDS if "mcts" not in guerrilla + coin else _SEEDS[:4]
        results = play_games(bots[guerrilla], bots[coin], seeds)
        yield f"bots {guerrilla} {coin}", _results_bytes(results)


def _vecenv() -> Iterator[tuple[str, bytes]]:
    """The training environment: self-play and single-slot envs with their sparring bots, random
    legal actions from the env's own stream, every buffer hashed at every tick."""
    from gcpipe.engine import VecEnv

    setups = [dict(selfplay=True, opponent={"guerrilla": "greedy", "coin": "mcts"}, mcts_iterations=8,
                   coin_mobility_reward=0.25, max_episode_length=48),
              dict(selfplay=False, opponent="greedy", max_episode_length=64),
              dict(selfplay=False, side=1, opponent="random", max_episode_length=64)]
    for number, setup in enumerate(setups):
        with VecEnv(8, seed=1234 + number, **setup) as env:
            env.reset()
            if env.selfplay:
                env.opponent_tags[::2] = -1      # the built-in bot plays slot 1 of every other env
            digest = hashlib.sha256()
            for _ in range(96):
                env.random_actions()
                env.step()
                for array in (env.observations, env.action_masks, env.actions, env.rewards, env.terminals,
                              env.slot_sides, env.mobility_rewards):
                    if array is not None:
                        digest.update(np.ascontiguousarray(array).tobytes())
            log = env.pop_log()
            digest.update(json.dumps({key: None if value != value else value for key, value in log.items()},
                                     sort_keys=True).encode())
            yield f"vecenv {number}", digest.digest()


def probe_arrays(hidden: int = 32, layers: int = 2, bias: bool = True) -> dict[str, np.ndarray]:
    """The probe network's weights (CompiledNet.from_arrays' names), from a seeded numpy generator
    (PCG64: the same floats on every machine), scaled like the trainer's initialisation."""
    from gcpipe.engine import NUM_ACTIONS, OBS_SIZE

    rng = np.random.default_rng(20261207)

    def matrix(rows: int, columns: int, gain: float) -> np.ndarray:
        bound = gain / np.sqrt(columns)
        return ((rng.random((rows, columns)) * 2 - 1) * bound).astype(np.float32)

    arrays = {"encoder": matrix(hidden, OBS_SIZE, np.sqrt(2.0))}
    arrays.update({f"gru{i}": matrix(3 * hidden, hidden, 1.0) for i in range(layers)})
    arrays["decoder"] = matrix(NUM_ACTIONS + 1, hidden, 1.0)
    if bias:
        arrays["encoder_bias"] = (rng.random(hidden) * 0.2 - 0.1).astype(np.float32)
        arrays["decoder_bias"] = (rng.random(NUM_ACTIONS + 1) * 0.2 - 0.1).astype(np.float32)
    return arrays


def _network() -> Iterator[tuple[str, bytes]]:
    """The C network step (every output of a batch of positions), and games of the `net` and
    `search` players over it against the bots, ply by ply (gcpipe.players.play_games)."""
    from gcpipe.engine import GameBatch
    from gcpipe.nn.inference import CompiledNet
    from gcpipe.nn.player import NetworkPlayer
    from gcpipe.players import play_games
    from gcpipe.players.bots import GreedyPlayer, MctsPlayer, RandomPlayer
    from gcpipe.players.network import NetPlayer
    from gcpipe.search.player import SearchPlayer
    from gcpipe.search.settings import SearchSettings

    net = CompiledNet.from_arrays(probe_arrays())
    plain = CompiledNet.from_arrays(probe_arrays(hidden=16, layers=1, bias=False))
    # Positions: the first plies of greedy games, stepped through the net as a game would be.
    batch = GameBatch(16)
    for slot in range(16):
        batch.reset(slot, int(_SEEDS[slot]))
    slots = np.arange(16, dtype=np.int32)
    greedy = GreedyPlayer({})
    digest = hashlib.sha256()
    for compiled in (net, plain):
        states = compiled.new_states(16)
        for _ in range(6):
            obs, _ = batch.observe(slots)
            out = np.zeros((16, 257), np.float32)
            compiled.step(states, slots, obs, out)
            digest.update(out.tobytes() + states.tobytes())
            live = slots[batch.winners[slots] < 0]
            if len(live):
                batch.apply(live, greedy.choose(batch, live))
    yield "net step", digest.digest()

    def net_player(compiled, full_turn=True):
        return NetPlayer(NetworkPlayer.from_net(compiled, full_turn=full_turn))

    mcts = {"iterations": 16, "exploration": 0.7, "rollout": "greedy"}
    games = [("net greedy", lambda: net_player(net), lambda: GreedyPlayer({}), _SEEDS[:12]),
             ("random net", lambda: RandomPlayer({}), lambda: net_player(plain, full_turn=False), _SEEDS[:12]),
             ("mcts net", lambda: MctsPlayer(mcts), lambda: net_player(net), _SEEDS[:2]),
             ("gumbel greedy", lambda: SearchPlayer.from_net(net, SearchSettings(simulations=8)),
              lambda: GreedyPlayer({}), _SEEDS[:3]),
             ("random puct", lambda: RandomPlayer({}),
              lambda: SearchPlayer.from_net(net, SearchSettings(simulations=8, variant="puct", rollouts=1,
                                                                rollout_weight=0.5, temperature=1.0)), _SEEDS[:3])]
    for name, guerrilla, coin, seeds in games:
        yield f"players {name}", _results_bytes(play_games(guerrilla(), coin(), seeds, slots=4))


def _results_bytes(results) -> bytes:
    return b"".join(np.ascontiguousarray(a, dtype).tobytes()
                    for a, dtype in ((results.winners, np.int8), (results.plies, np.uint16),
                                     (results.end_reasons, np.uint8)))


def probe_outputs() -> Iterator[tuple[str, bytes]]:
    """(what, bytes) of every probe, in a fixed order."""
    yield "probe", str(PROBE_VERSION).encode()
    yield from _bot_games()
    yield from _vecenv()
    yield from _network()


def compute() -> str:
    """The fingerprint of the engine loaded in this process, computed now (no cache)."""
    digest = hashlib.sha256()
    for what, data in probe_outputs():
        digest.update(what.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()[:FINGERPRINT_DIGITS]


def library_path() -> Path:
    """The compiled engine this process loaded (gcpipe/_engine*.so)."""
    from gcpipe import _engine

    return Path(_engine.__file__)


def cache_path(library: Path) -> Path:
    return library.with_name("_engine.fingerprint.json")


@functools.cache
def engine_fingerprint() -> str:
    """The fingerprint of the engine loaded in this process: read from the cache beside the library
    when it names this library's SHA-256, else computed and cached there (where the folder is
    writable; a read-only install computes it in every process)."""
    from gcpipe.io import atomic_write_json, read_text, sha256_file

    library = library_path()
    library_sha256 = sha256_file(library)
    cache = cache_path(library)
    try:
        cached = json.loads(read_text(cache))
        if (isinstance(cached, dict) and cached.get("library_sha256") == library_sha256
                and cached.get("probe") == PROBE_VERSION and isinstance(cached.get("fingerprint"), str)):
            return cached["fingerprint"]
    except (OSError, ValueError):
        pass
    fingerprint = compute()
    try:
        if sha256_file(library) == library_sha256:   # (not replaced by a build meanwhile)
            atomic_write_json(cache, {"library_sha256": library_sha256, "probe": PROBE_VERSION,
                                      "fingerprint": fingerprint})
    except OSError:
        pass
    return fingerprint


def other_engine(recorded: str) -> str | None:
    """Where results recorded by the engine of fingerprint `recorded` are not this engine's: the words
    naming both for an error line ('an engine of another behaviour (engine fingerprint X there, Y
    now)'); None where they are."""
    if recorded == engine_fingerprint():
        return None
    return f"an engine of another behaviour (engine fingerprint {recorded} there, {engine_fingerprint()} now)"


def describe(fingerprint: str) -> str:
    """How a fingerprint is named in messages."""
    return f"engine fingerprint {fingerprint}"


if __name__ == "__main__":
    print(engine_fingerprint())
