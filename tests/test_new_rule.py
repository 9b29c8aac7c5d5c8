"""`make rule` (tools/new_rule.py): the scaffold writes a rule's module, its fixture file (one
pass and three fail cases, as tests/rules/test_fixtures.py demands) and its registry line with a
placeholder reason in ``ORDER``, in a copy of the tree, with the import list kept in ruff's
order; every file it writes holds a placeholder the suite refuses until it is filled in."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from rules.engine.order import EVERY, before, broken
from tests.test_placeholders import left
from tools import new_rule

ROOT = Path(__file__).resolve().parent.parent
#: API -> a new rule's name, its room and its fixture folder.
ROOMS = {
    "chat": ("empty-names", "rules/chat", "tests/fixtures/rules"),
    "responses": ("responses-empty-names", "rules/responses", "tests/fixtures/responses"),
    "messages": ("messages-empty-names", "rules/messages", "tests/fixtures/messages"),
}


@pytest.mark.parametrize("api", sorted(ROOMS))
def test_the_scaffold_writes_a_rule_in_its_room(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, package, fixtures = ROOMS[api]
    shutil.copytree(ROOT / package, tmp_path / package)
    (tmp_path / fixtures).mkdir(parents=True)
    monkeypatch.setattr(new_rule, "ROOT", tmp_path)
    assert new_rule.main([name, api]) == 0
    module = name.removeprefix(f"{api}-").replace("-", "_")
    source = tmp_path / package / f"{module}.py"
    assert f'NAME = "{name}"' in source.read_text()
    cases = json.loads((tmp_path / fixtures / f"{name}.json").read_text())["cases"]
    passes = [case for case in cases if "expected" not in case]
    fails = [case for case in cases if "expected" in case]
    assert len(passes) == 1 and len(fails) == 3  # what tests/rules/test_fixtures.py demands
    assert all(case["source"].startswith("TODO") for case in cases)  # none passes as it is
    init = (tmp_path / package / "__init__.py").read_text()
    imported = re.search(r"from rules\.\w+ import \(\n((?:    \w+,\n)*)\)", init)
    assert imported is not None
    names = re.findall(r"    (\w+),", imported.group(1))
    assert module in names and names == sorted(names)
    registry = init.split(": tuple[Rule, ...] = (", 1)[1].split("\n)\n", 1)[0]
    assert registry.endswith(f"\n    {module}.RULE,")  # the registry's last entry
    order = init.split("ORDER: tuple[Before, ...] = (", 1)[1].split("\n)\n", 1)[0]
    reason = order.rsplit("    before(\n", 1)[1]
    first, then, why = re.findall(r'^        "([^"]*)",$', reason, re.MULTILINE)
    assert then == name and first.startswith("TODO") and why.startswith("TODO")
    assert first != EVERY  # the placeholder names no rule: the order test fails until it does
    assert any("no such rule" in line for line in broken([name], (before(first, name, why),)))
    written = {line.split(":", 1)[0] for line in left(tmp_path)}
    assert {str(source.relative_to(tmp_path)), f"{fixtures}/{name}.json"} <= written
    assert f"{package}/__init__.py" in written
    with pytest.raises(SystemExit):  # a second time: the module exists
        new_rule.main([name, api])
