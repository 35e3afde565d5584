"""The commands the README and the docs show stay true.  Every line of a code block (fenced or indented) of
README.md, docs/**/*.md and config/README.md that runs `gcpipe` is split as a shell would split it and its
subcommand, sub-subcommand and option names are checked by the command line's own parser (the click
command tree typer builds from gcpipe.cli.app), without running anything; placeholders such as FILE or N
stand for arguments.  A `snakemake` line's targets must be rules of the Snakefile and its --configfile and
--profile must exist (a few representative lines are dry-run); a `python benchmarks/X.py` line's script
must exist."""
import functools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from markdown_it import MarkdownIt

from gcpipe.cli import UsageError, app

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
# Snakemake options followed by values, and how many (-1: every following KEY=VALUE or non-option word).
SNAKEMAKE_VALUES = {"--cores": 1, "-c": 1, "--jobs": 1, "-j": 1, "--configfile": -1, "--configfiles": -1,
                    "--profile": 1, "--report": 1, "--directory": 1, "-d": 1, "--snakefile": 1, "-s": 1,
                    "--executor": 1, "-e": 1, "--latency-wait": 1, "--keep-going": 0, "--config": -1, "-C": -1,
                    "--set-threads": -1, "--set-resources": -1, "--resources": -1, "--default-resources": -1,
                    "--until": -1, "--forcerun": -1, "-R": -1, "--rerun-triggers": -1, "--omit-from": -1,
                    "--local-cores": 1, "--max-jobs-per-second": 1, "--batch": 1, "--dag": 0, "--rulegraph": 0,
                    "--conda-prefix": 1, "--software-deployment-method": -1, "--sdm": -1, "--retries": 1,
                    "--restart-times": 1, "--cluster-generic-submit-cmd": 1, "--apptainer-args": 1}
# Dry runs are a few seconds each: the first few distinct (targets, configfile) pairs only.
DRY_RUNS = 3


def doc_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "config" / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [path for path in files if path.is_file()]


# Fenced blocks of these languages (or none) hold shell lines; yaml, python, text, ... are not read.
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console", "zsh", "shell-session", "shellsession"}


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, logical line) of every shell code block of Markdown `text`: fenced or indented
    (CommonMark, so a list item's indented paragraph is not code), a trailing backslash joining the next
    line.  In a block with `$ ` prompts only the prompted lines are commands (the rest is their output)."""
    found = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type not in ("fence", "code_block") or token.map is None:
            continue
        if token.type == "fence" and token.info.strip().split(" ")[0].lower() not in SHELL_BLOCKS:
            continue
        first = token.map[0] + (1 if token.type == "fence" else 0)
        lines = token.content.splitlines()
        prompted = any(line.lstrip().startswith("$ ") for line in lines)
        pending, start = "", None
        for offset, line in enumerate(lines):
            if start is None:
                if prompted and not line.lstrip().startswith("$ "):
                    continue
                start = first + offset + 1
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            found.append((start, pending + line))
            pending, start = "", None
        if pending.strip():
            found.append((start, pending))
    return found


def inline_code(text: str) -> list[tuple[int, str]]:
    """(line number, text) of every inline code span of Markdown `text` (`gcpipe train --init` in prose)."""
    found = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type == "inline" and token.map is not None:
            found += [(token.map[0] + 1, child.content) for child in token.children if child.type == "code_inline"]
    return found


_REDIRECT = re.compile(r"(?<!\S)(\d?>>?|&>|<)\s*(&\d|\S+)")
_SEPARATORS = {"|", "||", "&&", ";", "&"}


def simple_commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line: split at | || && ; &, redirections, # comments, a `$ ` prompt,
    leading VAR=value assignments and `time` dropped.  A line the shell could not split gives []."""
    line = line.strip()
    if line.startswith("$ "):
        line = line[2:]
    line = _REDIRECT.sub(" ", line)
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:   # an unclosed quote: prose, not a command
        return []
    commands, current = [], []
    for token in tokens + [";"]:
        if token in _SEPARATORS:
            if current:
                commands.append(current)
            current = []
        else:
            current.append(token)
    for command in commands:
        while command and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", command[0]) or command[0] in ("time", "nice")):
            command.pop(0)
    return [command for command in commands if command]


def program(argv: list[str]) -> tuple[str | None, list[str]]:
    """("gcpipe" | "snakemake" | "python", arguments) of a simple command, or (None, argv)."""
    name = argv[0].rsplit("/", 1)[-1]
    if name == "gcpipe":
        return "gcpipe", argv[1:]
    if re.fullmatch(r"python(3(\.\d+)?)?", name):
        if argv[1:3] == ["-m", "gcpipe"]:
            return "gcpipe", argv[3:]
        return "python", argv[1:]
    if name == "snakemake":
        return "snakemake", argv[1:]
    return None, argv


def _words(args: list[str]) -> list[str]:
    """A usage line's notation taken off: [--threads N] -> --threads N; a lone ... dropped."""
    words = []
    for word in args:
        word = word.strip("[]")
        if word and word not in ("...", "…"):
            words.append(word)
    return words


@functools.cache
def cli():
    return typer.main.get_command(app)


def gcpipe_problem(args: list[str]) -> str | None:
    """Why `gcpipe ARGS` would not parse, in the parser's words, or None.  Walks the command tree: at a group
    the first word must be a subcommand; each command's options and arguments are split by its own click
    parser (no callbacks, no value conversion: placeholders stand for values)."""
    command, words, path, parent = cli(), _words(args), "gcpipe", None
    while True:
        ctx = command.context_class(command, info_name=path.rsplit(" ", 1)[-1], parent=parent)
        try:
            _, rest, _ = command.make_parser(ctx).parse_args(args=list(words))
        except UsageError as error:
            return f"{path}: {error.format_message()}"
        if not hasattr(command, "get_command"):
            return f"{path}: unexpected extra arguments {rest}" if rest else None
        if not rest:
            return None   # `gcpipe` or `gcpipe bench` alone: the help
        sub = command.get_command(ctx, rest[0])
        if sub is None:
            return f"{path}: no such command {rest[0]!r} (commands: {', '.join(command.list_commands(ctx))})"
        command, words, path, parent = sub, rest[1:], f"{path} {rest[0]}", ctx


def gcpipe_names_problem(args: list[str]) -> str | None:
    """For a command named in prose (`gcpipe train --init`, `gcpipe bench engine|mcts`): only that its
    subcommands and options exist.  A placeholder (COMMAND) ends the check; a|b names alternatives."""
    command, path = cli(), "gcpipe"
    ctx = command.context_class(command, info_name="gcpipe")
    for word in _words(args):
        if word.startswith("-") and len(word) > 1:
            name = word.split("=", 1)[0]
            names = {opt for param in command.get_params(ctx) for opt in param.opts + param.secondary_opts}
            if name not in names:
                return f"{path}: no such option {name} (options: {', '.join(sorted(names))})"
        elif hasattr(command, "get_command"):
            if not re.fullmatch(r"[a-z][a-z0-9-]*(\\?\|[a-z][a-z0-9-]*)*", word):
                return None   # a placeholder
            alternatives = word.replace("\\|", "|").split("|")
            for alternative in alternatives:
                if command.get_command(ctx, alternative) is None:
                    commands = ", ".join(command.list_commands(ctx))
                    return f"{path}: no such command {alternative!r} (commands: {commands})"
            if len(alternatives) > 1:
                return None
            sub = command.get_command(ctx, word)
            command, path = sub, f"{path} {word}"
            ctx = command.context_class(command, info_name=word, parent=ctx)
    return None


@functools.cache
def snakefile_rules() -> frozenset[str]:
    text = (REPO / "Snakefile").read_text(encoding="utf-8")
    return frozenset(re.findall(r"^(?:rule|checkpoint) (\w+)\s*:", text, re.M))


def snakemake_parts(args: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(targets, {option: values}) of a snakemake command line."""
    targets, options, index = [], {}, 0
    while index < len(args):
        word = args[index]
        index += 1
        if word.startswith("-"):
            name, _, inline = word.partition("=")
            count = SNAKEMAKE_VALUES.get(name, 0)
            values = [inline] if inline else []
            if count > 0 and not inline:
                values, index = args[index:index + count], index + count
            elif count < 0:
                while index < len(args) and not args[index].startswith("-") and (
                        "=" in args[index] or name not in ("--config", "-C", "--set-threads", "--set-resources")):
                    if name in ("--configfile", "--configfiles") and not args[index].endswith((".yaml", ".yml",
                                                                                              ".json")):
                        break
                    values.append(args[index])
                    index += 1
            options.setdefault(name, []).extend(values)
        else:
            targets.append(word)
    return targets, options


def snakemake_problem(args: list[str]) -> str | None:
    targets, options = snakemake_parts(args)
    for target in targets:
        if re.fullmatch(r"\w+", target) and target not in snakefile_rules():
            rules = ", ".join(sorted(snakefile_rules()))
            return f"snakemake: {target!r} is not a rule of the Snakefile (rules: {rules})"
    for path in options.get("--configfile", []) + options.get("--configfiles", []):
        if not (REPO / path).is_file():
            return f"snakemake: --configfile {path} does not exist"
    for profile in options.get("--profile", []):
        if not (REPO / profile).is_dir():
            return f"snakemake: --profile {profile} does not exist"
    return None


def shown_commands(inline: bool = False) -> list[tuple[str, str, list[str]]]:
    """(where, program, arguments) of every command the docs' code blocks show (inline: their code spans)."""
    found = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for number, line in inline_code(text) if inline else code_lines(text):
            for argv in simple_commands(line):
                name, args = program(argv)
                if name is not None:
                    found.append((f"{path.relative_to(REPO)}:{number}", name, args))
    return found


def problems() -> list[str]:
    found = []
    for where, name, args in shown_commands():
        if name == "gcpipe":
            problem = gcpipe_problem(args)
        elif name == "snakemake":
            problem = snakemake_problem(args)
        else:
            script = next((arg for arg in args if not arg.startswith("-")), None)
            problem = (f"python: {script} does not exist" if script and script.startswith("benchmarks/")
                       and not (REPO / script).is_file() else None)
        if problem:
            found.append(f"{where}: {problem}")
    for where, name, args in shown_commands(inline=True):
        problem = (gcpipe_names_problem(args) if name == "gcpipe" else snakemake_problem(args) if name == "snakemake"
                   else None)
        if problem:
            found.append(f"{where}: {problem}")
    return found


# --- the checker's own parts ---------------------------------------------------------------------------

def test_code_lines_are_read_from_fenced_and_indented_blocks_only():
    text = ("Prose: gcpipe match x y --bogus\n\n```bash\n$ gcpipe ckpt info FILE \\\n    --json  # a comment\n```\n\n"
            "    gcpipe elo --anchor mean:1500\n\n- a list item\n\n  gcpipe in a list item's paragraph\n")
    assert code_lines(text) == [(4, "$ gcpipe ckpt info FILE      --json  # a comment"),
                                (8, "gcpipe elo --anchor mean:1500")]


def test_output_and_other_languages_are_not_read_as_commands():
    text = ("```console\n$ gcpipe --version\ngcpipe 0.1.0\n```\n\n```yaml\ngcpipe x: 1\n```\n\n"
            "```text\ngcpipe 0.1.0\n```\n")
    assert code_lines(text) == [(2, "$ gcpipe --version")]


def test_lines_are_split_as_a_shell_would():
    assert simple_commands("$ GCPIPE_X=1 time gcpipe match a b --games 10 > out.txt 2>&1 | tail -3 && ls  # note") == [
        ["gcpipe", "match", "a", "b", "--games", "10"], ["tail", "-3"], ["ls"]]
    assert simple_commands("gcpipe play 'x y") == []
    assert program([".venv/bin/gcpipe", "elo"]) == ("gcpipe", ["elo"])
    assert program(["python", "-m", "gcpipe", "elo"]) == ("gcpipe", ["elo"])
    assert program(["python", "benchmarks/elo_fit.py"]) == ("python", ["benchmarks/elo_fit.py"])


def test_the_parser_check_fails_on_what_the_cli_lacks():
    assert gcpipe_problem(["--version"]) is None
    assert gcpipe_problem(["bench"]) is None
    assert gcpipe_problem(["ckpt", "info", "FILE"]) is None
    assert gcpipe_problem(["match", "G", "C", "--games", "N"]) is None   # a placeholder stands for a number
    assert "No such option: --bogus" in gcpipe_problem(["match", "G", "C", "--bogus"])
    assert "no such command 'mtach'" in gcpipe_problem(["mtach", "G", "C"])
    assert "gcpipe ckpt: no such command 'show'" in gcpipe_problem(["ckpt", "show", "FILE"])
    assert "gcpipe bench train: No such option: --nope" in gcpipe_problem(["bench", "train", "--nope"])
    assert "requires an argument" in gcpipe_problem(["match", "G", "C", "--games"])


def test_commands_named_in_prose_are_checked_by_name():
    assert gcpipe_names_problem(["train", "--init"]) is None
    assert gcpipe_names_problem(["COMMAND", "--help"]) is None
    assert gcpipe_names_problem(["bench", "engine\\|mcts\\|net"]) is None
    assert "no such command 'engin'" in gcpipe_names_problem(["bench", "engine|engin"])
    assert "gcpipe train: no such option --inti" in gcpipe_names_problem(["train", "--inti"])
    assert "no such command 'trian'" in gcpipe_names_problem(["trian"])


def test_the_snakemake_check_fails_on_a_missing_rule_or_config():
    assert snakemake_problem(["--cores", "8", "elo_table"]) is None
    assert snakemake_problem(["--cores", "2", "all", "--configfile", "config/smoke.yaml"]) is None
    assert snakemake_problem(["-n", "elo_table", "--config", "device=auto", "matches={games: 1}"]) is None
    assert "'elo_tabel' is not a rule" in snakemake_problem(["--cores", "8", "elo_tabel"])
    assert "config/nope.yaml does not exist" in snakemake_problem(["all", "--configfile", "config/nope.yaml"])
    assert snakemake_parts(["--cores", "2", "elo_table", "--configfile", "config/distill.yaml", "--set-threads",
                            "train=1"]) == (["elo_table"], {"--cores": ["2"], "--configfile": ["config/distill.yaml"],
                                                            "--set-threads": ["train=1"]})


def test_a_bad_command_in_a_page_is_reported(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("```\ngcpipe match G C --games N --threadz 2\ngcpipe elo --anchor mean:1500\n"
                    "python benchmarks/nope.py\n```\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "doc_files", lambda: [page])
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert problems() == ["page.md:2: gcpipe match: No such option: --threadz",
                          "page.md:4: python: benchmarks/nope.py does not exist"]


# --- the docs ------------------------------------------------------------------------------------------

def test_the_docs_show_commands():
    assert any(name == "gcpipe" for _, name, _ in shown_commands())


def test_every_command_the_docs_show_parses():
    assert problems() == []


def _dry_run_lines() -> list[tuple[str, list[str]]]:
    """The first DRY_RUNS snakemake lines of the docs with distinct targets and configs, run on one machine
    (no --profile)."""
    seen, lines = set(), []
    for where, name, args in shown_commands():
        if name != "snakemake" or snakemake_problem(args):
            continue
        targets, options = snakemake_parts(args)
        if "--profile" in options or "--report" in options:
            continue
        key = (tuple(targets), tuple(options.get("--configfile", [])))
        if key not in seen:
            seen.add(key)
            lines.append((where, args))
    return lines[:DRY_RUNS]


@pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake is not installed (the `workflow` extra)")
def test_representative_snakemake_lines_dry_run(tmp_path):
    lines = _dry_run_lines()
    assert lines, "no snakemake line in the docs to dry-run"
    env = dict(os.environ, PATH=f"{SNAKEMAKE.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for where, args in lines:
        workdir = tmp_path / str(len(list(tmp_path.iterdir())))
        workdir.mkdir()
        targets, options = snakemake_parts(args)
        configs = [str(REPO / path) for path in options.get("--configfile", [])]
        argv = [str(SNAKEMAKE), "-n", "--quiet", "-s", str(REPO / "Snakefile"), "-d", str(workdir), *targets]
        argv += ["--configfile", *configs] if configs else []
        argv += ["--config", *options["--config"]] if options.get("--config") else []
        result = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=workdir)
        assert result.returncode == 0, f"{where}: snakemake {' '.join(args)}\n{result.stderr[-3000:]}"
