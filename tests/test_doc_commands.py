"""Every command the README and docs/ show runs as written after the two set-up commands
(``make run``, ``make test``) in a fresh shell: ``chatmend`` is not on PATH there, so each is
``.venv/bin/chatmend``, and its subcommand and flags pass the real CLI parser; each ``make``
target exists; each ``.venv/bin/...`` tool is one the set-up installs. (The container's own
command lines, where ``chatmend`` is on PATH, are checked by tests/test_deploy.py.)"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shlex
import signal
import subprocess
from dataclasses import dataclass
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


# --- every fenced command runs as written ------------------------------------------------------
#
# Each fenced shell block of README.md and docs/*.md (```sh, and the ``$ `` lines of a
# transcript; a ```python block whole, by .venv/bin/python) runs as written, in a fresh shell
# (``chatmend`` not on PATH), from a directory that holds the repository's files (the set-up
# already done: .venv is the repository's), each block in a network namespace of its own
# (``unshare --net``: its own loopback, so 8787 and 8788 are free whatever else runs, and no
# byte leaves the machine). A server a block starts in the
# foreground (``make run``, ``chatmend serve``, ``chatmend emulate``) is started in the
# background and waited for; a server a block only talks to (``chatmend learned``'s chatmend, a
# ``probe``'s emulator) is started first by the test. Every command must exit 0 (``check``: 0 or
# 1, its documented "repaired"); what is not run says why (``NOT_RUN``).

#: Commands that are not run here, each with the reason (matched against the command).
NOT_RUN: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^make test(-latest|-oldest)?\b"), "the whole suite: this test is part of it"),
    (re.compile(r"^make (lock|deep|soak|bench\S*|fuzz)\b"), "long-running (CONTRIBUTING.md)"),
    (re.compile(r"^npm install -g\b"), "installs the Claude Code CLI globally, from npm"),
    (re.compile(r"^make \.clients/"), "downloads the Claude Code CLI from npm (make test does)"),
    (
        re.compile(r"^(\S+/)?claude\b"),
        "the Claude Code CLI with the provider's key (tests/proxy/test_claude_code.py runs it "
        "against the strict fake)",
    ),
    (re.compile(r"^(\w+=\S+ )*\.venv/bin/pytest\b"), "a part of the suite (make test runs it)"),
    (re.compile(r"^(docker|kubectl|helm)\b"), "needs Docker or a cluster (tests/test_deploy.py)"),
    (re.compile(r"chatmend probe https://"), "spends on a live provider, with its key"),
    (
        re.compile(r"sanitize_messages\(messages\)"),
        "a fragment: `messages` stands for the caller's list (tests/rules run the library)",
    ),
)
#: The servers a command starts, and the port each listens on by default.
_SERVERS = (
    (re.compile(r"^make run\b"), 8787),
    (re.compile(r"^\.venv/bin/chatmend serve\b"), 8787),
    (re.compile(r"^\.venv/bin/chatmend emulate\b"), 8788),
)
#: What a block may talk to without starting it, and how the test starts it.
_NEEDED = {
    8788: ".venv/bin/chatmend emulate --port 8788",
    8787: ".venv/bin/chatmend serve --upstream http://127.0.0.1:8788",
}
RUN_PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Shown:
    """A command as a page shows it: where, and the text (continued lines joined)."""

    page: str
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def _complete(text: str) -> bool:
    if text.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:  # a quotation still open: the command goes on on the next line
        return False
    return True


def fenced_commands(page: Path) -> list[list[Shown]]:
    """Each fenced block's commands: every line of a ``sh``/``bash`` block, the ``$`` lines of
    an unlabelled one (a transcript; its other lines are output or a synopsis), a ``python``
    block whole (one command: the set-up's interpreter reading it)."""
    text = page.read_text(encoding="utf-8")
    found = []
    for block in _FENCE.finditer(text):
        lang, body = block.group(1), block.group(2)
        first = text[: block.start(2)].count("\n") + 1
        if lang == "python":  # run whole, by the set-up's interpreter
            found.append([Shown(page.name, first, f".venv/bin/python - <<'PY'\n{body}PY")])
            continue
        if lang not in ("", "sh", "bash", "console", "shell"):
            continue
        commands: list[Shown] = []
        pending, start = "", 0
        for offset, raw in enumerate(body.splitlines()):
            line = raw
            if not pending:
                if lang in ("", "console"):
                    if not raw.startswith("$ "):
                        continue
                    line = raw[2:]
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                start = first + offset
            pending = f"{pending}\n{line}" if pending else line
            if _complete(pending):
                commands.append(Shown(page.name, start, pending))
                pending = ""
        assert not pending, f"{page.name}:{start}: a command never ends"
        if commands:
            found.append(commands)
    return found


def not_run(command: str) -> str | None:
    """Why ``command`` is not run here, or ``None``: it is."""
    return next((why for pattern, why in NOT_RUN if pattern.search(command)), None)


def _without_comment(command: str) -> str:
    """``command`` without its trailing ``# comment`` (a ``#`` outside quotes, after a space)."""
    quote = ""
    for at, char in enumerate(command):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and at > 0 and command[at - 1] in " \t":
            return command[:at].rstrip()
    return command.rstrip()


def _port(command: str, default: int) -> int:
    given = re.search(r"--port[ =](\d+)", command)
    return int(given.group(1)) if given else default


def script(block: list[Shown]) -> tuple[str, list[str]]:
    """The block as a bash script (each command checked where it ran), and what is not run."""
    lines = [
        '__fail() { echo "__FAILED $1 (exit $2)" >&2; }',
        "__wait() { for _ in $(seq 150); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null"
        ' && return 0; sleep 0.1; done; echo "__FAILED $2 (port $1 never answered)" >&2; }',
    ]
    skipped = []
    started = set()
    for shown in block:
        for pattern, default in _SERVERS:
            if pattern.search(shown.text) and not_run(shown.text) is None:
                started.add(_port(shown.text, default))
    said = " ".join(s.text for s in block)
    needed = {port for port in _NEEDED if f"127.0.0.1:{port}" in said} | (
        {8787} if "chatmend learned" in said else set()
    )
    if 8787 in needed - started:
        needed.add(8788)
    named = re.search(r"# (?:\.venv/bin/)?chatmend emulate (--profile [\w-]+)", said)
    for port in sorted(needed - started, reverse=True):
        server = _NEEDED[port] + (f" {named.group(1)}" if port == 8788 and named else "")
        lines += [f"{server} >/dev/null 2>&1 &", f"__wait {port} test-started"]
    for shown in block:
        why = not_run(shown.text)
        if why is not None:
            skipped.append(f"{shown.where}: not run: {why}")
            continue
        command = shown.text
        listens = next((d for p, d in _SERVERS if p.search(command)), None)
        tag = f"L{shown.line}"
        if listens is not None:
            code = _without_comment(command)
            lines.append(code if code.endswith("&") else code + " &")
            lines.append(f"__wait {_port(command, listens)} {tag}")
            continue
        allowed = "0 1" if re.search(r"chatmend check\b", command) else "0"
        lines += [
            f"echo '__RUN {tag}' >&2",
            "(exit $__rc)",  # the checks between two commands keep what $? says
            command,
            f'__rc=$?; case " {allowed} " in *" $__rc "*) ;; *) __fail {tag} $__rc;; esac',
        ]
    # Every process the block started (make's children too) goes with it: the whole group.
    lines.append("echo __DONE >&2; kill -KILL 0")
    return "\n".join(lines) + "\n", skipped


def _isolated() -> list[str] | None:
    """How to run a command in a network namespace of its own, or ``None`` where none can be
    made (no ``unshare``, or neither root nor user namespaces)."""
    for prefix in (["unshare", "--net"], ["unshare", "--net", "--map-root-user"]):
        try:
            done = subprocess.run(
                [*prefix, "sh", "-c", "ip link set lo up"],
                capture_output=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode == 0:
            return prefix
    return None


def _workdir(tmp: Path) -> Path:
    """A directory holding the repository's files as a fresh clone does (links to them), where
    what the commands write (``repaired.json``) stays out of the repository."""
    work = tmp / "clone"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".git",) and not entry.name.startswith(".venv-"):
            (work / entry.name).symlink_to(entry)
    return work


async def _run_block(
    prefix: list[str], work: Path, env: dict[str, str], text: str, limit: asyncio.Semaphore
) -> tuple[int | None, str]:
    async with limit:
        process = await asyncio.create_subprocess_exec(
            *prefix,
            "bash",
            "-c",
            "ip link set lo up && exec bash -s",
            cwd=work,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            out, _ = await asyncio.wait_for(process.communicate(text.encode()), timeout=40)
        except TimeoutError:
            out = b"(timed out after 40 s)"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        return process.returncode, out.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_every_fenced_command_runs_as_written(tmp_path: Path) -> None:
    prefix = _isolated()
    if prefix is None:
        pytest.skip("needs a private loopback for ports 8787/8788: unshare --net (root or userns)")
    assert (ROOT / ".venv" / "bin" / "chatmend").exists(), "the set-up (make install) first"
    work = _workdir(tmp_path)
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if ".venv" not in p
    )
    env = {"PATH": path, "HOME": str(tmp_path), "LANG": "C.UTF-8", "TERM": "dumb"}
    blocks = [block for page in RUN_PAGES for block in fenced_commands(page)]
    scripts = [script(block) for block in blocks]
    limit = asyncio.Semaphore(4)
    results = await asyncio.gather(
        *(_run_block(prefix, work, env, text, limit) for text, _ in scripts)
    )
    failed = []
    ran = 0
    for block, (code, out) in zip(blocks, results, strict=True):
        ran += out.count("__RUN ")
        if "__DONE" not in out or "__FAILED" in out:
            failed.append(f"{block[0].page}:{block[0].line} (exit {code}):\n{out[-3000:]}")
    assert not failed, "\n\n".join(failed)
    assert ran >= 15  # the extraction found what it runs (else this test checks nothing)


def test_what_is_not_run_says_why_and_is_not_much() -> None:
    """Every command the pages show is run above or named here with its reason; the quick
    start is run whole."""
    shown = [s for page in RUN_PAGES for block in fenced_commands(page) for s in block]
    skipped = [s for s in shown if not_run(s.text) is not None]
    assert len(skipped) <= len(shown) // 3, [s.where for s in skipped]
    readme = [s for block in fenced_commands(ROOT / "README.md") for s in block]
    quick = [s for s in readme if "emulate" in s.text or "8788" in s.text]
    assert quick and all(not_run(s.text) is None for s in quick)
    assert any(s.text.startswith("curl -si 127.0.0.1:8787") for s in readme)


def test_the_configuration_page_lists_every_command_and_flag() -> None:
    """docs/configuration.md's command list, held to the CLI's own parser: every subcommand
    and every flag of each appears on its line (issue 40: probe and learned were missing)."""
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    listing = text[text.index('<a id="command-line"></a>') :]
    listing = listing[listing.index("```\n") + 4 :]
    listing = listing[: listing.index("```")]
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(commands) >= set(SUBCOMMANDS) and set(SUBCOMMANDS) >= set(commands)
    for name, sub in commands.items():
        lines = [
            line
            for line in re.split(r"\n(?=\.venv/bin/chatmend|python)", listing)
            if line.startswith(f".venv/bin/chatmend {name} ")
            or line.strip() == f".venv/bin/chatmend {name}"
        ]
        assert lines, f"no line for {name}"
        said = " ".join(lines)
        for action in sub._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    assert flag in said, f"{name} {flag} missing from docs/configuration.md"
            if not action.option_strings and action.dest != "help":
                assert action.dest.upper() in said.upper(), f"{name} {action.dest}"
