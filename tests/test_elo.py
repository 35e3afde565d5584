import csv
import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from gcpipe.cli import app
from gcpipe.elo import (OUTPUT_FILES, Anchor, CrossTable, crosstable_from_ledgers, elo_table,
                        fit_elo, parse_crosstable_markdown, read_crosstable, write_elo_outputs)
from gcpipe.errors import UserError
from gcpipe.match.ledger import LedgerWriter, game_seed

# baselines.md §1-§2: the published field (100 games per cell) and its side-specific Elo.
PUBLISHED = """
| Guerrilla / COIN | Random | Greedy | Puffer 40 | MCTS 2K | MCTS 10K |
| --- | ---: | ---: | ---: | ---: | ---: |
| Random | 8-92 | 0-100 | 0-100 | 0-100 | 0-100 |
| Greedy | 98-2 | 33-67 | 1-99 | 0-100 | 0-100 |
| Puffer 40 | 96-4 | 99-1 | 15-85 | 12-88 | 9-91 |
| MCTS 2K | 99-1 | 100-0 | 50-50 | 30-70 | 11-89 |
| MCTS 10K | 100-0 | 100-0 | 84-16 | 81-19 | 65-35 |
"""
PUBLISHED_ELO = {"Random": (338, 727), "Greedy": (1120, 1189), "Puffer 40": (1636, 1879),
                 "MCTS 2K": (1834, 1969), "MCTS 10K": (2200, 2108)}


@pytest.fixture(scope="module")
def published():
    return parse_crosstable_markdown(PUBLISHED)


def test_published_table_is_parsed(published):
    assert published.guerrillas == published.coins == tuple(PUBLISHED_ELO)
    assert published.results[("Greedy", "Greedy")] == (33, 67)
    assert published.results[("MCTS 10K", "Puffer 40")] == (84, 16)
    assert len(published.results) == 25


@pytest.mark.parametrize("player", list(PUBLISHED_ELO))
def test_published_elo_is_reproduced_within_one_point(published, player):
    ratings = fit_elo(published)
    guerrilla, coin = PUBLISHED_ELO[player]
    assert abs(ratings.rating(player, "guerrilla") - guerrilla) <= 1
    assert abs(ratings.rating(player, "coin") - coin) <= 1


def test_mean_anchor_and_named_anchor(published):
    by_mean = fit_elo(published)
    assert by_mean.elo.mean() == pytest.approx(1500, abs=1e-9)
    shifted = fit_elo(published, Anchor.parse("mean:0"))
    np.testing.assert_allclose(shifted.elo, by_mean.elo - 1500, atol=1e-6)
    named = fit_elo(published, Anchor.parse("Greedy/guerrilla:1000"))
    assert named.rating("Greedy", "guerrilla") == pytest.approx(1000, abs=1e-9)
    np.testing.assert_allclose(named.elo - named.elo[0], by_mean.elo - by_mean.elo[0], atol=1e-6)
    assert named.ci95[named.entities.index(("Greedy", "guerrilla"))] == 0
    assert (np.delete(named.ci95, named.entities.index(("Greedy", "guerrilla"))) > 0).all()


@pytest.mark.parametrize("spec", ["1500", "mean", "mean:x", "Greedy:1000", "Greedy/white:1",
                                  "/coin:1", "mean:nan"])
def test_bad_anchor_specs(spec):
    with pytest.raises(UserError, match="bad anchor"):
        Anchor.parse(spec)


def test_anchor_must_be_in_the_field(published):
    with pytest.raises(UserError, match="anchor Nobody/coin is not in the field"):
        fit_elo(published, Anchor.parse("Nobody/coin:1000"))


def test_single_cell_matches_the_closed_form():
    # One cell: the MLE difference is the log-odds of the prior-smoothed score, and its
    # variance (natural units) is 1 / (n p (1 - p)); with a mean anchor each side carries half.
    table = CrossTable.from_cells([("a", "b", 30, 10)])
    ratings = fit_elo(table)
    won, played = 30.5, 41.0
    difference = 400 * math.log10(won / (played - won))
    assert ratings.rating("a", "guerrilla") == pytest.approx(1500 + difference / 2, abs=1e-6)
    assert ratings.rating("b", "coin") == pytest.approx(1500 - difference / 2, abs=1e-6)
    p = won / played
    half_width = 1.959963984540054 * 400 / math.log(10) * math.sqrt(1 / (played * p * (1 - p)))
    np.testing.assert_allclose(ratings.ci95, [half_width / 2] * 2, rtol=1e-6)


def test_a_lopsided_field_reaches_the_maximum_likelihood():
    """From 0, scipy's hybrid root finder stalls on this field (a 10-0 cell beside a 948-52 one)
    and the fit raised; the ratings are the optimum an independent Newton iteration reaches
    (gradient 5e-14), and the log-likelihood's gradient vanishes there."""
    cells = [("p0", "p0", 3, 7), ("p0", "p1", 4, 6), ("p1", "p0", 10, 0), ("p1", "p1", 948, 52)]
    ratings = fit_elo(CrossTable.from_cells(cells))
    assert np.round(ratings.elo, 3).tolist() == [1305.915, 1887.214, 1423.149, 1383.722]
    theta = {entity: elo * math.log(10) / 400 for entity, elo in zip(ratings.entities, ratings.elo)}
    gradient = dict.fromkeys(theta, 0.0)
    for g, c, g_wins, c_wins in cells:      # d(log-likelihood)/d(rating), half-game priors included
        d = theta[(g, "guerrilla")] - theta[(c, "coin")]
        residual = g_wins + 0.5 - (g_wins + c_wins + 1) / (1 + math.exp(-d))
        gradient[(g, "guerrilla")] += residual
        gradient[(c, "coin")] -= residual
    assert max(map(abs, gradient.values())) < 1e-9


def test_more_games_give_narrower_intervals(published):
    fourfold = CrossTable.from_cells([(g, c, 4 * gw, 4 * cw) for g, c, gw, cw in published.cells()])
    few, many = fit_elo(published), fit_elo(fourfold)
    assert (many.ci95 < few.ci95).all()
    # Roughly halved (sqrt(4)), not exactly because the half-game priors do not scale.
    assert np.all(np.abs(many.ci95 / few.ci95 - 0.5) < 0.1)
    assert (few.ci95 > 20).all() and (few.ci95 < 200).all()


def test_disconnected_field_names_its_groups():
    table = CrossTable.from_cells([("a", "b", 5, 5), ("c", "d", 6, 4), ("a", "e", 1, 1)])
    with pytest.raises(UserError, match=r"not connected.*\{a/guerrilla, b/coin, e/coin\} \| "
                                        r"\{c/guerrilla, d/coin\}"):
        fit_elo(table)


def test_player_order(published):
    order = list(reversed(PUBLISHED_ELO))
    table = parse_crosstable_markdown(PUBLISHED, order=order)
    assert table.guerrillas == table.coins == tuple(order)
    with pytest.raises(UserError, match="missing: Random"):
        parse_crosstable_markdown(PUBLISHED, order=order[:-1])
    with pytest.raises(UserError, match="not in the results: Ghost"):
        parse_crosstable_markdown(PUBLISHED, order=order + ["Ghost"])


def test_markdown_parse_errors():
    with pytest.raises(UserError, match="no table with a 'Guerrilla / COIN' header"):
        parse_crosstable_markdown("| a | b |\n| --- | --- |\n")
    with pytest.raises(UserError, match=r"<text>:3: cell 'x' is not 'Gwins-Cwins'"):
        parse_crosstable_markdown("| Guerrilla / COIN | b |\n| --- | ---: |\n| a | x |\n")


def _write_ledger(path, guerrilla, coin, winners, ids=None):
    ids = ids or {}
    with LedgerWriter(path) as writer:
        for game, winner in enumerate(winners):
            writer.append({"cell": f"{guerrilla}__{coin}", "guerrilla": guerrilla, "coin": coin,
                           "game": game, "seed": game_seed(0, 1, game), "winner": winner, "plies": 40,
                           "end": "coins_cleared" if winner == "guerrilla" else "stones_wiped",
                           "guerrilla_id": ids.get(guerrilla, {"kind": guerrilla}),
                           "coin_id": ids.get(coin, {"kind": coin}), "engine": "0123456789abcdef"})


def _ledger_field(folder):
    counts = {("greedy", "greedy"): (3, 7), ("greedy", "random"): (9, 1),
              ("random", "greedy"): (0, 10), ("random", "random"): (1, 9)}
    paths = []
    for (g, c), (gw, cw) in counts.items():
        paths.append(folder / f"{g}__{c}.jsonl")
        _write_ledger(paths[-1], g, c, ["guerrilla"] * gw + ["coin"] * cw)
    return paths, counts


def test_crosstable_from_ledgers(tmp_path):
    paths, counts = _ledger_field(tmp_path)
    table = crosstable_from_ledgers(paths)
    assert table.results == counts
    assert table.guerrillas == ("greedy", "random")
    assert table.player_ids == {"greedy": {"kind": "greedy"}, "random": {"kind": "random"}}
    direct = fit_elo(CrossTable.from_cells([(g, c, *wc) for (g, c), wc in counts.items()]))
    np.testing.assert_allclose(fit_elo(table).elo, direct.elo)


def test_shards_of_a_cell_add_up_and_overlaps_are_caught(tmp_path):
    first, second = tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"
    _write_ledger(first, "a", "b", ["guerrilla", "coin"])
    _write_ledger(second, "a", "b", ["coin", "coin", "coin"])
    with pytest.raises(UserError, match=f"game 0 is in both {first} and {second}"):
        crosstable_from_ledgers([first, second])


def test_one_name_for_two_players_is_an_error(tmp_path):
    first, second = tmp_path / "a__b.jsonl", tmp_path / "b__a.jsonl"
    _write_ledger(first, "a", "b", ["coin"], ids={"a": {"kind": "net", "sha256": "11"}})
    _write_ledger(second, "b", "a", ["coin"], ids={"a": {"kind": "net", "sha256": "22"}})
    with pytest.raises(UserError, match="player 'a' is .*'11'.* but .*'22'"):
        crosstable_from_ledgers([first, second])


def test_outputs_are_written_parse_and_are_deterministic(tmp_path):
    (tmp_path / "field.md").write_text(PUBLISHED)
    first = elo_table(crosstable=tmp_path / "field.md", out_dir=tmp_path / "one")
    elo_table(crosstable=tmp_path / "field.md", out_dir=tmp_path / "two")
    for name in OUTPUT_FILES:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    out = tmp_path / "one"
    rows = list(csv.DictReader(open(out / "ratings.csv")))
    assert len(rows) == 10 and rows[0]["player"] == "MCTS 10K" and rows[0]["side"] == "guerrilla"
    assert [int(r["rank"]) for r in rows] == list(range(1, 11))
    assert float(rows[0]["elo"]) == pytest.approx(first.rating("MCTS 10K", "guerrilla"), abs=1e-3)
    data = json.loads((out / "ratings.json").read_text())
    assert {(e["player"], e["side"]): round(e["elo"]) for e in data["ratings"]} == {
        (p, s): elo for p, pair in PUBLISHED_ELO.items() for s, elo in zip(("guerrilla", "coin"), pair)}
    assert data["anchor"] == {"entity": None, "value": 1500.0}
    assert "| Random | 338 | 727 |" in (out / "ratings.md").read_text()
    assert "95% Wald interval" in (out / "ratings.md").read_text()
    # The cross table round-trips through both of its file formats.
    assert read_crosstable(out / "crosstable.md").results == first_table_results()
    assert read_crosstable(out / "crosstable.json").results == first_table_results()
    assert len(list(csv.DictReader(open(out / "crosstable.csv")))) == 25
    for png in ("ratings.png", "crosstable.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"matplotlib" not in (out / png).read_bytes()
    assert not [p for p in out.iterdir() if p.name not in OUTPUT_FILES]


def first_table_results():
    return parse_crosstable_markdown(PUBLISHED).results


def test_cli_elo(tmp_path):
    paths, _ = _ledger_field(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["elo", *map(str, paths), "--out", str(tmp_path / "elo"),
                                 "--anchor", "random/guerrilla:0", "--order", "random,greedy"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "| Rank | Player | Side | Elo | ± | Games | Score % |"
    assert "| random | Guerrilla | 0 | 0 | 20 | 5.0 |" in result.output
    table = read_crosstable(tmp_path / "elo" / "crosstable.json")
    assert table.guerrillas == ("random", "greedy")
    bad = runner.invoke(app, ["elo", str(paths[0]), "--out", str(tmp_path / "x"), "--anchor", "zz"])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines() == [
        "gcpipe: error: bad anchor 'zz': expected 'mean:VALUE' or 'PLAYER/SIDE:VALUE'"]


def test_elo_with_a_config_takes_only_the_cells_of_its_match_plan(tmp_path):
    # A tournament run by hand into results/matches/ (100 games a cell) sat where the pipeline's
    # 1000-game cells go; Snakemake kept it as the cell's output and the table mixed the two.
    runner = CliRunner()
    played = runner.invoke(app, ["tournament", "random", "greedy", "--games", "10", "--workers", "1",
                                 "--out", str(tmp_path / "matches")])
    assert played.exit_code == 0, played.output
    ledgers = sorted(str(path) for path in (tmp_path / "matches").glob("*.jsonl"))
    config = tmp_path / "config.yaml"

    def elo(games=10, field="[random, greedy]", rosters=(0, 1)):
        config.write_text(f"players: {{random: {{kind: random, roster: {rosters[0]}}}, "
                          f"greedy: {{kind: greedy, roster: {rosters[1]}}}}}\n"
                          f"matches: {{games: {games}, field: {field}}}\n")
        return runner.invoke(app, ["elo", *ledgers, "--out", str(tmp_path / "elo"), "--config", str(config)])

    assert elo().exit_code == 0
    hand_run = " (a match or tournament run by hand into its folder?); move it away and rerun\n"
    first = tmp_path / "matches" / "greedy__greedy.jsonl"
    planned = elo(games=20)
    assert (planned.exit_code, planned.stderr) == (2, (
        f"gcpipe: error: {first}: cell greedy__greedy holds games 0-9 where the config plans 0-19: not this "
        f"pipeline's ledger" + hand_run))
    seeded = elo(rosters=(2, 1))
    assert (seeded.exit_code, seeded.stderr) == (2, (
        f"gcpipe: error: {tmp_path / 'matches' / 'greedy__random.jsonl'} game 0 has seed {game_seed(1, 0, 0)}, but "
        f"roster positions 1/2 give {game_seed(1, 2, 0)}: it was played with other roster positions: not this "
        f"pipeline's ledger" + hand_run))
    unplanned = elo(field="[random]")
    assert (unplanned.exit_code, unplanned.stderr) == (2, (
        f"gcpipe: error: {first}: cell greedy__greedy is not in the config's match plan; move the ledger away\n"))


def test_one_sided_players_keep_the_field_order(tmp_path):
    table = CrossTable.from_cells([("a", "b", 3, 7), ("a", "c", 5, 5), ("d", "b", 1, 1)])
    assert table.players == ("a", "b", "c", "d")
    assert (table.guerrillas, table.coins) == (("a", "d"), ("b", "c"))
    write_elo_outputs(fit_elo(table), table, tmp_path)
    assert read_crosstable(tmp_path / "crosstable.json") == table
    assert "| d | 1-1 | — |" in (tmp_path / "crosstable.md").read_text()
    assert "| b | — | 1566 |" in (tmp_path / "ratings.md").read_text()


# --- differences, superiority, head to head, the Ordo-style summary ----------------------------
Z95 = 1.959963984540054
NATS = 400 / math.log(10)


def test_covariance_gives_the_intervals(published):
    for anchor in ("mean:1500", "Greedy/guerrilla:1000"):
        ratings = fit_elo(published, Anchor.parse(anchor))
        np.testing.assert_allclose(Z95 * np.sqrt(np.diag(ratings.covariance)), ratings.ci95, rtol=1e-12, atol=1e-12)


def test_a_single_cell_difference_and_prediction_are_the_closed_form():
    from gcpipe.elo.superiority import difference, head_to_head

    table = CrossTable.from_cells([("a", "b", 30, 10)])
    ratings = fit_elo(table)
    won, played = 30.5, 41.0
    d, se = difference(ratings, 0, 1)
    assert d == pytest.approx(NATS * math.log(won / (played - won)), rel=1e-9)
    assert se == pytest.approx(NATS / math.sqrt(played * (won / played) * (1 - won / played)), rel=1e-9)
    [cell] = head_to_head(ratings, table)
    assert cell == {"guerrilla": "a", "coin": "b", "games": 40, "guerrilla_wins": 30, "coin_wins": 10,
                    "guerrilla_win_rate": 0.75, "expected_win_rate": round(won / played, 6),
                    "elo_diff": round(d, 3), "ci95": round(Z95 * se, 3)}


def test_differences_do_not_depend_on_the_anchor_and_los_is_complementary(published):
    from gcpipe.elo.superiority import side_comparisons

    by_mean = fit_elo(published)
    named = fit_elo(published, Anchor.parse("MCTS 2K/coin:0"))
    for side in ("guerrilla", "coin"):
        players, diff, ci95, los = side_comparisons(by_mean, side)
        _, diff_named, ci95_named, los_named = side_comparisons(named, side)
        assert players == list(PUBLISHED_ELO)
        np.testing.assert_allclose(diff_named, diff, atol=1e-6)
        np.testing.assert_allclose(ci95_named, ci95, rtol=1e-6)
        off_diagonal = ~np.eye(len(players), dtype=bool)
        np.testing.assert_allclose((los + los.T)[off_diagonal], 1.0, rtol=1e-12)
        # The interval of a difference is not the two entries' intervals combined as if independent.
        assert not np.allclose(ci95[0, 1], np.hypot(*by_mean.ci95[[0, 1] if side == "guerrilla" else [5, 6]]))
    g = {name: k for k, (name, side) in enumerate(by_mean.entities) if side == "coin"}
    expected = 0.5 * math.erfc(-(by_mean.elo[g["MCTS 2K"]] - by_mean.elo[g["Puffer 40"]]) / math.sqrt(2) / math.sqrt(
        by_mean.covariance[g["MCTS 2K"], g["MCTS 2K"]] + by_mean.covariance[g["Puffer 40"], g["Puffer 40"]]
        - 2 * by_mean.covariance[g["MCTS 2K"], g["Puffer 40"]]))
    assert side_comparisons(by_mean, "coin")[3][3, 2] == pytest.approx(expected, rel=1e-12)


def test_ordo_summary_of_two_players_is_the_closed_form():
    from gcpipe.elo import fit_players

    # Two cells, two free parameters: the fit reproduces both (prior-smoothed) cells exactly, so
    # A = mean of the two log-odds and r_a - r_b = half their difference.
    table = CrossTable.from_cells([("a", "b", 30, 10), ("b", "a", 12, 28)])
    players = fit_players(table)
    first, second = math.log(30.5 / 10.5), math.log(12.5 / 28.5)
    assert players.advantage == pytest.approx(NATS * (first + second) / 2, rel=1e-8)
    assert players.elo[0] - players.elo[1] == pytest.approx(NATS * (first - second) / 2, rel=1e-8)
    assert players.elo.mean() == pytest.approx(1500, abs=1e-9)
    variances = [1 / (41 * p * (1 - p)) for p in (30.5 / 41, 12.5 / 41)]
    assert players.advantage_ci95 == pytest.approx(Z95 * NATS * math.sqrt(sum(variances)) / 2, rel=1e-7)
    assert players.ci95[0] == pytest.approx(Z95 * NATS * math.sqrt(sum(variances)) / 4, rel=1e-7)
    named = fit_players(table, Anchor.parse("b/coin:1000"))
    assert named.elo[1] - named.advantage / 2 == pytest.approx(1000, abs=1e-9)
    assert named.ci95[0] > 0 and named.advantage == pytest.approx(players.advantage, rel=1e-9)


def test_ordo_summary_needs_cells_that_separate_strength_from_side():
    from gcpipe.elo import fit_players

    with pytest.raises(UserError, match="cannot tell the players' strengths from the Guerrilla advantage"):
        fit_players(CrossTable.from_cells([("a", "b", 30, 10), ("a", "c", 20, 20)]))


def test_ordo_and_superiority_outputs(tmp_path):
    from gcpipe.elo import ORDO_FILES

    (tmp_path / "field.md").write_text(PUBLISHED)
    for folder in ("one", "two"):
        result = CliRunner().invoke(app, ["elo", "--crosstable", str(tmp_path / "field.md"),
                                          "--out", str(tmp_path / folder), "--ordo"])
        assert result.exit_code == 0, result.output
    for name in OUTPUT_FILES + ORDO_FILES:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    out = tmp_path / "one"
    rows = list(csv.DictReader(open(out / "superiority.csv")))
    assert len(rows) == 2 * 5 * 4
    assert {(r["side"], r["player"], r["opponent"]) for r in rows if float(r["los"]) > 0.5} == {
        (side, a, b) for side in ("guerrilla", "coin") for i, a in enumerate(PUBLISHED_ELO)
        for j, b in enumerate(PUBLISHED_ELO) if i > j}
    cells = json.loads((out / "headtohead.json").read_text())["cells"]
    assert [(c["guerrilla"], c["coin"], c["guerrilla_wins"]) for c in cells] == [
        (g, c, gw) for g, c, gw, _ in parse_crosstable_markdown(PUBLISHED).cells()]
    ordo = json.loads((out / "ordo.json").read_text())
    assert [e["player"] for e in ordo["ratings"]] == ["MCTS 10K", "MCTS 2K", "Puffer 40", "Greedy", "Random"]
    assert ordo["degrees_of_freedom"] == 4 and ordo["deviance_vs_side_specific"] > 0
    assert "Guerrilla advantage A = " in (out / "ordo.md").read_text()
    for png in ("superiority.png", "ordo.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
