"""`make rule` (tools/new_rule.py): the scaffold writes a rule's module, its fixture file and its
registry line, in a copy of the tree, with the import list kept in ruff's order."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tools import new_rule

ROOT = Path(__file__).resolve().parent.parent
#: API -> a new rule's name, its room and its fixture folder.
ROOMS = {
    "chat": ("empty-names", "rules/chat", "tests/fixtures/rules"),
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
    module = name.removeprefix("messages-").replace("-", "_")
    assert f'NAME = "{name}"' in (tmp_path / package / f"{module}.py").read_text()
    cases = json.loads((tmp_path / fixtures / f"{name}.json").read_text())["cases"]
    assert cases[0]["source"] == "TODO"  # a placeholder the fixture checker refuses
    init = (tmp_path / package / "__init__.py").read_text()
    imported = re.search(r"from rules\.\w+ import \(\n((?:    \w+,\n)*)\)", init)
    assert imported is not None
    names = re.findall(r"    (\w+),", imported.group(1))
    assert module in names and names == sorted(names)
    assert f"    {module}.RULE,\n)\n" in init  # the registry's last entry, its position a TODO
    with pytest.raises(SystemExit):  # a second time: the module exists
        new_rule.main([name, api])
