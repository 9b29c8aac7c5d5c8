"""What the house keeps (CONTRIBUTING.md): no branching function in proxy/ or rules/ over 60
lines, and no API told apart by comparing its name outside the Api records. Merges of parallel
work broke both once; these make it fail at once."""

from __future__ import annotations

import re
from pathlib import Path

from bench.long_functions import long_functions

ROOT = Path(__file__).resolve().parent.parent
#: A comparison of an API name: ``api == "chat"``, ``entry.api != "other"``, ``api in ("chat",``.
API_COMPARISON = re.compile(r"""\bapi\s*(?:==|!=|in\s*\()\s*["']""")


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
