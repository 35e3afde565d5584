"""The network-guided search (csrc/gc_search.c): node for node against the plain-Python reference
of tests/reference_search.py, forced wins, values by mover through a COIN chain, recurrent states
along the path, batch invariance, the player's state, and bad settings."""
import numpy as np
import pytest
import torch

from gcpipe.engine import COIN, GUERRILLA, NO_SIDE, SIDE_NAMES, Game, GameBatch
from gcpipe.engine.bots import Bot, BotSpec
from gcpipe.errors import UserError
from gcpipe.nn import checkpoint as ckpt
from gcpipe.nn.inference import CompiledNet
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.nn.player import NetworkPlayer
from gcpipe.players import parse_spec
from gcpipe.search.player import SearchPlayer
from gcpipe.search.searcher import Searcher
from gcpipe.search.settings import make_settings
from reference_search import ReferenceSearch


def _net(seed=0, value_scale=1.0) -> CompiledNet:
    model = MinGRUPolicy(generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():   # larger value outputs, so the searches see values far from zero
        model.decoder.weight[255:] *= value_scale
    return CompiledNet(model)


def _midgame(seed: int, plies: int) -> Game:
    game, bot = Game(seed), Bot(BotSpec("greedy"))
    for _ in range(plies):
        if game.is_terminal():
            break
        game.apply_action(bot.choose(game))
    return game


def _coin_chain() -> Game:
    """COIN to move; its coin on square (2,2) can capture down-right twice: points (2,2) and (3,3),
    the only stones, so the chain wipes the board and wins.  Other moves do not capture."""
    return Game.from_position(stones=[2 * 7 + 2, 3 * 7 + 3], coins=[2 * 8 + 2, 6 * 8 + 1], to_move=COIN,
                              stones_placed=10, seed=5)


def _last_coin() -> Game:
    """Guerrilla to move; the last coin, on square (3,3), misses corner points 23 and 24."""
    return Game.from_position(stones=[16, 17, 40], coins=[3 * 8 + 3], to_move=GUERRILLA, seed=9)


def _batch(games) -> GameBatch:
    batch = GameBatch(len(games))
    for i, game in enumerate(games):
        batch.put(i, game)
    return batch


def _search(net, settings, games, states=None):
    batch = _batch(games)
    states = net.new_states(len(games)) if states is None else states
    searcher = Searcher(settings, net, len(games))
    result = searcher.run(batch, np.arange(len(games)), states, np.arange(len(games)), want_policy=True)
    return result, searcher, batch, states




POSITIONS = {"start": lambda: Game(77), "midgame": lambda: _midgame(6, 9), "coin": lambda: _midgame(6, 6),
             "chain": _coin_chain}


@pytest.mark.parametrize("variant", ["gumbel", "puct"])
@pytest.mark.parametrize("position", list(POSITIONS))
@pytest.mark.parametrize("value", [("linear", (0.5, -0.5, 0.0, 0.0)), ("logistic", (0.7, -0.3, 0.2, -0.1))])
def test_c_search_equals_the_reference_node_for_node(variant, position, value):
    net = _net(seed=1, value_scale=8.0)
    temperature = 0.7 if variant == "puct" and value[0] == "logistic" else 0.0   # a drawn PUCT move too
    settings = make_settings(simulations=40, variant=variant, considered=8, value="calibrated",
                             value_squash=value[0], value_coef=value[1], temperature=temperature)
    game = POSITIONS[position]()
    state = np.random.default_rng(2).normal(size=(net.layers, net.hidden)).astype(np.float32) * 0.3
    result, searcher, batch, _ = _search(net, settings, [game], state[None].copy())
    reference = ReferenceSearch(net, settings)
    action, policy, rng = reference.run(game, state)
    assert result.actions[0] == action
    assert batch.game(0).rng_state == rng
    legal = game.legal_actions()
    assert np.array_equal(result.policy[0, legal], np.array(policy, np.float32))
    tree = searcher.tree(0)
    assert len(tree) == len(reference.nodes) > 1
    assert result.evaluations[0] == sum(not node.game.is_terminal() for node in reference.nodes[1:])
    for node, ref in zip(tree, reference.nodes):
        assert (node.parent, node.action, node.visits) == (ref.parent, ref.action, ref.visits)
        assert node.value_sum == ref.value_sum and node.raw_value == ref.raw_value
        if not ref.game.is_terminal():
            assert np.array_equal(node.state, ref.state)


def test_a_cold_puct_draw_takes_the_most_visited_move():
    """N^(1/T) for small T: every other edge's weight vanishes next to the most visited one's (the
    weights must not saturate, or the draw spreads over every well-visited edge)."""
    net = _net(seed=3, value_scale=4.0)
    games = [g for g in (_midgame(30 + s, 3 + s % 5) for s in range(20)) if len(g.legal_actions()) >= 8][:8]
    cold, searcher, *_ = _search(net, make_settings(simulations=300, variant="puct", temperature=0.01), games)
    visits = [{n.action: n.visits for n in searcher.tree(k) if n.parent == 0} for k in range(len(games))]
    assert all(sum(v >= 3 for v in counts.values()) >= 3 for counts in visits)
    assert [int(a) for a in cold.actions] == [max(counts, key=lambda a: (counts[a], -a)) for counts in visits]


@pytest.mark.parametrize("variant", ["gumbel", "puct"])
def test_the_guerrilla_clears_the_last_coin(variant):
    game = _last_coin()
    winning = [a for a in game.legal_actions() if _wins(game, a)]
    assert sorted(winning) == [93, 98]
    settings = make_settings(simulations=64, variant=variant, considered=168)
    result, searcher, *_ = _search(_net(seed=4), settings, [game])
    assert result.actions[0] in winning
    chosen = next(n for n in searcher.tree(0) if n.parent == 0 and n.action == result.actions[0])
    assert chosen.value_sum == chosen.visits > 1     # every visit backs up the (terminal) Guerrilla win


@pytest.mark.parametrize("variant", ["gumbel", "puct"])
def test_values_back_up_by_mover_through_a_coin_chain(variant):
    """The wipe takes two COIN moves in a row; with values by ply parity the second would be
    scored for the Guerrilla and the search would steer away from it."""
    game = _coin_chain()
    first = 2 * 8 + 2
    capture = first * 4 + 3
    assert capture in game.legal_actions() and len(game.legal_actions()) > 1
    result, searcher, *_ = _search(_net(seed=5), make_settings(simulations=48, variant=variant, considered=16),
                                   [game])
    assert result.actions[0] == capture
    tree = searcher.tree(0)
    chain_step = next(i for i, n in enumerate(tree) if n.parent == 0 and n.action == capture)
    step = tree[chain_step]      # its own evaluation, then a COIN win on every later visit
    assert step.value_sum - step.raw_value == pytest.approx(1 - step.visits) and step.visits > 2
    wipe = (3 * 8 + 3) * 4 + 3
    assert [n.raw_value for n in tree if n.parent == chain_step and n.action == wipe] == [-1.0]


def _wins(game: Game, action: int) -> bool:
    after = game.clone()
    after.apply_action(action)
    return after.winner == game.current_player()


def test_node_states_are_the_net_stepped_along_the_path():
    net = _net(seed=6)
    game = _midgame(11, 6)
    result, searcher, *_ = _search(net, make_settings(simulations=30, variant="puct"), [game])
    tree = searcher.tree(0)
    for index, node in enumerate(tree):
        path, at = [], index
        while at > 0:
            path.append(tree[at].action)
            at = tree[at].parent
        replay, state = game.clone(), net.new_states(1)
        net.step(state, np.zeros(1, np.int32), replay.observation()[None])
        for action in reversed(path):
            replay.apply_action(action)
            if not replay.is_terminal():
                net.step(state, np.zeros(1, np.int32), replay.observation()[None])
        if not replay.is_terminal():
            assert np.array_equal(node.state, state[0]), f"node {index}"


@pytest.mark.parametrize("variant", ["gumbel", "puct"])
def test_a_game_searches_the_same_whatever_shares_its_batch(variant):
    net = _net(seed=7, value_scale=4.0)
    settings = make_settings(simulations=24, variant=variant, rollouts=1, rollout_weight=0.3)
    games = [_midgame(20 + i, i % 7) for i in range(9)]
    together, _, batch_all, states_all = _search(net, settings, games)
    for group in ([4], [8, 0, 3], [1, 2, 5, 6, 7]):
        part, _, batch, states = _search(net, settings, [games[i] for i in group])
        assert np.array_equal(part.actions, together.actions[group])
        assert np.array_equal(part.policy, together.policy[group])
        assert [batch.game(k).rng_state for k in range(len(group))] == [batch_all.game(i).rng_state for i in group]
        assert np.array_equal(states, states_all[group])
    chunked = Searcher(settings, net, 2)     # fewer games per call than searched
    batch = _batch(games)
    again = chunked.run(batch, np.arange(9), net.new_states(9), np.arange(9), want_policy=True)
    assert np.array_equal(again.actions, together.actions) and np.array_equal(again.policy, together.policy)


@pytest.mark.parametrize("search_side", [GUERRILLA, COIN])
def test_whole_games_are_legal_and_the_player_state_is_a_network_players(tmp_path, search_side):
    model = MinGRUPolicy(generator=torch.Generator().manual_seed(8))
    ckpt.save(model, tmp_path / "net.bin", "5c")
    searcher = SearchPlayer(tmp_path / "net.bin", make_settings(simulations=8))
    shadow = NetworkPlayer(tmp_path / "net.bin")
    for player in (searcher, shadow):
        player.start(1)
    slot = np.zeros(1, np.int32)
    for seed in (1, 2, 3):
        batch = GameBatch(1)
        batch.reset(0, seed)
        searcher.new_games(slot)
        shadow.reset(slot)
        while not batch.game(0).is_terminal():
            obs = batch.observe(slot)[0].copy()
            if batch.to_move[0] == search_side:
                action = searcher.choose(batch, slot)[0]
                shadow.forward(slot, obs)
            else:
                searcher.observe(batch, slot)
                shadow.advance(slot, obs)
                action = Bot(BotSpec("greedy")).choose(batch.game(0))
            assert action in batch.game(0).legal_actions()
            batch.apply(slot, [action])
            assert np.array_equal(searcher._states, np.moveaxis(shadow.state(slot), 1, 0))


@pytest.mark.parametrize("settings, message", [
    (dict(variant="alphabeta"), "variant: 'alphabeta' is not one of puct, gumbel"),
    (dict(simulations=0), "simulations: 0 is less than the minimum of 1"),
    (dict(c_puct=-1.0), "c_puct: -1.0 is less than the minimum of 0"),
    (dict(c_scale=float("nan")), "c_scale: must be a finite number, got nan"),
    (dict(considered=0), "considered: 0 is less than the minimum of 1"),
    (dict(considered=169), "considered: 169 is greater than the maximum of 168"),
    (dict(rollout_weight=0.5), "rollout_weight 0.5 needs rollouts >= 1"),
    (dict(value="rollout"), "value 'rollout' needs rollouts >= 1"),
    (dict(value="guess"), "value: 'guess' is not one of outcome, calibrated, rollout"),
    (dict(value_coef=(1.0, 2.0)), "value_coef: [1.0, 2.0] is too short"),
    (dict(simulation=5), "unknown key 'simulation' (allowed: simulations, variant, "),
    (dict(temperature=1.0), "temperature applies to the puct variant"),
    (dict(variant="puct", temperature=-1.0), "temperature: -1.0 is less than the minimum of 0"),
    (dict(value_coef=(1.0, -1.0, 0.0, 0.0)), "value 'outcome' sets value_coef to (0.5, -0.5, 0.0, 0.0) itself"),
    (dict(value_squash="logistic"), "value 'outcome' sets value_squash to 'linear' itself, got 'logistic'"),
    (dict(value="rollout", rollouts=2, rollout_weight=0.5), "value 'rollout' sets rollout_weight to 1.0 itself"),
])
def test_bad_settings_are_one_line_errors(settings, message):
    with pytest.raises(UserError) as caught:
        make_settings(where="players.s", **settings)
    assert str(caught.value).startswith(f"players.s: {message}")


def test_a_named_value_kind_takes_its_own_settings_restated():
    assert make_settings(value_coef=[0.5, -0.5, 0, 0], value_squash="linear") == make_settings()
    assert make_settings(value="rollout", rollouts=3, rollout_weight=1).rollout_weight == 1.0


def test_a_file_without_a_value_head_needs_rollouts(tmp_path):
    with pytest.warns(ckpt.CheckpointWarning):
        ckpt.save(MinGRUPolicy(bias=True), tmp_path / "legacy.bin", "legacy")
    with pytest.raises(UserError, match="no value head"):
        SearchPlayer(tmp_path / "legacy.bin", make_settings())
    player = SearchPlayer(tmp_path / "legacy.bin", make_settings(value="rollout", rollouts=2, simulations=6))
    player.start(1)
    batch = GameBatch(1)
    batch.reset(0, 3)
    assert player.choose(batch, np.zeros(1, np.int32))[0] in batch.game(0).legal_actions()
    assert player.last.root_value[0] == 0.0       # no net value: the rollouts alone


def test_search_players_from_config_and_short_specs(tmp_path):
    from gcpipe.players import PlayerBook

    ckpt.save(MinGRUPolicy(generator=torch.Generator().manual_seed(9)), tmp_path / "net.bin", "5c")
    book = PlayerBook({"deep": {"kind": "search", "path": str(tmp_path / "net.bin"), "simulations": 300,
                                "variant": "puct", "c_puct": 2.0, "rollouts": 2, "rollout_weight": 0.25}})
    deep, short = book.field(["deep", f"search:{tmp_path / 'net.bin'}:50"])
    search = deep.settings["search"]
    assert (deep.kind, search.simulations, search.variant, search.c_puct) == ("search", 300, "puct", 2.0)
    assert deep.identity["rollout_weight"] == 0.25 and deep.identity["sha256"] == ckpt.load(tmp_path / "net.bin").sha256
    assert (short.name, short.settings["search"].simulations, short.settings["search"].variant) == ("net-s50", 50, "gumbel")
    with pytest.raises(UserError, match="value 'calibrated' needs a calibration file"):
        PlayerBook({"c": {"kind": "search", "path": str(tmp_path / "net.bin"), "value": "calibrated"}}).resolve("c")
    for bad in (f"search:{tmp_path / 'net.bin'}", f"search:{tmp_path / 'net.bin'}:\u00b2"):
        with pytest.raises(UserError, match="write search:PATH:SIMULATIONS"):
            book.resolve(bad)


@pytest.mark.parametrize("search_side", ["guerrilla", "coin"])
def test_match_games_are_the_documented_protocol(tmp_path, search_side):
    """Every game of a batched match equals the game replayed alone by the player protocol: the
    search player steps on the other side's position before that side moves."""
    from gcpipe.match import match
    from gcpipe.match.ledger import read_ledger

    ckpt.save(MinGRUPolicy(generator=torch.Generator().manual_seed(12)), tmp_path / "net.bin", "5c")
    spec = f"s=search:{tmp_path / 'net.bin'}:6@0"
    pair = (spec, "greedy@1") if search_side == "guerrilla" else ("greedy@0", spec.replace("@0", "@1"))
    records = read_ledger(match(*pair, 12, out=tmp_path / "cell.jsonl", workers=1, progress=False).ledger)
    player = SearchPlayer(tmp_path / "net.bin", make_settings(simulations=6))
    player.start(1)
    slot = np.zeros(1, np.int32)
    greedy = parse_spec("greedy").runtime()
    greedy.start(1)
    side = GUERRILLA if search_side == "guerrilla" else COIN
    for record in records:
        batch = GameBatch(1)
        batch.reset(0, record["seed"])
        player.new_games(slot)
        while batch.winners[0] == NO_SIDE:
            if batch.to_move[0] == side:
                action = player.choose(batch, slot)
            else:
                player.observe(batch, slot)
                action = greedy.choose(batch, slot)
            batch.apply(slot, action)
        assert (SIDE_NAMES[batch.winners[0]], int(batch.plies[0])) == (record["winner"], record["plies"]), record["game"]


def test_a_search_player_plays_in_network_sized_tasks(tmp_path):
    """Tasks are the unit a killed match keeps: search games, slower than a net's, get no larger ones."""
    from gcpipe.match.pool import _task_size

    ckpt.save(MinGRUPolicy(generator=torch.Generator().manual_seed(12)), tmp_path / "net.bin", "5c")
    search, net, greedy = (parse_spec(spec) for spec in (f"search:{tmp_path / 'net.bin'}:4", f"net:{tmp_path / 'net.bin'}",
                                                         "greedy"))
    assert _task_size(search, greedy, 10_000, 2) == _task_size(greedy, search, 10_000, 2) <= \
           _task_size(net, greedy, 10_000, 2) < _task_size(greedy, greedy, 10_000, 2)
