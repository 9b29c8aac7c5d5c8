"""Every command the README and docs/ show runs as written after the two set-up commands
(``make run``, ``make test``) in a fresh shell: ``chatmend`` is not on PATH there, so each is
``.venv/bin/chatmend``, and its subcommand and flags pass the real CLI parser; each ``make``
target exists; each ``.venv/bin/...`` tool is one the set-up installs. (The container's own
command lines, where ``chatmend`` is on PATH, are checked by tests/test_deploy.py.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from proxy.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])
SUBCOMMANDS = ("serve", "check", "emulate", "learned", "probe")
#: Inline code, or a code block's line, that runs chatmend (bare or by its path).
_RUNS = r"((?:\.venv/bin/)?chatmend (?:--version|[a-z]+)(?=[\s`]|$)[^`\n#]*)"
_INLINE = re.compile(r"`" + _RUNS)
_BLOCK = re.compile(r"(?:^\s*|\$ |&& |\| )" + _RUNS)
_MAKE = re.compile(r"`(make [a-z-]+)|^\s*(make [a-z-]+)", re.M)
#: Where the bare name is right: inside the image, whose ENTRYPOINT is chatmend.
_CONTAINER = ("inside the container", "ENTRYPOINT", "kubectl", "docker")


def commands(page: Path) -> list[tuple[int, str]]:
    found = []
    fenced = False
    prose: list[str] = []  # inline code may wrap: prose is read a paragraph at a time
    for number, line in enumerate([*page.read_text(encoding="utf-8").splitlines(), ""], 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            if not any(word in line for word in _CONTAINER):
                found += [(number, m.group(1).strip()) for m in _BLOCK.finditer(line)]
            continue
        if line.strip():
            prose.append(line)
            continue
        paragraph = " ".join(prose)
        prose = []
        for sentence in re.split(r"(?<=[.;])\s", paragraph):
            if not any(word in sentence for word in _CONTAINER):
                found += [(number, m.group(1).strip()) for m in _INLINE.finditer(sentence)]
    return found


def _runnable(command: str) -> list[str]:
    """The arguments as a user would type them: a synopsis's optional ``[...]`` dropped, its
    placeholders (``URL``, ``N``, ``FILE|-``) given a value."""
    command = re.sub(r"\[[^\]]*\]", "", command)
    out: list[str] = []
    for word in shlex.split(command, comments=True)[1:]:
        arg = word
        if "|" in arg:
            arg = arg.split("|")[-1]
        elif arg == "URL":
            arg = "http://127.0.0.1:8787"
        elif arg in ("P", "PROFILE"):
            arg = "deepseek"
        elif arg.isupper():
            arg = "2" if arg == "N" else "x"
        out.append(arg)
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_chatmend_command_is_runnable_as_written(page: Path) -> None:
    parser = build_parser()
    for number, command in commands(page):
        where = f"{page.name}:{number}: {command}"
        assert command.startswith(".venv/bin/chatmend"), f"not on PATH after set-up: {where}"
        argv = _runnable(command)
        if argv == ["--version"] or (len(argv) == 1 and argv[0] in SUBCOMMANDS):
            continue  # the command named, not run
        assert argv[0] in SUBCOMMANDS, f"no such subcommand: {where}"
        try:
            parser.parse_known_args(argv)
        except SystemExit:
            pytest.fail(f"the CLI rejects it: {where}")


def test_every_make_target_shown_exists() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _MAKE.finditer(text):
            target = (match.group(1) or match.group(2)).split()[1]
            assert target in targets, f"{page.name}: make {target}: no such target"


def test_the_pages_do_show_commands() -> None:
    """The extraction finds what it checks (else the test above checks nothing)."""
    readme = [c for _, c in commands(ROOT / "README.md")]
    assert any(c.startswith(".venv/bin/chatmend serve") for c in readme)
    assert len([c for page in PAGES for _, c in commands(page)]) > 30
