"""The documentation against the tree: every `ethdaq ...` command line in README.md and docs/ parses
with the real argument parser (soc/cli make_parser, nothing run), every relative Markdown link
resolves, and every repository path a page names exists."""

import argparse
import re
import shlex

import pytest

from conftest import REPO
from ethdaq.soc import cli

PAGES = sorted([REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("docs/boards/*.md")])

COMMANDS = ("boards", "build", "sim", "load", "discover", "ctl", "recv", "merge", "plot")
# A command line in a code block (indented four spaces or fenced): `ethdaq COMMAND ...`, after an
# optional `$ `, `sudo ` and `.venv/bin/`; it ends at a comment. A line ending in a backslash goes on.
CODE_COMMAND = re.compile(r"^(?:\$ )?(?:sudo )?(?:\.venv/bin/)?ethdaq ((?:%s)(?:\s.*)?)$" % "|".join(COMMANDS))
# `ethdaq build 6:05 | synthesis ...`: the build's progress lines, output not input.
PROGRESS = re.compile(r"^build \d+:\d\d ")
# A command named in prose: `ethdaq COMMAND ...` in backticks, whose options must exist.
INLINE_COMMAND = re.compile(r"`(?:sudo )?(?:\.venv/bin/)?ethdaq ((?:%s)(?:\s[^`]*)?)`" % "|".join(COMMANDS))
# Words that stand for a value the reader supplies, as the pages write them.
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z0-9_]*|NAME=VALUE|\.\.\.)$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# Repository paths named in prose (not a link's target, which is relative to its page): a top-level
# directory of the tree, then a file with an extension.
TOP_DIRS = ("bench", "boards", "docs", "ethdaq", "examples", "gateware", "soc", "software", "test", "wire")
PATH = re.compile(r"(?<![\w/.~\[-])(?<!\]\()((?:%s)/[\w./-]*\w\.(?:md|py|c|h|v|sv|toml|lua|json|txt|tcl))\b" % "|".join(TOP_DIRS))
# Paths that a build or a run writes (not in the tree), named as examples.
GENERATED = re.compile(r"^(?:build|test/firmware/c/build)/|/build/")
# A path with a placeholder the reader fills in (docs/boards/NAME.md).
PATH_PLACEHOLDER = re.compile(r"(?:^|/)(?:NAME|BOARD|DIR|OUTPUT_DIR)(?:[./]|$)")


def _anchors(page):
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", page.read_text(), re.M)}


def _code_commands(page):
    """(line number, command line without `ethdaq`) of every command line in the page's code blocks."""
    lines = page.read_text().splitlines()
    fenced = False
    i = 0
    while i < len(lines):
        line, lineno = lines[i], i + 1
        i += 1
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        m = CODE_COMMAND.match(line.strip())
        if not m or not (fenced or line.startswith("    ")):
            continue
        text = m.group(1)
        while text.split("#")[0].rstrip().endswith("\\") and i < len(lines):
            text = text.split("#")[0].rstrip()[:-1] + " " + lines[i].strip()
            i += 1
        text = text.split(" #")[0].strip().removesuffix(" &")   # A command put in the background.
        if not PROGRESS.match(text):
            yield lineno, text


def _inline_commands(page):
    for lineno, line in enumerate(page.read_text().splitlines(), 1):
        for m in INLINE_COMMAND.finditer(line):
            yield lineno, m.group(1)


def _parse(text):
    """Parse as `ethdaq` would, without running the command; the error message on a usage error."""
    try:
        args = shlex.split(text)
    except ValueError as e:
        return f"not a shell command line: {e}"
    if any(PLACEHOLDER.match(a) for a in args) or "--help" in args:
        return None
    try:
        cli.make_parser().parse_args(args)
    except SystemExit as e:
        return f"refused (exit {e.code})" if e.code else None
    return None


def _subparsers():
    parser = cli.make_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def _unknown_options(text):
    """The options of an inline `ethdaq COMMAND --opt ...` that COMMAND does not have; for a command
    of subcommands (`ethdaq ctl ACTION`), that the subcommand named does not have, or without one,
    that not every subcommand has."""
    words = text.replace("[", " ").replace("]", " ").replace("|", " ").split()
    parser = _subparsers()[words[0]]
    options = set(parser._option_string_actions)
    subcommands = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if subcommands:
        named = next((subcommands[w] for w in words[1:] if w in subcommands), None)
        options |= set.intersection(*(set(p._option_string_actions) for p in ([named] if named else
                                                                             subcommands.values())))
    return [w.split("=")[0] for w in words[1:] if w.startswith("--") and w.split("=")[0] not in options]


def _params(extract):
    for page in PAGES:
        for lineno, text in extract(page):
            yield pytest.param(text, id=f"{page.relative_to(REPO)}:{lineno}")


@pytest.mark.parametrize("text", list(_params(_code_commands)))
def test_command_line_parses(text, capsys):
    error = _parse(text)
    assert error is None, f"ethdaq {text}: {error}: {capsys.readouterr().err.strip()}"


@pytest.mark.parametrize("text", list(_params(_inline_commands)))
def test_inline_command_options_exist(text):
    assert _unknown_options(text) == [], f"ethdaq {text}"


def test_commands_found():
    """The extraction finds the bring-up guides' commands (a pattern that matched nothing would pass
    every page)."""
    found = {" ".join(t.split()[:2]) for p in PAGES for _, t in _code_commands(p)}
    assert {"build --board", "load --board", "discover --broadcast", "ctl identify", "ctl start", "recv --port"} <= found
    assert any(True for p in PAGES for _ in _inline_commands(p))


def test_anchor_of_a_heading():
    assert "every-board-resources-and-timing" in _anchors(REPO / "docs/boards/README.md")


def test_checks_refuse_a_wrong_command():
    assert _parse("ctl identify") is not None                     # --ip is required
    assert _parse("build --board x --nope") is not None
    assert _parse("ctl identify --ip 192.168.1.50") is None
    assert _unknown_options("load --board x --nope") == ["--nope"]
    assert _unknown_options("ctl start --payload 1472") == []
    assert _unknown_options("ctl --key-file FILE") == []                      # Every action takes it.
    assert _unknown_options("ctl identify --payload 1472") == ["--payload"]   # Only start does.


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_and_paths_resolve(page):
    text = page.read_text()
    missing = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            missing.append(f"link {target}")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            missing.append(f"link {target} (no such heading)")
    for path in PATH.findall(text):
        if GENERATED.search(path) or PATH_PLACEHOLDER.search(path) or "*" in path:
            continue
        if not (REPO / path).exists():
            missing.append(f"path {path}")
    assert not missing, f"{page.relative_to(REPO)}: " + ", ".join(sorted(set(missing)))
