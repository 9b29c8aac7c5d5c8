"""Renamed rules (rules/providers/redirects.py): the table itself, and every place a rule's name
is accepted reading an old name as the new one, with a warning naming the new one.

The table is empty today (no rule has been renamed), so the places are proved with a redirect
this test declares; the table's own laws are held for whatever it will hold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from proxy.config import ConfigError, load_config, parse_config
from proxy.observe.metrics import Metrics
from proxy.recovery.learned import LearnedRepairs
from rules.providers import redirects
from rules.providers.apis import APIS

EVERY_RULE = {rule.name for api in APIS.values() for rule in api.rules}
#: A test-only rename: the old name no rule has, the new one a rule with a lossy change and an
#: option (so that `rules:`, its options and `recover.lossy` can all be written under it).
OLD, NEW = "orphan-tool-messages", "orphan-tool-results"


@pytest.fixture
def renamed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redirects, "REDIRECTS", {OLD: NEW})


def test_the_table_points_at_rules_and_shadows_none() -> None:
    for old, new in redirects.REDIRECTS.items():
        assert new in EVERY_RULE, f"{old} -> {new}: no such rule"
        assert old not in EVERY_RULE, f"{old} is a rule's name: a redirect may not shadow it"
        assert new not in redirects.REDIRECTS, f"{old} -> {new} -> ...: point at the last name"
    assert OLD not in EVERY_RULE and NEW in EVERY_RULE


def test_names_never_renamed_are_their_own(renamed: None) -> None:
    assert redirects.current(NEW) == NEW and redirects.redirected(NEW) is None
    assert redirects.current(OLD) == NEW and redirects.redirected(OLD) == NEW


def test_every_place_a_config_names_a_rule_reads_the_old_name(renamed: None) -> None:
    options = {"enabled": True, "mode": "report"}
    route = {"upstream": {"url": "http://k.example"}, "rules": {OLD: False}}
    data: dict[str, Any] = {
        "rules": {OLD: options},
        "recover": {"lossy": [OLD]},
        "routes": {"k": {**route, "recover": {"lossy": [OLD, NEW]}}},
    }
    config = parse_config(data, env={})
    default, k = config.default, config.routes[0]
    assert set(default.rules) == {NEW} and default.rules[NEW].enabled is True
    assert default.report_rules() == {NEW}
    assert default.recover.lossy == {NEW} and k.recover.lossy == {NEW}
    assert k.rules[NEW].enabled is False
    assert config.warnings == (
        f"rules.{OLD}: rule {OLD} was renamed {NEW}; the old name still works, write {NEW}",
        f"recover.lossy: rule {OLD} was renamed {NEW}; the old name still works, write {NEW}",
        f"routes.k.rules.{OLD}: rule {OLD} was renamed {NEW}; the old name still works, "
        f"write {NEW}",
        f"routes.k.recover.lossy: rule {OLD} was renamed {NEW}; the old name still works, "
        f"write {NEW}",
    )
    assert data["rules"] == {OLD: options}  # the caller's mapping is left as it was
    assert parse_config({"rules": {NEW: options}}, env={}) == parse_config(
        {"rules": {OLD: options}}, env={}
    )


def test_the_warning_is_printed_once_at_load(
    renamed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"rules": {OLD: True}}))
    assert load_config(path, env={}).default.rules[NEW].enabled is True
    err = capsys.readouterr().err
    assert err.count("chatmend: warning:") == 1
    assert f"rules.{OLD}: rule {OLD} was renamed {NEW}" in err


def test_the_old_name_and_the_new_one_side_by_side_are_a_conflict(renamed: None) -> None:
    with pytest.raises(ConfigError, match=rf"^rules\.{OLD}: renamed to {NEW}, which is set too"):
        parse_config({"rules": {OLD: True, NEW: False}}, env={})


def test_without_the_redirect_the_old_name_is_an_unknown_rule() -> None:
    with pytest.raises(ConfigError, match=rf"^rules\.{OLD}: unknown rule"):
        parse_config({"rules": {OLD: True}}, env={})


class SharedRedis:
    """What a replica not yet upgraded left in Redis: a learned repair under the old name."""

    def __init__(self, rules: dict[str, Any]) -> None:
        key = ["default", "http://u.example", "chat", "m", "scope"]
        value = {"rules": rules, "class": "orphan_tool_result", "expires": 4e9}
        self.found = {orjson.dumps(key): orjson.dumps(value)}

    async def hgetall(self, key: str) -> dict[bytes, bytes]:
        return self.found


async def test_a_learned_repair_shared_under_the_old_name_is_read_under_the_new(
    renamed: None,
) -> None:
    learned = LearnedRepairs(Metrics())
    learned.share(SharedRedis({OLD: {"x": 1}}), "t:")
    await learned.refresh()
    ((_, entry),) = learned._entries.items()
    assert entry.rules == {NEW: {"x": 1}}
