"""Scaffold a rule: ``make rule NAME=<kebab-name> API=chat|responses|messages``.

Writes the files a rule needs and nothing it does not: the module with its record (off by
default, an ``apply`` that changes nothing yet), a fixture file whose pass case holds and whose
fail case is a placeholder that FAILS until it is filled in (``tests/rules/test_fixtures.py``
also wants three fail cases), and the rule's line in its API's registry with a TODO for its
position. Then follow CONTRIBUTING.md#add-a-rule: the provider's error text, the catalogue
anchor, the profile line, the contract check, ``make docs``.
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
    cases = [
        {"name": "TODO an accepted shape passes untouched", "source": "TODO", "input": []},
        {
            "name": "TODO a refused shape is repaired",
            "source": "TODO docs/providers.md#<anchor> (owner/repo#N)",
            "input": [],
            "expected": ["TODO the repaired list"],
            "changes": [{"rule": name, "action": "TODO"}],
        },
    ]
    return json.dumps({"rule": name, "cases": cases}, indent=2) + "\n"


def register(init: Path, registry: str, module: str) -> None:
    """Add ``module`` to the package's import list (sorted, as ruff wants it) and its RULE to the
    end of ``registry``."""
    text = init.read_text()
    head = re.search(r"from rules\.\w+ import \(\n((?:    \w+,\n)*)\)", text)
    if head is None:
        raise SystemExit(f"{init}: no `from rules.<room> import (...)` list to add {module} to")
    names = sorted({*re.findall(r"    (\w+),", head.group(1)), module})
    listed = "".join(f"    {name},\n" for name in names)
    text = text[: head.start(1)] + listed + text[head.end(1) :]
    start = text.index(f"{registry}: tuple[Rule, ...] = (")
    end = text.index("\n)\n", start)
    line = (
        f"    # TODO: its position: what must run before it, and what after it.\n    {module}.RULE,"
    )
    init.write_text(text[:end] + "\n" + line + text[end:])


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
    register(ROOT / package / "__init__.py", registry, module)
    for written in (path, ROOT / fixtures / f"{args.name}.json", ROOT / package / "__init__.py"):
        print(f"wrote {written.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
