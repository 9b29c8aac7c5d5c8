"""The generated documentation is current, and nothing in the repository cites a file outside it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from proxy import docs
from proxy.provider_hosts import HOST_PROFILES
from rules.chat import RULES
from rules.providers.profiles import PROFILES
from rules.responses import RESPONSES_RULES

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", list(docs.rendered(ROOT)), ids=str)
def test_each_generated_file_is_what_the_records_give(path: Path) -> None:
    """docs/rules.md, docs/profiles.md and config.example.yaml's rules section are rendered from
    the rule, option, profile and check records: a record changed without `make docs` fails."""
    expected = docs.rendered(ROOT)[path]
    current = (ROOT / path).read_text(encoding="utf-8") if (ROOT / path).exists() else ""
    assert current == expected, f"{path} is out of date: run `make docs`"


#: What no committed file may cite: the research notes and design file kept outside the repository.
OUTSIDE = ("../shared", "provider-errors.md", "hermes-sanitizer-notes")


def tracked() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    return [ROOT / name.decode() for name in names if name]


def test_nothing_cites_a_file_outside_the_repository() -> None:
    """The catalogue is docs/providers.md: a fixture, docstring or doc cites it (or the public
    source), never the notes it was written from, nor a DESIGN.md the repository lacks."""
    files = [path for path in tracked() if path.is_file() and path != Path(__file__)]
    has_design = any(path.name == "DESIGN.md" for path in files)
    found: list[str] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        cited = [word for word in OUTSIDE if word in text]
        if not has_design and "DESIGN.md" in text:
            cited.append("DESIGN.md")
        if cited:
            found.append(f"{path.relative_to(ROOT)}: {', '.join(cited)}")
    assert not found, "files citing what the repository does not hold:\n" + "\n".join(found)


def test_the_rules_page_documents_every_rule_and_option_with_its_default() -> None:
    text = docs.render_rules()
    for rule in (*RULES, *RESPONSES_RULES):
        assert f'<a id="{rule.name}"></a>' in text, rule.name
        section = text.split(f'<a id="{rule.name}"></a>', 1)[1].split("<a id=", 1)[0]
        assert docs.linked(rule.defect) in section, rule.name
        assert docs.linked(rule.repair) in section, rule.name
        for option in rule.options:
            row = f"| `{option.name}` | {docs.cell(docs.shown(option.default))} |"
            assert row in section, (rule.name, option.name)


def test_the_profiles_page_names_every_profile_its_hosts_and_the_rules_it_switches_on() -> None:
    text = docs.render_profiles()
    for pattern, profile in HOST_PROFILES:
        assert f"| `{pattern}` | [`{profile}`](#{profile}) |" in text, pattern
    for name, profile in PROFILES.items():
        section = text.split(f'<a id="{name}"></a>', 1)[1].split("<a id=", 1)[0]
        for rule in RULES:
            on, _ = docs.setting(profile, rule)
            if on != rule.default:  # switched on or off by the profile: named in its section
                assert f"(rules.md#{rule.name})" in section, (name, rule.name)
        for code in profile.contract:
            assert f"| `{code}` |" in section, (name, code)


def test_the_example_rules_section_lists_every_rule_in_order() -> None:
    """(tests/proxy/test_config.py parses each rule's and option's line and loads it.)"""
    section = docs.render_config_rules()
    lines = [line for line in section.splitlines() if "# rule default:" in line]
    names = [line.split("# ", 1)[1].split(":", 1)[0] for line in lines]
    assert names == [rule.name for rule in (*RULES, *RESPONSES_RULES)]
