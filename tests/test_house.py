"""What the house keeps (CONTRIBUTING.md#layout): the wings on their floors, nothing pointing up,
no import loop, no module outside a wing; no branching function in proxy/ or rules/ over 60
lines; no API told apart by comparing its name outside the Api records. Merges of parallel work
broke each once; these make it fail at once."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.long_functions import long_functions

ROOT = Path(__file__).resolve().parent.parent
#: A comparison of an API name: ``api == "chat"``, ``entry.api != "other"``, ``api in ("chat",``.
API_COMPARISON = re.compile(r"""\bapi\s*(?:==|!=|in\s*\()\s*["']""")

#: The floors, bottom up, each with its wings (a wing: the modules under its packages). A module
#: may import its own wing and any wing on a floor below; never a wing above, nor another wing of
#: its own floor (siblings stand apart).
FLOORS: tuple[tuple[tuple[str, ...], ...], ...] = (
    # rules/: pure, no I/O (ruff's banned-api keeps aiohttp, structlog and logging out)
    (("rules.vocabulary",),),
    (("rules.engine",),),
    (("rules.chat",), ("rules.responses",), ("rules.messages",), ("rules.replies",)),
    (("rules.providers",),),
    # proxy/: the server, from what everything reads to what serves a request
    (("proxy.config",),),
    (("proxy.observe",),),
    (("proxy.stash",),),
    (("proxy.relay",),),
    (("proxy.recovery",),),
    (("proxy.server",),),
    # the developer tools: never imported by the server (the door below reaches them for
    # `chatmend check`, `emulate` and `probe`, only when one of them runs)
    (("tools",),),
    # the door: the `chatmend` command (`python -m proxy`)
    (("proxy.cli", "proxy.__main__"),),
)
#: The package modules that hold nothing but their docstring (and so belong to no wing).
BARE = frozenset({"proxy", "rules"})
HOUSE = ("proxy", "rules", "tools")


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_of(path): path for top in HOUSE for path in sorted((ROOT / top).rglob("*.py"))}


def imports(path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """Every module of the house ``path`` imports (at any depth of its code, lazily too), with
    the line: ``from a import b`` names ``a.b`` when that is a module, else ``a``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in (*HOUSE, "bench", "tests"):
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in (*HOUSE, "bench", "tests"):
                continue
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                yield (name if name in known else node.module), node.lineno


def wing_of(module: str) -> tuple[int, tuple[str, ...]] | None:
    """The floor and the wing ``module`` stands in (the wing with the longest package that
    holds it)."""
    found: tuple[int, tuple[str, ...]] | None = None
    longest = 0
    for floor, wings in enumerate(FLOORS):
        for wing in wings:
            for package in wing:
                if (module == package or module.startswith(package + ".")) and len(
                    package
                ) > longest:
                    found, longest = (floor, wing), len(package)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    names = set(known)
    return {module: {name for name, _ in imports(path, names)} for module, path in known.items()}


def test_every_module_stands_in_a_wing() -> None:
    outside = [m for m in modules() if m not in BARE and wing_of(m) is None]
    assert outside == [], "modules outside every wing (add them to one, or a wing to FLOORS)"


def test_every_wing_of_the_floors_exists() -> None:
    known = set(modules())
    assert [p for wings in FLOORS for wing in wings for p in wing if p not in known] == []


def test_nothing_points_up_or_sideways() -> None:
    known = modules()
    names = set(known)
    wrong: list[str] = []
    for module, path in known.items():
        here = wing_of(module)
        if here is None:
            continue
        for name, line in imports(path, names):
            if name.split(".")[0] in ("bench", "tests"):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name} (not a wing)")
                continue
            there = wing_of(name)
            if there is None or there[1] == here[1]:
                continue
            if there[0] >= here[0]:
                side = "up" if there[0] > here[0] else "sideways"
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name} ({side})")
    assert wrong == []


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in edges), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_loop() -> None:
    edges = graph()
    # A package's __init__ importing its own modules is how it lists them, not a loop.
    for module, targets in edges.items():
        for target in list(targets):
            if module.startswith(target + "."):
                targets.discard(target)
    assert cycles(edges) == []


def test_proxy_holds_nothing_outside_its_wings_but_the_door() -> None:
    """proxy/'s own top is its map (``__init__``) and the ``chatmend`` command (``cli``,
    ``__main__``); everything else stands in a wing whose name says what it holds."""
    top = sorted(path.name for path in (ROOT / "proxy").glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py"]


def test_the_trip_is_entered_from_the_top_only() -> None:
    """A request's trip (proxy/server/trip.py) reads top to bottom: nothing below the server
    reaches back into it (no re-entry into the handler from the relay, recovery or the stash);
    only the server itself and what stands above it (the door, the tools) import proxy.server."""
    floor = FLOORS.index((("proxy.server",),))
    found = [
        f"{module} imports {name}"
        for module, targets in graph().items()
        for name in targets
        if (name == "proxy.server" or name.startswith("proxy.server."))
        and not module.startswith("proxy.server")
        and (wing_of(module) or (floor, ()))[0] <= floor
    ]
    assert found == []
    importers = {
        module
        for module, targets in graph().items()
        if not module.startswith("proxy.server")
        and any(n.startswith("proxy.server.") for n in targets)
    }
    above = {m for m in importers if (wing_of(m) or (floor, ()))[0] > floor}
    assert importers == above, importers - above  # the door and the tools (``check`` reads
    # the page's diff), never a module beside or below the server


def test_the_loop_finder_finds_a_loop() -> None:
    """The oracle above, on a graph whose answer is known."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("top", ["tests", "tools"])
def test_nothing_imports_the_benchmarks(top: str) -> None:
    """The suite and the tools stand without bench/ (the benchmarks read the tests' corpora,
    never the other way)."""
    known = set(modules())
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / top).rglob("*.py"))
        for name, line in imports(path, known)
        if name.split(".")[0] == "bench"
    ]
    assert found == []


def test_no_branching_function_over_60_lines() -> None:
    assert long_functions(ROOT) == []


def test_no_api_name_is_compared_outside_the_records() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("proxy", "rules")
        for path in sorted((ROOT / package).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if API_COMPARISON.search(line)
    ]
    assert found == []
