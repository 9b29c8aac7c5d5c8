"""Nothing a scaffold wrote is left unfilled. `make rule` and `make profile` (tools/new_rule.py,
tools/new_profile.py) write ``TODO`` wherever a person must write: the provider's words, the
public source, the reason for a rule's position. This names each one left, file and line, until
it is gone (CONTRIBUTING.md#add-a-rule, #add-a-profile)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Where a scaffold writes: the records, the catalogue and the docs, the fixtures, the example.
PLACES = ("rules/**/*.py", "docs/*.md", "tests/fixtures/**/*.json", "config.example.yaml")
MARK = "TODO"


def left(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}:{number}: {line.strip()[:80]}"
        for pattern in PLACES
        for path in sorted(root.glob(pattern))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if MARK in line
    ]


def test_no_placeholder_is_left() -> None:
    assert left(ROOT) == []


def test_a_placeholder_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "providers.md").write_text('ok\n- **TODO the shape** ("TODO")\n')
    assert left(tmp_path) == ['docs/providers.md:2: - **TODO the shape** ("TODO")']


@pytest.mark.parametrize("pattern", PLACES)
def test_every_place_holds_files(pattern: str) -> None:
    assert any(ROOT.glob(pattern)), pattern
