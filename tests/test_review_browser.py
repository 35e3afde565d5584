"""The review page in a real browser, as a reader uses it: headless Chromium (Debian's `chromium`)
driven by Playwright (the `browser` extra) opens the file, steps with the keys and the buttons,
jumps to a turning point; the board and the value curve are checked against the ledger's replay
and `gcpipe analyse`, and a screenshot for its layout.  Skipped where either is missing."""
import io
import os
import re
import shutil
import tempfile

import pytest

from gcpipe.analysis.position import AnalysisService
from gcpipe.engine import Game
from gcpipe.match.ledger import read_ledger
from gcpipe.match.replay import replay_record
from review_game import reviewed_game

CHROMIUM = os.environ.get("GCPIPE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
playwright = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install -e "
                                                                "'.[browser]')")
if not os.access(CHROMIUM, os.X_OK):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set GCPIPE_CHROMIUM)",
                allow_module_level=True)

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1100, "height": 800}
CURVE_WIDTH, CURVE_PAD = 600, 24     # the curve's drawing box (gcpipe/analysis/review.py)


@pytest.fixture(scope="module")
def game(tmp_path_factory):
    folder = tmp_path_factory.mktemp("browser")
    reviewed = reviewed_game(folder, folder)
    record = reviewed["record"]
    service = AnalysisService(default_player=reviewed["net"])
    answers = [service.answer({"ledger": str(reviewed["ledger"]), "game": record["game"], "ply": ply})
               for ply in range(record["plies"] + 1)]
    return {"page": reviewed["page"], "record": record, "answers": answers, "replay": replay_record(record)}


@pytest.fixture(scope="module")
def driver():
    """One Playwright driver for the module (a second one may not start while the first runs)."""
    with playwright.sync_playwright() as started:
        yield started


def _browser(driver, profile):
    """Chromium on a fresh profile folder."""
    return driver.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=ARGS, headless=True,
                                                     viewport=VIEWPORT)


@pytest.fixture(scope="module")
def browser_page(game, driver):
    with tempfile.TemporaryDirectory() as profile:
        context = _browser(driver, profile)
        page = context.new_page()
        problems, requests = [], []
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
        page.on("request", lambda request: requests.append(request.url))
        page.goto(game["page"].as_uri())
        yield page, problems, requests
        context.close()


def _board(page) -> tuple[int, list[int], list[int]]:
    board = page.locator("#board")
    numbers = [board.get_attribute(f"data-{key}") for key in ("stones", "coins")]
    # The drawing agrees with the attributes: one disc per stone and per coin.
    for selector, text in (("#board circle.stone", numbers[0]), ("#board circle.coin", numbers[1])):
        assert page.locator(selector).count() == (len(text.split(",")) if text else 0)
    return (int(board.get_attribute("data-ply")),
            *[[int(n) for n in text.split(",")] if text else [] for text in numbers])


def _position(game, ply: int) -> tuple[int, list[int], list[int]]:
    board = Game(game["record"]["seed"])
    for action in game["replay"].actions[:ply]:
        board.apply_action(action)
    return ply, board.stones(), board.coins()


def _fmt(value: float) -> str:
    return f"{'+' if value >= 0 else ''}{value:.3f}"


def test_stepping_through_the_game(game, browser_page):
    page, problems, requests = browser_page
    last = game["record"]["plies"]
    assert _board(page) == _position(game, 0)
    for _ in range(7):
        page.keyboard.press("ArrowRight")
    assert _board(page) == _position(game, 7)
    page.click("#prev")
    page.click("#prev")
    assert _board(page) == _position(game, 5)
    page.keyboard.press("End")
    assert _board(page) == _position(game, last)
    page.keyboard.press("ArrowRight")      # past the end: stays
    assert _board(page) == _position(game, last)
    page.click("#first")
    page.keyboard.press("ArrowLeft")       # before the start: stays
    assert _board(page) == _position(game, 0)
    page.click("#next")
    assert _board(page) == _position(game, 1)
    page.click("#last")
    assert _board(page) == _position(game, last)
    assert page.locator("#plylabel").text_content() == f"Ply {last} / {last}"
    assert problems == [] and all(url.startswith("file://") for url in requests)


def test_values_and_top_moves_are_the_analysis(game, browser_page):
    page, problems, _ = browser_page
    answers = game["answers"]
    for ply in (0, 3, 10, len(answers) - 2):
        page.evaluate(f"window.review.go({ply})")
        answer = answers[ply]
        value = answer["value"]
        assert page.locator("#values").text_content() == (
            f"Guerrilla row {_fmt(round(value['guerrilla'], 4))}, COIN row {_fmt(round(value['coin'], 4))}, "
            f"expected outcome (Guerrilla) {_fmt(round(answer['outcome'], 4))}")
        rows = page.locator("#topmoves tr").all_text_contents()[1:]
        assert [row.split("%")[0] for row in rows] == [
            f"{m['move']}{100 * round(m['prior'], 4):.1f}" for m in answer["moves"][:5]]
    # The curves: one point per position with a value, at the height of the analysis' value rows.
    curve = page.locator("#curve")
    zero, unit = float(curve.get_attribute("data-y-zero")), float(curve.get_attribute("data-y-unit"))
    n = len(answers)
    for row, side in ((0, "guerrilla"), (1, "coin")):
        points = [tuple(map(float, p.split(","))) for p in
                  page.locator(f"#curve-{side}").get_attribute("points").split()]
        expected = [(CURVE_PAD + k * (CURVE_WIDTH - 2 * CURVE_PAD) / (n - 1), zero - a["value"][side] * unit)
                    for k, a in enumerate(answers) if a["value"] is not None]
        assert len(points) == len(expected) == n - 1
        assert all(abs(x - ex) < 0.006 and abs(y - ey) < 0.006 + unit * 1e-4
                   for (x, y), (ex, ey) in zip(points, expected))
    assert problems == []


def test_a_turning_point_is_one_click_away(game, browser_page):
    page, _, _ = browser_page
    page.evaluate("window.review.go(0)")
    outcomes = [a["outcome"] for a in game["answers"]]
    swings = [(abs(round(outcomes[k], 4) - round(outcomes[k - 1], 4)), -k) for k in range(1, len(outcomes) - 1)]
    largest = -max(swings)[1]
    first = page.locator("#turning button").first
    assert first.get_attribute("data-ply") == str(largest)
    first.click()
    assert _board(page) == _position(game, largest)
    cursor = float(page.locator("#cursor").get_attribute("x1"))
    assert abs(cursor - (CURVE_PAD + largest * (CURVE_WIDTH - 2 * CURVE_PAD) / (len(outcomes) - 1))) < 1e-6


def test_the_layout_at_one_ply(game, browser_page):
    from PIL import Image

    page, _, _ = browser_page
    page.evaluate("window.review.go(12)")
    image = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
    assert image.size == (VIEWPORT["width"], VIEWPORT["height"])

    def colours(selector) -> int:
        box = page.locator(selector).bounding_box()
        assert box["width"] > 100 and box["height"] > 100, selector
        assert box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= VIEWPORT["width"], selector
        region = image.crop((int(box["x"]), int(box["y"]), int(box["x"] + box["width"]),
                             int(box["y"] + box["height"])))
        return len(region.getcolors(maxcolors=1 << 16) or range(1 << 16))

    assert colours("#board") > 20 and colours("#curve") > 5      # drawn, not blank
    board, curve = page.locator("#board").bounding_box(), page.locator("#curve").bounding_box()
    assert board["x"] + board["width"] <= curve["x"]             # side by side, not overlapping
    for selector in ("#controls", "#topmoves", "#turning"):
        assert page.locator(selector).is_visible(), selector
    assert re.fullmatch(r"Ply 12 / \d+", page.locator("#plylabel").text_content())


def test_a_person_plays_in_the_browser(tmp_path, driver):
    """gcpipe serve's page: the person clicks legal moves until the game ends; the ledger has it."""
    import threading

    from gcpipe.analysis.serve import Table, make_server

    table = Table("guerrilla", "greedy", tmp_path / "human__greedy.jsonl")
    httpd = make_server(table, port=0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as profile:
            context = _browser(driver, profile)
            page = context.new_page()
            page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/")
            page.wait_for_selector("#legal button.legal")
            clicks = 0
            while page.locator("#legal button.legal").count():
                before = page.evaluate("window.lastState.ply")
                page.locator("#legal button.legal").first.click()
                page.wait_for_function(f"window.lastState.ply > {before}")
                clicks += 1
                state = page.evaluate("window.lastState")
                assert page.locator("#board").get_attribute("data-stones") == ",".join(map(str, state["stones"]))
            context.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
        table.close()
    record, = read_ledger(tmp_path / "human__greedy.jsonl")
    assert (record["plies"], record["winner"], record["end"]) == (len(state["moves"]), state["winner"], state["end"])
    # Every Guerrilla move (points are lower case) was a click: the first legal move each time.
    assert clicks == sum(move[0].islower() for move in state["moves"]) >= 1
    assert state["moves"][0] == "a1-a2"
