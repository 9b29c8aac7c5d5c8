"""The generated documentation is current, and nothing in the repository cites a file outside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from proxy.config import RecoverConfig
from rules.chat import RULES
from rules.engine.base import Rule
from rules.messages import MESSAGES_RULES
from rules.providers.apis import MESSAGES_API
from rules.providers.planner import compile_messages_plan, compile_plan
from rules.providers.profiles import HOST_PROFILES, PROFILES
from rules.replies import REPLY_RULES
from rules.replies.base import ReplyRule
from rules.responses import RESPONSES_RULES
from tools import docs

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
    every: tuple[Rule | ReplyRule, ...] = (*RULES, *RESPONSES_RULES, *MESSAGES_RULES, *REPLY_RULES)
    for rule in every:
        assert f'<a id="{rule.name}"></a>' in text, rule.name
        section = text.split(f'<a id="{rule.name}"></a>', 1)[1].split("<a id=", 1)[0]
        assert docs.linked(rule.defect) in section, rule.name
        assert docs.linked(rule.repair) in section, rule.name
        for option in rule.options:
            row = f"| `{option.name}` | {docs.cell(docs.shown(option.default))} |"
            assert row in section, (rule.name, option.name)
    for rule in RULES:  # each chat rule names the profiles that run it
        section = text.split(f'<a id="{rule.name}"></a>', 1)[1].split("<a id=", 1)[0]
        on_under = next(line for line in section.splitlines() if line.startswith("On under:"))
        for name, profile in PROFILES.items():
            assert (f"`{name}`" in on_under) is docs.setting(profile, rule)[0], (rule.name, name)
    for rule in MESSAGES_RULES:  # each Messages rule names the profiles whose plan runs it
        section = text.split(f'<a id="{rule.name}"></a>', 1)[1].split("<a id=", 1)[0]
        on_under = next(line for line in section.splitlines() if line.startswith("On under:"))
        for name, profile in PROFILES.items():
            on = docs.setting(profile, rule, api=MESSAGES_API)[0]
            assert (f"`{name}`" in on_under) is on, (rule.name, name)


def test_the_profiles_page_names_every_profile_its_hosts_and_the_rules_it_switches_on() -> None:
    text = docs.render_profiles()
    for pattern, host_profile in HOST_PROFILES:
        assert f"| `{pattern}` | [`{host_profile}`](#{host_profile}) |" in text, pattern
    for name, profile in PROFILES.items():
        section = text.split(f'<a id="{name}"></a>', 1)[1].split("<a id=", 1)[0]
        for rule in RULES:
            on, _ = docs.setting(profile, rule)
            if on != rule.default:  # switched on or off by the profile: named in its section
                assert f"(rules.md#{rule.name})" in section, (name, rule.name)
        for code in profile.contract:
            assert f"| `{code}` |" in section, (name, code)
        for rule in MESSAGES_RULES:
            on, options = docs.setting(profile, rule, api=MESSAGES_API)
            if on and (not rule.default or options):
                assert f"(rules.md#{rule.name})" in section, (name, rule.name)
        for code in profile.messages_contract:
            assert f"`{code}`" in section, (name, code)


def test_the_example_rules_section_lists_every_rule_in_order() -> None:
    """(tests/proxy/test_config.py parses each rule's and option's line and loads it.)"""
    section = docs.render_config_rules()
    lines = [line for line in section.splitlines() if "# rule default:" in line]
    names = [line.split("# ", 1)[1].split(":", 1)[0] for line in lines]
    every: tuple[Rule | ReplyRule, ...] = (*RULES, *RESPONSES_RULES, *MESSAGES_RULES, *REPLY_RULES)
    assert names == [rule.name for rule in every]


_LINK = re.compile(r"\]\(([^)\s]+)\)")
_ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found = set(_ANCHOR.findall(text))
    for line in text.splitlines():
        if line.startswith("#"):
            found.add(_slug(line.lstrip("#")))
    return found


def test_every_relative_link_in_the_docs_resolves() -> None:
    """Each link between README.md, SECURITY.md, CONTRIBUTING.md and docs/ names a file the
    repository holds and, with a #fragment, an anchor in it (the catalogue's anchors are cited
    from fixtures and docstrings too: they must stay stable)."""
    pages = [
        path
        for path in tracked()
        if path.suffix == ".md" and path.is_file() and "tests" not in path.parts
    ]
    broken: list[str] = []
    for page in pages:
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            name, _, fragment = target.partition("#")
            path = (page.parent / name).resolve() if name else page
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif (
                fragment
                and path.suffix == ".md"
                and fragment not in anchors(path.read_text(encoding="utf-8"))
            ):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such anchor)")
    assert not broken, "\n".join(broken)


def test_every_cited_catalogue_anchor_exists() -> None:
    """``docs/providers.md#<anchor>`` cited in a fixture, docstring or record names a section."""
    known = anchors((ROOT / "docs" / "providers.md").read_text(encoding="utf-8"))
    missing: list[str] = []
    for path in tracked():
        if not path.is_file() or path.suffix not in {".py", ".json", ".md", ".yaml"}:
            continue
        cited = re.findall(r"providers\.md#([a-z0-9-]+)", path.read_text(encoding="utf-8"))
        missing.extend(f"{path.relative_to(ROOT)}: #{a}" for a in cited if a not in known)
    assert not missing, "\n".join(missing)


def test_the_documented_settings_are_what_the_planner_runs() -> None:
    """docs.setting (on/off and options per profile, read from the records) agrees with the plan
    the planner compiles for each profile: the pages describe what runs."""
    for name, profile in PROFILES.items():
        steps = {rule.name: ctx.options for rule, ctx in compile_plan(profile).steps}
        for rule in RULES:
            on, options = docs.setting(profile, rule)
            assert on is (rule.name in steps), (name, rule.name)
            if on:
                defaults = {o.name: o.default for o in rule.options}
                assert {**defaults, **options} == dict(steps[rule.name]), (name, rule.name)
        steps = {rule.name: ctx.options for rule, ctx in compile_messages_plan(profile).steps}
        for rule in MESSAGES_RULES:
            on, options = docs.setting(profile, rule, api=MESSAGES_API)
            assert on is (rule.name in steps), (name, rule.name)
            if on:
                defaults = {o.name: o.default for o in rule.options}
                assert {**defaults, **options} == dict(steps[rule.name]), (name, rule.name)


def test_the_docs_say_recovery_is_on_by_default() -> None:
    """Issue 35: SECURITY.md and the end of docs/recovery.md said recovery was off by default
    while it had been on for a release. What the docs say is what the config does."""
    assert RecoverConfig().enabled
    off = re.compile(r"recover[^.]{0,80}\(off by default|recovery is off by default", re.I)
    for page in (ROOT / "SECURITY.md", ROOT / "docs" / "recovery.md", ROOT / "README.md"):
        text = page.read_text()
        assert not off.search(text), page.name
        assert "on by default" in text.lower(), page.name
