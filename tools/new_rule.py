"""Scaffold a rule: ``make rule NAME=<kebab-name> API=chat|responses|messages``.

Writes every file a rule has that a scaffold can write, each failing until a person fills it in
(CONTRIBUTING.md#add-a-rule): the module with its record (off by default, an ``apply`` that
changes nothing yet); its fixture file, one pass case and the three fail cases
tests/rules/test_fixtures.py demands, each a placeholder whose ``TODO`` source the fixture check
refuses; and its line at the end of its API's registry with a placeholder reason in ``ORDER``
(tests/rules/test_order.py fails until the reason names the rules it must follow, and why).
Every ``TODO`` it writes is one tests/test_placeholders.py names until it is gone. Then: the
provider's words in the catalogue, the contract check, the profile line, ``make docs``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Per API: the rules package, the registry name, the fixture folder, a rule name's prefix.
ROOMS = {
    "chat": ("rules/chat", "RULES", "tests/fixtures/rules", ""),
    "responses": ("rules/responses", "RESPONSES_RULES", "tests/fixtures/responses", "responses-"),
    "messages": ("rules/messages", "MESSAGES_RULES", "tests/fixtures/messages", "messages-"),
}

MODULE = '''"""{name}: TODO one line: what it does.

What: TODO the shape it repairs and how.
Why: TODO the provider's error text, in its words (docs/providers.md#<anchor>, owner/repo#N).
Safety: TODO safe, or what the repair may lose.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Outcome, Rule, RuleContext

NAME = "{name}"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    return Outcome(messages)  # TODO: a cheap prescan, then the copy-on-write repair


RULE = Rule(
    name=NAME,
    summary="TODO one line: what it does.",
    defect="TODO what the provider refuses, in its words (owner/repo#N; docs/providers.md#...)",
    repair="TODO what it does, and why that is safe (or what it may lose)",
    safety="safe",
    default=False,
    apply=apply,
)
'''


def fixture(name: str) -> str:
    """One pass case and three fail cases, each a placeholder to replace with a real one."""
    passes = {"name": "TODO an accepted shape passes untouched", "source": "TODO", "input": []}
    fails = [
        {
            "name": f"TODO a refused shape is repaired ({number})",
            "source": "TODO docs/providers.md#<anchor> (owner/repo#N)",
            "input": [],
            "expected": ["TODO the repaired list"],
            "changes": [{"rule": name, "action": "TODO"}],
        }
        for number in (1, 2, 3)
    ]
    return json.dumps({"rule": name, "cases": [passes, *fails]}, indent=2) + "\n"


def register(init: Path, registry: str, module: str, name: str) -> None:
    """Add ``module`` to the package's import list (sorted, as ruff wants it), its RULE to the
    end of ``registry`` and a placeholder reason for its position to the end of ``ORDER``."""
    text = init.read_text()
    head = re.search(r"from rules\.\w+ import \(\n((?:    \w+,\n)*)\)", text)
    if head is None:
        raise SystemExit(f"{init}: no `from rules.<room> import (...)` list to add {module} to")
    names = sorted({*re.findall(r"    (\w+),", head.group(1)), module})
    listed = "".join(f"    {name},\n" for name in names)
    text = text[: head.start(1)] + listed + text[head.end(1) :]
    text = _append(text, f"{registry}: tuple[Rule, ...] = (", f"    {module}.RULE,", init)
    reason = (
        "    before(\n"
        '        "TODO the rules it must follow (or EVERY after its name)",\n'
        f'        "{name}",\n'
        '        "TODO why: what they write that it reads, or what it writes that they read",\n'
        "    ),"
    )
    init.write_text(_append(text, "ORDER: tuple[Before, ...] = (", reason, init))


def _append(text: str, opening: str, line: str, init: Path) -> str:
    """``text`` with ``line`` added as the last entry of the tuple that ``opening`` opens."""
    if opening not in text:
        raise SystemExit(f"{init}: no `{opening}` to add to")
    start = text.index(opening)
    end = text.index("\n)\n", start)
    return text[:end] + "\n" + line + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="kebab-case, named for the defect")
    parser.add_argument("api", choices=sorted(ROOMS))
    args = parser.parse_args(argv)
    package, registry, fixtures, prefix = ROOMS[args.api]
    if not re.fullmatch(r"[a-z][a-z0-9-]*", args.name) or not args.name.startswith(prefix):
        parser.error(f"NAME must be kebab-case{f' and start with {prefix}' if prefix else ''}")
    module = args.name.removeprefix(prefix).replace("-", "_")
    path = ROOT / package / f"{module}.py"
    if path.exists():
        parser.error(f"{path.relative_to(ROOT)} exists")
    path.write_text(MODULE.format(name=args.name))
    (ROOT / fixtures / f"{args.name}.json").write_text(fixture(args.name))
    register(ROOT / package / "__init__.py", registry, module, args.name)
    for written in (path, ROOT / fixtures / f"{args.name}.json", ROOT / package / "__init__.py"):
        print(f"wrote {written.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
