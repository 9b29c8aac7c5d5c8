"""The generated documentation is current, and nothing in the repository cites a file outside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from proxy import docs

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", list(docs.rendered(ROOT)), ids=str)
def test_each_generated_file_is_what_the_records_give(path: Path) -> None:
    """docs/rules.md, docs/profiles.md and config.example.yaml's rules section are rendered from
    the rule, option, profile and check records: a record changed without `make docs` fails."""
    expected = docs.rendered(ROOT)[path]
    current = (ROOT / path).read_text(encoding="utf-8") if (ROOT / path).exists() else ""
    assert current == expected, f"{path} is out of date: run `make docs`"
