"""The project's text against docs/spec/: every citation of the specification (`rules.md §8`,
`model.md §2`, `rules.md §4.3`, `rules.md §1-§3`, `rules.md §4.4, §5, §6`, a page alone) names a page
of docs/spec/ and sections of it that exist, as docs/spec/index.md defines the form; the published
tables of baselines.md are the ones the tests use; and no tracked text tells the story of how the
project was made (work periods, a tracker the reader does not have)."""
import bisect
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "docs" / "spec"
PAGES = ("rules.md", "model.md", "baselines.md")

# A numbered heading: `## 8. Random numbers and seeds` is section 8, `### 4.3 No legal action` 4.3.
HEADING = re.compile(r"^(?:## (\d+)\. |### (\d+\.\d+) )", re.M)
NUMBER = r"\d+(?:\.\d+)?"
# A page, with any path before it (`docs/spec/`, `spec/`, `../spec/`), then its sections if it
# cites some: `§N` or `§N.M`, joined by `-`/`–` (a range), `,` or `and` (a list), every member with
# its own `§`.  Also the reversed form `§N of rules.md`.
CITATION = re.compile(
    rf"(?<![\w.-])(?P<path>[\w./-]*/)?(?P<page>rules|model|baselines)\.md\b(?P<anchor>#[\w-]+)?"
    rf"(?P<sections>\s*§{NUMBER}(?:\s*(?:[-–,]|and)\s*§{NUMBER})*)?", re.I)
REVERSED = re.compile(rf"§(?P<number>{NUMBER}) of (?P<path>[\w./-]*/)?(?P<page>rules|model|baselines)\.md\b",
                      re.I)
MEMBER = re.compile(rf"(?:(?P<sep>[-–,]|and)\s*)?§(?P<number>{NUMBER})")
# A citation may run over a line break in a comment or docstring: `model.md` / `# §4`.
LINE_BREAK = re.compile(r"[ \t]*\n[ \t]*(?:#+|//|/?\*+|--|>)?[ \t]*")


def tracked_text_files() -> dict[str, str]:
    """Path -> text of every file git tracks that is UTF-8 text."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = {}
    for name in names.decode().split("\0"):
        path = ROOT / name
        if not name or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            files[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return files


def sections_of(text: str) -> set[str]:
    return {top or sub for top, sub in HEADING.findall(text)}


def joined_lines(text: str) -> tuple[str, list[int]]:
    """The text with the line breaks inside comments and paragraphs made spaces, so that a citation
    split over two lines reads whole, and the offset in it where each original line starts."""
    pieces, starts, pos, length = [], [], 0, 0
    for m in LINE_BREAK.finditer(text):
        starts.append(length)
        pieces.append(text[pos:m.start()] + " ")
        length += m.start() - pos + 1
        pos = m.end()
    starts.append(length)
    pieces.append(text[pos:])
    return "".join(pieces), starts


def slug(heading: str) -> str:
    """The anchor GitHub and MkDocs give a heading: lower case, punctuation dropped, spaces as -."""
    return re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", heading.strip().lower()))


def anchors_of(text: str) -> set[str]:
    return {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def _expand(first: str, last: str) -> list[str]:
    """Every section of the range first..last at one level: 1..3 -> 1, 2, 3; 4.1..4.3 -> 4.1, 4.2, 4.3."""
    a, b = first.split("."), last.split(".")
    if len(a) != len(b) or a[:-1] != b[:-1] or int(a[-1]) > int(b[-1]):
        return [f"{first}-{last} (not a range)"]
    return [".".join(a[:-1] + [str(n)]) for n in range(int(a[-1]), int(b[-1]) + 1)]


def cited(sections: str) -> list[str]:
    """The sections a citation's `§…` part names, ranges expanded."""
    out = []
    for m in MEMBER.finditer(sections):
        if m["sep"] in ("-", "–") and out:
            out[-1:] = _expand(out[-1], m["number"])
        else:
            out.append(m["number"])
    return out


def citation_errors(files: dict[str, str], pages: dict[str, str]) -> list[str]:
    """One line for each citation that names no page of docs/spec/ or a section or anchor it lacks.
    `pages` maps a page's file name to its text."""
    sections = {name: sections_of(text) for name, text in pages.items()}
    errors = []
    for name, text in files.items():
        joined, starts = joined_lines(text)
        found = [(m.start(), m["path"], m["page"], m["anchor"], cited(m["sections"] or ""), m[0])
                 for m in CITATION.finditer(joined)]
        found += [(m.start(), m["path"], m["page"], None, [m["number"]], m[0]) for m in REVERSED.finditer(joined)]
        for start, path, page, anchor, numbers, quote in found:
            page = page.lower() + ".md"
            where = f"{name}:{bisect.bisect_right(starts, start)}: {quote.strip()!r}"
            if path and not path.endswith("spec/"):
                errors.append(f"{where}: the specification's pages are in docs/spec/, not {path}")
            elif page not in pages:
                errors.append(f"{where}: no page docs/spec/{page}")
                continue
            errors += [f"{where}: docs/spec/{page} has no section {n}" for n in numbers
                       if n not in sections[page]]
            if anchor and anchor[1:] not in anchors_of(pages[page]):
                errors.append(f"{where}: docs/spec/{page} has no heading with the anchor {anchor}")
        if Path(name).parent == Path("docs/spec") and Path(name).name in pages:
            # A page's bare `§N` is its own section N.
            bare = REVERSED.sub(lambda m: " " * len(m[0]), CITATION.sub(lambda m: " " * len(m[0]), joined))
            errors += [f"{name}:{bisect.bisect_right(starts, m.start())}: '§{m['number']}': no section "
                       f"{m['number']} on this page" for m in MEMBER.finditer(bare)
                       if m["number"] not in sections[Path(name).name]]
    return errors


def spec_pages(folder: Path = SPEC) -> dict[str, str]:
    return {page: (folder / page).read_text() for page in PAGES if (folder / page).is_file()}


def test_every_citation_of_the_specification_resolves():
    files = tracked_text_files()
    del files["tests/test_docs.py"]             # its examples of wrong citations
    errors = citation_errors(files, spec_pages())
    assert not errors, "\n".join(errors)
    # The test reads what it should: the code cites the spec over a hundred times.
    assert sum(len(CITATION.findall(LINE_BREAK.sub(" ", text))) for text in files.values()) > 100


def test_code_cites_the_specification_in_one_form():
    """Outside the Markdown documents (whose links may need a path), a citation is the page's name and
    its sections, `rules.md §8`, as docs/spec/index.md defines: no path before it, no `§N of page`.
    (mkdocs.yml's navigation names the pages by path: it cites nothing.)"""
    files = tracked_text_files()
    del files["tests/test_docs.py"], files["mkdocs.yml"], files["tests/test_docs_site.py"]
    other = [f"{name}: {m[0]!r}" for name, text in files.items() if not name.endswith(".md")
             for m in [*CITATION.finditer(LINE_BREAK.sub(" ", text)), *REVERSED.finditer(text)]
             if m["path"] or m.re is REVERSED]
    assert other == []


def test_the_pages_and_their_numbered_sections_exist():
    pages = spec_pages()
    assert sorted(pages) == sorted(PAGES)
    assert (SPEC / "index.md").is_file()
    numbered = {page: sorted(sections_of(text), key=lambda n: [int(p) for p in n.split(".")])
                for page, text in pages.items()}
    assert numbered["rules.md"] == ["1", "2", "3", "4", "4.1", "4.2", "4.3", "4.4", "5", "6", "7", "7.1",
                                    "7.2", "7.3", "8", "9"]
    assert numbered["model.md"] == ["1", "2", "3", "4", "5", "6"]
    assert numbered["baselines.md"] == ["1", "2", "3", "4"]


def test_the_page_names_are_unambiguous():
    """`rules.md` means docs/spec/rules.md: no other tracked file has one of the three names."""
    others = [name for name in tracked_text_files() if Path(name).name in PAGES
              and Path(name).parent != Path("docs/spec")]
    assert others == []


@pytest.mark.parametrize("text, error", [
    ("see rules.md §8.", None),
    ("see docs/spec/rules.md §4.3 and model.md", None),
    ("(rules.md §4.4, §5, §6)", None),
    ("(rules.md §1 and §3), §2 of model.md", None),
    ("board geometry (rules.md §1-§3)", None),
    ("the checks of rules.md §4.1-§4.3.", None),
    ("[seeds](spec/rules.md#8-random-numbers-and-seeds)", None),
    ("#   the network (model.md\n    # §1) over", None),
    ("Rules.md §6 pays", None),
    ("see rules.md §10", "docs/spec/rules.md has no section 10"),
    ("see rules.md §4.5", "docs/spec/rules.md has no section 4.5"),
    ("see rules.md §8-§10", "docs/spec/rules.md has no section 10"),
    ("see model.md §2, §7", "docs/spec/model.md has no section 7"),
    ("§7 of model.md", "docs/spec/model.md has no section 7"),
    ("(model.md\n * §9) and", "docs/spec/model.md has no section 9"),
    ("see docs/rules.md §8", "the specification's pages are in docs/spec/, not docs/"),
    ("[seeds](spec/rules.md#8-random-numbers)", "no heading with the anchor #8-random-numbers"),
])
def test_citation_forms(text, error):
    errors = citation_errors({"x.py": text}, spec_pages())
    if error is None:
        assert errors == []
    else:
        assert len(errors) == 1 and error in errors[0], errors


def test_an_error_names_the_line_where_the_citation_starts():
    errors = citation_errors({"x.c": "/* one\n * two (model.md\n * §9) */\n"}, spec_pages())
    assert errors == ["x.c:2: 'model.md §9': docs/spec/model.md has no section 9"]
    page = spec_pages()["model.md"]
    errors = citation_errors({"docs/spec/model.md": page + "\nSee §8.\n"}, spec_pages())
    assert errors == [f"docs/spec/model.md:{page.count(chr(10)) + 2}: '§8': no section 8 on this page"]


def test_a_renamed_or_missing_section_fails(tmp_path):
    """The tree's own citations against pages with one heading renumbered, and with a page gone."""
    files = tracked_text_files()
    del files["tests/test_docs.py"]
    pages = spec_pages()
    renamed = dict(pages, **{"rules.md": pages["rules.md"].replace("## 8. Random", "## 10. Random")})
    errors = citation_errors(files, renamed)
    assert errors and all("no section 8" in e for e in errors)
    assert any(e.startswith("gcpipe/match/ledger.py:") and "'rules.md §8'" in e for e in errors)
    renamed = dict(pages, **{"rules.md": pages["rules.md"].replace("### 4.3 No", "### 4.5 No")})
    assert any("has no section 4.3" in e for e in citation_errors(files, renamed))
    missing = {page: text for page, text in pages.items() if page != "model.md"}
    assert any("no page docs/spec/model.md" in e for e in citation_errors(files, missing))


def _markdown_table(text: str, header: str) -> list[list[str]]:
    lines = text[text.index(header):].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_published_tables_are_the_ones_the_tests_use():
    """baselines.md §1 and §2 hold the cross table and the Elo that tests/test_elo.py reproduces."""
    from test_elo import PUBLISHED, PUBLISHED_ELO
    page = (SPEC / "baselines.md").read_text()
    assert _markdown_table(page, "| Guerrilla / COIN") == _markdown_table(PUBLISHED, "| Guerrilla / COIN")
    elo = {row[0]: (int(row[1]), int(row[2])) for row in _markdown_table(page, "| Bot |")}
    assert elo == PUBLISHED_ELO


# The story of the project's making: work periods ("the twentieth session", "since the ninth"), a
# tracker the reader does not have ("issue 16", "the 55 %"), its reviewers.  An ssh session,
# `start_new_session` and `new_session` are other things.
ORDINAL = (r"(?:fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|[a-z]+teenth|[a-z]+tieth"
           r"|(?:twenty|thirty|forty)-(?:first|second|third|[a-z]+th))")
NARRATION = [
    re.compile(r"(?<!ssh )(?<!shell-)(?<!scope=\")(?<!scope=')\bsessions?\b", re.I),   # not pytest's scope="session"
    re.compile(r"\bissues?\s*#?\s*\d+", re.I),
    re.compile(r"\bthe issue(?:'s|’s)?\b", re.I),
    re.compile(r"\bissue target", re.I),
    re.compile(r"\breviewers?\b", re.I),
    re.compile(r"\bwork periods?\b", re.I),
    # An ordinal standing for a work period has no noun after it ("since the seventeenth:", "the ninth of
    # 2026-12-04"); "the ninth run", "the seventh digit" and "the sixth start coin" count things.
    re.compile(rf"\b(?:the|this|that)\s+{ORDINAL}(?=\s*(?:[.,;:)]|$|of\s+\d{{4}}|['’]s\b))", re.I),
    re.compile(rf"\b{ORDINAL}\s+(?:session|period|round of work)", re.I),
]


def narration(files: dict[str, str]) -> list[str]:
    out = []
    for name, text in files.items():
        if name == "tests/test_docs.py":
            continue
        for number, line in enumerate(text.splitlines(), 1):
            words = [m[0] for pattern in NARRATION for m in pattern.finditer(line)]
            if words:
                out.append(f"{name}:{number}: {', '.join(map(repr, words))} in {line.strip()[:100]!r}")
    return out


@pytest.mark.parametrize("line, flagged", [
    ("measured in the twentieth session", True),
    ("the ninth of 2026-12-04", True),
    ("MCTS 256 since the seventeenth: docs/runs.md", True),
    ("the twenty-second session's products", True),
    ("Sessions ran on Zen 3", True),
    ("200 k (issue 16; not reached)", True),
    ("the issue's 55 % target", True),
    ("(issue target: met)", True),
    ("as the reviewer asked", True),
    ("a closed ssh session", False),
    ("start_new_session=True", False),
    ('@pytest.fixture(scope="session")', False),
    ("about a tenth of a second", False),
    ("a tenth of MCTS 10K's time", False),
    ("the fifth of the envs that play MCTS", False),
    ("see https://github.com/o/r/issues/164", False),
    ("is the ninth run of the MCTS 64 recipe", False),
    ("different in the seventh digit", False),
    ("The sixth start coin is index 44", False),
    ("the eighteenth's best teacher", True),
    ("as in the twelfth.", True),
])
def test_narration_patterns(line, flagged):
    assert bool(narration({"x.md": line})) is flagged


def test_no_development_history_in_the_project_text():
    """No tracked text narrates the project's development; a run is named by date, commit, machine and
    command.  (README.md and docs/ included.)"""
    found = narration(tracked_text_files())
    assert not found, f"{len(found)} lines:\n" + "\n".join(found)
