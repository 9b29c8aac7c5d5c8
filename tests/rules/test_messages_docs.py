"""docs/anthropic.md and docs/providers.md describe what the Messages code does."""

from __future__ import annotations

from pathlib import Path

from rules.messages import MESSAGES_RULES
from rules.providers.profiles import PROFILES

ROOT = Path(__file__).resolve().parents[2]


def test_the_reference_lists_every_rule_and_option_with_its_default() -> None:
    text = (ROOT / "docs" / "anthropic.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `messages-")]
    assert [row.split("`")[1] for row in rows] == [rule.name for rule in MESSAGES_RULES]
    for rule, row in zip(MESSAGES_RULES, rows, strict=True):
        default = row.split("|")[4].strip()
        assert default.startswith("on" if rule.default else "off"), rule.name
        for option in rule.options:
            assert f"`{option.name}: {option.default}`" in row, (rule.name, option.name)
        for name, profile in PROFILES.items():
            if name != "passthrough" and profile.messages.get(rule.name, False) is not False:
                assert name.removesuffix("-reasoner") in row, (rule.name, name)


def test_every_repairing_rule_has_a_catalogue_row() -> None:
    text = (ROOT / "docs" / "providers.md").read_text().split("## Anthropic Messages", 1)[1]
    for rule in MESSAGES_RULES:
        assert f"`{rule.name}`" in text, rule.name
