"""The engine's behaviour fingerprint (gcpipe/fingerprint.py): what it covers, where it comes
from, and what ledgers and training runs of another engine's behaviour become."""
import json
import subprocess
import sys

import pytest

from engines import GCPIPE, environment
from gcpipe import fingerprint
from gcpipe.fingerprint import FINGERPRINT_DIGITS, cache_path, compute, engine_fingerprint, library_path
from gcpipe.io import sha256_file
from gcpipe.match.ledger import read_ledger
from gcpipe.nn.inference import best_simd


def gcpipe(*args, copy=None, cwd=None):
    """The command line, running the engine of an edited copy (None: the installed one)."""
    return subprocess.run([str(GCPIPE), *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=environment(copy), cwd=cwd)


def test_the_fingerprint_is_a_digest_of_the_probe_and_never_of_another_library(tmp_path, monkeypatch):
    value = engine_fingerprint()
    assert len(value) == FINGERPRINT_DIGITS and int(value, 16) >= 0
    assert compute() == value                        # the same inputs, the same digest
    cached = json.loads(cache_path(library_path()).read_text())
    assert cached == {"library_sha256": sha256_file(library_path()), "probe": fingerprint.PROBE_VERSION,
                      "fingerprint": value}
    # A cache that names another library (a rebuild after it was written) is not believed.
    library = tmp_path / "_engine.abi3.so"
    library.write_bytes(library_path().read_bytes() + b"\0")
    cache_path(library).write_text(json.dumps({"library_sha256": sha256_file(library_path()), "probe": 1,
                                               "fingerprint": "f" * FINGERPRINT_DIGITS}))
    monkeypatch.setattr(fingerprint, "library_path", lambda: library)
    engine_fingerprint.cache_clear()
    try:
        assert engine_fingerprint() == value         # computed from the engine, not read
        assert json.loads(cache_path(library).read_text())["library_sha256"] == sha256_file(library)
    finally:
        engine_fingerprint.cache_clear()
    # The command prints it; --fresh computes it again.
    assert [gcpipe("fingerprint").stdout, gcpipe("fingerprint", "--fresh").stdout] == [value + "\n"] * 2


def test_the_probe_covers_bots_environment_network_and_search():
    parts = dict(fingerprint.probe_outputs())
    assert [name.split()[0] for name in parts] == (["probe"] + ["bots"] * 7 + ["vecenv"] * 3 + ["net"]
                                                   + ["players"] * 5)
    # The games are games: of many lengths, some long (a probe of nothing would pass anything).
    for name in ("bots greedy random", "players net greedy", "players gumbel greedy"):
        data = parts[name]
        count = len(data) // 4
        plies = [int.from_bytes(data[count + 2 * k:count + 2 * k + 2], "little") for k in range(count)]
        assert max(plies) > 20 and len(set(plies)) > 2, name


@pytest.mark.skipif(best_simd() == "scalar", reason="this CPU has only the scalar network path")
def test_every_code_path_of_the_network_gives_the_same_fingerprint():
    """What makes it the same on every AVX2 (and AVX-512) CPU: the paths give the same bits."""
    code = "from gcpipe.fingerprint import compute; print(compute())"
    scalar = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env=environment(GCPIPE_SIMD="scalar"))
    assert scalar.stdout.strip() == engine_fingerprint(), scalar.stderr


def test_an_edit_that_changes_games_changes_the_fingerprint_and_one_that_does_not_keeps_it(edited_engines):
    records = {name: json.loads((edited_engines[name] / "build.json").read_text())
               for name in ("neutral", "tie_break")}
    assert records["neutral"]["fingerprint"] == engine_fingerprint()
    assert records["tie_break"]["fingerprint"] not in (engine_fingerprint(), None)
    # The record's fingerprint is the engine's: what its processes compute.
    assert gcpipe("fingerprint", copy=edited_engines["tie_break"]).stdout.strip() == records["tie_break"]["fingerprint"]
    assert records["neutral"]["sources_sha256"] != records["tie_break"]["sources_sha256"]


def test_a_match_refuses_the_ledger_of_another_engine_or_plays_it_again(edited_engines, tmp_path):
    """A ledger cut after 10 of 20 games and resumed by another engine: games 0-9 of the old engine
    and 10-19 of the new one, exit 0, before."""
    tie_break, neutral = edited_engines["tie_break"], edited_engines["neutral"]
    old, new = engine_fingerprint(), gcpipe("fingerprint", copy=tie_break).stdout.strip()
    games = ("random", "greedy", "--games", 20, "--workers", 1, "--quiet")
    for name, copy in (("old", None), ("new", tie_break)):
        assert gcpipe("match", *games, "--out", tmp_path / f"{name}.jsonl", copy=copy).returncode == 0
    full = (tmp_path / "old.jsonl").read_bytes()
    assert full != (tmp_path / "new.jsonl").read_bytes()   # the edit changes games
    cut = tmp_path / "c.jsonl"
    cut.write_bytes(b"".join(full.splitlines(keepends=True)[:10]))
    refused = gcpipe("match", *games, "--out", cut, copy=tie_break)
    assert (refused.returncode, refused.stderr) == (2, (
        f"gcpipe: error: {cut} was played by an engine of another behaviour (engine fingerprint {old} there, "
        f"{new} now); give another --out, or --replace-others to play its games again with this engine\n"))
    assert len(read_ledger(cut)) == 10
    replayed = gcpipe("match", *games, "--out", cut, "--replace-others", copy=tie_break)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stderr.startswith(f"gcpipe: playing afresh: {cut} was played by an engine of another behaviour")
    assert cut.read_bytes() == (tmp_path / "new.jsonl").read_bytes()
    # An engine of the same behaviour continues a ledger: the result is the uninterrupted one.
    cut.write_bytes(b"".join(full.splitlines(keepends=True)[:10]))
    resumed = gcpipe("match", *games, "--out", cut, copy=neutral)
    assert (resumed.returncode, cut.read_bytes()) == (0, full), resumed.stderr
    # The viewer replays games: this engine would draw other games than the ledger's.
    view = gcpipe("view", tmp_path / "new.jsonl", "--out", tmp_path / "pictures")
    assert (view.returncode, view.stderr) == (2, (
        f"gcpipe: error: {tmp_path / 'new.jsonl'} was played by an engine of another behaviour (engine fingerprint "
        f"{new} there, {old} now): this engine cannot replay its games; play them again (gcpipe match "
        f"--replace-others)\n"))
    # compare, which has no --replace-others, refuses it before any game.
    (tmp_path / "cmp").mkdir()
    (tmp_path / "cmp" / "random__greedy.jsonl").write_bytes((tmp_path / "new.jsonl").read_bytes())
    compare = gcpipe("compare", "random", "greedy", "--games", 10, "--out", tmp_path / "cmp", "--quiet")
    assert (compare.returncode, compare.stderr) == (2, (
        f"gcpipe: error: {tmp_path / 'cmp' / 'random__greedy.jsonl'} was played by an engine of another behaviour "
        f"(engine fingerprint {new} there, {old} now); give another --out, or delete it to play its games again "
        "with this engine\n"))
    # One Elo table holds one engine's games.
    mixed = gcpipe("elo", tmp_path / "old.jsonl", tmp_path / "new.jsonl", "--out", tmp_path / "elo")
    assert (mixed.returncode, mixed.stderr) == (2, (
        f"gcpipe: error: {tmp_path / 'new.jsonl'} was played by engine fingerprint {new} and "
        f"{tmp_path / 'old.jsonl'} by {old}: one table holds the games of one engine; play them again with one "
        f"engine\n"))


def test_a_training_run_of_another_engine_starts_over(edited_engines, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("players: {random: {kind: random}}\n"
                      "runs:\n  tiny: {opponent: greedy, selfplay: false, layout: legacy, num_envs: 8, horizon: 16,\n"
                      "         minibatch_size: 64, total_timesteps: 512, checkpoint_interval: 1, seed: 3}\n")
    args = ("train", "tiny", "--config", config, "--out", tmp_path / "run", "--threads", 1)
    assert gcpipe(*args).returncode == 0
    record = json.loads((tmp_path / "run" / "config.json").read_text())
    assert record["derived"]["engine"] == engine_fingerprint()
    new = gcpipe("fingerprint", copy=edited_engines["tie_break"]).stdout.strip()
    again = gcpipe(*args, copy=edited_engines["tie_break"])
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[0] == (
        f"tiny: the run in {tmp_path / 'run'} was trained by an engine of another behaviour (engine fingerprint "
        f"{engine_fingerprint()} there, {new} now); starting over, which discards 4 checkpoint(s), final.bin, "
        f"state.pt, state.prev.pt")
    assert json.loads((tmp_path / "run" / "config.json").read_text())["derived"]["engine"] == new
    # The same engine's behaviour: nothing to do.
    same = gcpipe(*args, copy=edited_engines["tie_break"])
    assert (same.returncode, same.stderr.splitlines()[0]) == (
        0, f"tiny: already trained ({tmp_path / 'run' / 'final.bin'}), nothing to do")
