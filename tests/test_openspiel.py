"""OpenSpiel interop (the `openspiel` extra): the game registered with pyspiel passes OpenSpiel's
own checks and agrees with the engine, OpenSpiel's MCTSBot plays gcpipe's players through
evaluate_bots, and OpenSpiel's MCTS plays in gcpipe's matches as the `openspiel` player kind."""
import importlib.util
import sys

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from gcpipe.cli import app
from gcpipe.config import validate_config
from gcpipe.engine import COIN, MAX_GAME_LENGTH, TERMINAL_PLAYER, Game, GameBatch
from gcpipe.engine.bots import Bot, BotSpec
from gcpipe.errors import UserError
from gcpipe.match import match
from gcpipe.match.ledger import read_ledger
from gcpipe.match.replay import replay_record
from gcpipe.nn import checkpoint as ckpt
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.players import define, parse_spec
from gcpipe.players.openspiel import OpenSpielPlayer
from gcpipe.workflow import check_pipeline

needs_openspiel = pytest.mark.skipif(
    importlib.util.find_spec("pyspiel") is None,
    reason="OpenSpiel is not installed: pip install -e '.[openspiel]' (the open-spiel wheel) to run these")


@pytest.fixture(scope="module")
def pyspiel():
    import pyspiel

    import gcpipe.openspiel  # noqa: F401  (registers the game)
    return pyspiel


@pytest.fixture(scope="module")
def game(pyspiel):
    return pyspiel.load_game("guerrilla_checkers")


def _mcts_bot(game, simulations, seed, uct_c=2.0):
    from open_spiel.python.algorithms import mcts

    random_state = np.random.RandomState(seed)
    return mcts.MCTSBot(game, uct_c, simulations, mcts.RandomRolloutEvaluator(1, random_state),
                        random_state=random_state)


# -- without the extra: one line saying what to install ---------------------------------------------
@pytest.fixture
def without_openspiel(monkeypatch):
    for name in [m for m in sys.modules if m == "gcpipe.openspiel" or m.startswith("gcpipe.openspiel.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyspiel", None)   # `import pyspiel` now raises ImportError


INSTALL_LINE = ("OpenSpiel is not installed; it comes with gcpipe's 'openspiel' extra: pip install "
                "'gcpipe[openspiel]' (in a checkout: pip install -e '.[openspiel]')")


def test_openspiel_player_without_the_extra_is_one_line(without_openspiel, tmp_path):
    result = CliRunner().invoke(app, ["match", "openspiel:mcts:100", "random", "--games", "2",
                                      "--out", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"gcpipe: error: player spec 'openspiel:mcts:100': {INSTALL_LINE}"]
    assert not (tmp_path / "x.jsonl").exists()
    config = validate_config({"players": {"r": {"kind": "random"}, "os": {"kind": "openspiel"}}})
    with pytest.raises(UserError) as caught:
        check_pipeline(config, source="my.yaml")
    assert str(caught.value) == f"my.yaml: players.os: {INSTALL_LINE}"
    with pytest.raises(ImportError, match="pip install 'gcpipe\\[openspiel\\]'"):
        import gcpipe.openspiel  # noqa: F401


@pytest.mark.parametrize("text, settings", [
    ("mcts", {"algorithm": "mcts"}),
    ("mcts:500", {"algorithm": "mcts", "max_simulations": 500}),
    ("mcts:500:1.4:3", {"algorithm": "mcts", "max_simulations": 500, "uct_c": 1.4, "n_rollouts": 3}),
    ("mcts::0.5", {"algorithm": "mcts", "uct_c": 0.5}),
])
def test_openspiel_short_specs(text, settings):
    assert OpenSpielPlayer.spec_settings(text) == settings


@needs_openspiel
@pytest.mark.parametrize("text, message", [
    ("alphazero", "player spec 'openspiel:alphazero': algorithm: 'alphazero' is not one of mcts"),
    ("mcts:0", "player spec 'openspiel:mcts:0': max_simulations: 0 is less than the minimum of 1"),
    ("mcts:many", "player spec 'openspiel:mcts:many': max_simulations must be a whole number, got 'many'"),
    ("mcts:10:-1", "player spec 'openspiel:mcts:10:-1': uct_c: -1.0 is less than the minimum of 0"),
    ("mcts:10:1:1:1", "player spec 'openspiel:mcts:10:1:1:1': openspiel takes at most "
                      "ALGORITHM:MAX_SIMULATIONS:UCT_C:N_ROLLOUTS"),
])
def test_bad_openspiel_specs(text, message):
    with pytest.raises(UserError) as caught:
        parse_spec(f"openspiel:{text}")
    assert str(caught.value) == message


# -- the game as OpenSpiel sees it ------------------------------------------------------------------
@needs_openspiel
def test_game_type_and_info(pyspiel, game):
    kind = game.get_type()
    assert (kind.short_name, kind.dynamics, kind.chance_mode, kind.information, kind.utility, kind.reward_model) == (
        "guerrilla_checkers", pyspiel.GameType.Dynamics.SEQUENTIAL, pyspiel.GameType.ChanceMode.DETERMINISTIC,
        pyspiel.GameType.Information.PERFECT_INFORMATION, pyspiel.GameType.Utility.ZERO_SUM,
        pyspiel.GameType.RewardModel.TERMINAL)
    assert (game.num_distinct_actions(), game.num_players(), game.min_utility(), game.max_utility(),
            game.utility_sum(), game.max_chance_outcomes()) == (256, 2, -1.0, 1.0, 0.0, 0)
    assert game.max_game_length() == MAX_GAME_LENGTH == 127
    assert game.observation_tensor_shape() == [120]
    assert int(pyspiel.PlayerId.TERMINAL) == TERMINAL_PLAYER   # the engine speaks OpenSpiel's player ids


@needs_openspiel
def test_openspiels_random_simulation_checks(pyspiel, game):
    # Legal actions sorted and empty for the waiting side, the mask, clone, serialization round
    # trips, game length <= max_game_length, returns within the utilities and zero-sum.
    pyspiel.random_sim_test(game, num_sims=40, serialize=True, verbose=False)


@needs_openspiel
def test_states_follow_the_engine_ply_by_ply(game):
    rng = np.random.default_rng(5)
    for _ in range(3):
        state, engine = game.new_initial_state(), Game()
        while not engine.is_terminal():
            assert state.current_player() == engine.current_player()
            assert state.legal_actions() == engine.legal_actions()
            assert state.legal_actions(1 - engine.current_player()) == []
            assert state.observation_tensor(0) == state.observation_tensor(1) == engine.observation().tolist()
            assert state.observation_string(0) == str(state) == str(engine)
            action = int(rng.choice(engine.legal_actions()))
            assert state.action_to_string(state.current_player(), action) == engine.action_to_string(action)
            state.apply_action(action)
            engine.apply_action(action)
        assert state.is_terminal() and state.current_player() == engine.current_player()
        assert state.returns() == engine.returns() and sorted(state.returns()) == [-1.0, 1.0]
        assert state.information_state_string(0) == ", ".join(map(str, state.history()))


@needs_openspiel
def test_observation_views_and_positions(game):
    from open_spiel.python.observation import make_observation

    position = Game.from_position(stones=[3 * 7 + 2, 3 * 7 + 3], coins=[2 * 8 + 3, 5 * 8 + 6], to_move=COIN,
                                  stones_placed=10)
    state = game.state_at(position)
    observation = make_observation(game)
    observation.set_from(state, 0)
    views = observation.dict
    assert sorted(map(tuple, np.argwhere(views["stones"]))) == [(3, 2), (3, 3)]      # [gy, gx]
    assert sorted(map(tuple, np.argwhere(views["coins"]))) == [(2, 3), (5, 6)]       # [y, x]
    assert views["counters"].tolist() == [2, 0, 0, 0, 0, 10, 2]
    assert observation.tensor.tolist() == position.observation().tolist()
    # The state is a copy: playing on it leaves the position alone; serialization keeps it.
    again = game.deserialize_state(state.serialize())
    state.apply_action(state.legal_actions()[0])
    assert position.plies == 0 and str(again) == str(position)


# -- OpenSpiel's MCTS against gcpipe's players (pyspiel.Bot) -------------------------------------
@pytest.fixture(scope="module")
def net_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("net") / "net.bin"
    ckpt.save(MinGRUPolicy(generator=torch.Generator().manual_seed(3)), path, "5c")
    return path


def _runtime(spec: str):
    return parse_spec(spec).runtime()


@needs_openspiel
def test_gcpipe_bot_moves_with_its_own_generator(game):
    from open_spiel.python.algorithms.evaluate_bots import evaluate_bots

    from gcpipe.openspiel import GcpipeBot

    state = game.new_initial_state()
    returns = evaluate_bots(state, [GcpipeBot(_runtime("greedy"), 11), GcpipeBot(_runtime("random"), 12)],
                            np.random)
    # Replay: each side's moves are its engine bot's, drawing from that side's own generator.
    engine, generators, bots = Game(), [Game(11).rng_state, Game(12).rng_state], [Bot(BotSpec("greedy")), Bot(BotSpec("random"))]
    for action in state.history():
        side = engine.current_player()
        mover = engine.clone()
        mover.rng_state = generators[side]
        assert bots[side].choose(mover) == action
        generators[side] = mover.rng_state
        engine.apply_action(action)
    assert engine.is_terminal() and returns == engine.returns()


@needs_openspiel
def test_gcpipe_network_bot_steps_on_every_ply(game, net_file):
    from open_spiel.python.algorithms.evaluate_bots import evaluate_bots

    from gcpipe.openspiel import GcpipeBot

    net = _runtime(f"net:{net_file}")
    seen_by_net = []
    for method in ("observe", "choose"):      # the other side's plies, its own
        call = getattr(net, method)
        setattr(net, method, lambda games, slots, call=call: seen_by_net.append(games.game(0).observation())
                or call(games, slots))
    state = game.new_initial_state()
    evaluate_bots(state, [GcpipeBot(_runtime("random"), 4), GcpipeBot(net, 5)], np.random)
    # A full-turn net observes the position before every ply, the random bot's included.
    replay, seen = Game(), []
    for action in state.history():
        seen.append(replay.observation())
        replay.apply_action(action)
    assert len(seen_by_net) == len(seen) and all((a == b).all() for a, b in zip(seen_by_net, seen))


@needs_openspiel
@pytest.mark.parametrize("opponent", ["random", "greedy", "mcts:64", "net", "search"])
def test_openspiel_mcts_plays_gcpipe_players_through_evaluate_bots(game, opponent, net_file):
    from open_spiel.python.algorithms.evaluate_bots import evaluate_bots

    from gcpipe.openspiel import GcpipeBot

    spec = {"net": f"net:{net_file}", "search": f"search:{net_file}:16"}.get(opponent, opponent)
    for side in (0, 1):   # (8 simulations: the games' moves and returns are checked, not OpenSpiel's strength)
        bots = [_mcts_bot(game, 8, seed=side), GcpipeBot(_runtime(spec), seed=7 + side)]
        if side == 1:
            bots.reverse()
        state = game.new_initial_state()
        returns = evaluate_bots(state, bots, np.random)
        replay = Game()
        for action in state.history():
            replay.apply_action(action)
        assert replay.is_terminal() and returns == replay.returns()
        assert len(state.history()) <= MAX_GAME_LENGTH
        if opponent == "random" and side == 1:   # random Guerrillas win 5.6 % against random COINs
            assert returns[side] == 1.0


# -- OpenSpiel's MCTS in gcpipe's matches --------------------------------------------------------
@needs_openspiel
def test_openspiel_player_spec_and_identity():
    from importlib import metadata

    player = parse_spec("openspiel:mcts:500:1.4")
    assert player.name == "os-mcts500-c1.4" and player.kind == "openspiel"
    assert player.identity == {"kind": "openspiel", "algorithm": "mcts", "max_simulations": 500, "uct_c": 1.4,
                               "n_rollouts": 1, "solve": True, "open_spiel": metadata.version("open_spiel")}
    configured = define("os", {"kind": "openspiel", "max_simulations": 500, "uct_c": 1, "roster": 4})
    assert configured.identity == dict(player.identity, uct_c=1.0) and configured.roster == 4
    with pytest.raises(UserError, match=r"^players.os: n_rollouts: must be an integer, got 0.5$"):
        define("os", {"kind": "openspiel", "n_rollouts": 0.5})


@needs_openspiel
def test_openspiel_player_draws_once_per_move():
    player = _runtime("openspiel:mcts:16")
    games = GameBatch(1)
    games.reset(0, 9)
    before = games.game(0).serialize()
    player.start(1)
    player.new_games(np.zeros(1, np.int32))
    action = int(player.choose(games, np.zeros(1, np.int32))[0])
    after = games.game(0)
    assert action in after.legal_actions()
    assert after.rng_state == 16807 * 9 and after.serialize().split()[:10] == before.split()[:10]


@needs_openspiel
def test_openspiel_games_are_functions_of_their_seeds(tmp_path):
    ledgers = [match("openspiel:mcts:16", "greedy", 4, out=tmp_path / f"w{w}.jsonl", workers=w,
                     progress=False).ledger for w in (1, 2)]
    assert ledgers[0].read_bytes() == ledgers[1].read_bytes()
    records = read_ledger(ledgers[0])
    assert [r["game"] for r in records] == [0, 1, 2, 3]
    assert records[0]["guerrilla_id"]["kind"] == "openspiel"
    # One game alone, replayed from its ledger record (as `gcpipe view` does), is the batched one.
    assert all(replay_record(record).agrees_with(record) for record in records)


@needs_openspiel
def test_openspiel_mcts_and_gcpipe_mcts_are_comparable_at_equal_iterations(tmp_path):
    """10 games each side at 16 iterations, random rollouts on both sides, the same exploration
    (OpenSpiel values are in [-1, 1], gcpipe's in [0, 1], so its uct_c is twice gcpipe's c).  Equal
    players land outside 4..16 of 20 with probability 0.3 %; a side that wins one game in ten lands
    inside with probability 13 %.  benchmarks/openspiel_mcts.py plays longer matches at more iterations."""
    ours, theirs = "mcts:16:0.7:random", "openspiel:mcts:16:1.4"
    as_guerrilla = match(theirs, ours, 10, out=tmp_path / "os_g.jsonl", workers=2, progress=False).summary
    as_coin = match(ours, theirs, 10, out=tmp_path / "os_c.jsonl", workers=2, progress=False).summary
    score = as_guerrilla["guerrilla_wins"] + as_coin["coin_wins"]
    print(f"\nOpenSpiel MCTS 16 vs gcpipe MCTS 16: {as_guerrilla['guerrilla_wins']}-{as_guerrilla['coin_wins']} "
          f"as Guerrilla, {as_coin['coin_wins']}-{as_coin['guerrilla_wins']} as COIN; {score}/20")
    assert 4 <= score <= 16
