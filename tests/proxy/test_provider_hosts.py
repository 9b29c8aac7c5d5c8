"""The profile follows the upstream host unless the operator names one: each profile carries
its hosts (``Profile.hosts``), ``proxy.config.profile_for_upstream`` reads them."""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from yarl import URL

from proxy.cli import log_started
from proxy.config import load_config, parse_config, profile_for_upstream
from rules.providers.profiles import DEFAULT_PROFILE, HOST_PROFILES, PROFILES

ROOT = Path(__file__).resolve().parents[2]

#: Each host glob of every profile with the base URL its record gives (``Host.example``).
EXAMPLES = {host.pattern: host.example for profile in PROFILES.values() for host in profile.hosts}


def started(data: dict[str, Any] | None = None, upstream: str | None = None) -> dict[str, Any]:
    """The ``proxy_started`` event for a config (as ``chatmend serve --upstream`` logs it)."""
    config = load_config(env={}, upstream=upstream) if data is None else parse_config(data)
    with capture_logs() as logs:
        log_started(config, listen="127.0.0.1:0")
    return dict(next(event for event in logs if event["event"] == "proxy_started"))


@pytest.mark.parametrize(("pattern", "profile"), HOST_PROFILES)
def test_every_host_in_the_table_picks_its_profile(pattern: str, profile: str) -> None:
    assert profile in PROFILES
    url = EXAMPLES[pattern]
    event = started(upstream=url)
    assert event["profile"] == profile
    assert pattern in event["profile_reason"]
    assert event["sources"]["profile"] == "upstream host"
    # the rules logged are the ones the chosen profile runs
    config = load_config(env={}, upstream=url)
    assert event["rules"] == [rule.name for rule, _ in config.planner().plans[profile].steps]


def test_no_two_profiles_claim_one_host() -> None:
    """First match wins, but no order is needed: each host's example matches its own glob
    only, whichever profile lists it first."""
    assert len(EXAMPLES) == len(HOST_PROFILES)
    for pattern, url in EXAMPLES.items():
        host = (URL(url).host or "").lower()
        assert [p for p, _ in HOST_PROFILES if fnmatchcase(host, p)] == [pattern], url


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8788", "https://llm.internal.example/v1", "https://API.x.ai.evil.example"],
)
def test_an_unknown_host_gets_the_documented_default(url: str) -> None:
    profile, reason = profile_for_upstream(url)
    assert profile == DEFAULT_PROFILE == "deepseek"
    assert "not a known provider" in reason


def test_host_matching_is_case_insensitive() -> None:
    assert profile_for_upstream("https://API.Mistral.AI")[0] == "mistral"


def test_an_explicit_profile_always_wins(tmp_path: Path) -> None:
    moonshot = "https://api.moonshot.ai"
    assert load_config(env={}, upstream=moonshot).default.profile == "kimi"
    flagged = load_config(env={}, upstream=moonshot, profile="passthrough")
    assert (flagged.default.profile, flagged.sources["profile"]) == (
        "passthrough",
        "flag --profile",
    )
    assert flagged.default.profile_reason == "profile set by flag --profile"
    path = tmp_path / "c.yaml"
    path.write_text("profile: mistral\n")
    filed = load_config(path, env={}, upstream=moonshot)
    assert (filed.default.profile, filed.default.profile_reason) == (
        "mistral",
        "profile set by file",
    )
    # the environment's upstream implies the profile as a flag's would
    assert load_config(env={"CHATMEND_UPSTREAM": moonshot}).default.profile == "kimi"


def test_routes_pick_their_own_profile_from_their_upstream() -> None:
    data = {
        "upstream": {"url": "https://api.deepseek.com"},
        "routes": {
            "kimi": {"upstream": {"url": "https://api.moonshot.ai"}},
            "mistral": {"upstream": {"url": "https://api.mistral.ai"}, "profile": "passthrough"},
            "local": {"upstream": {"url": "http://127.0.0.1:8000"}},
        },
    }
    config = parse_config(data)
    profiles = {route.name: route.profile for route in config.all_routes()}
    assert profiles == {
        "kimi": "kimi",
        "mistral": "passthrough",  # its own profile: wins
        "local": "deepseek",  # no known host: the default
        "default": "deepseek",
    }
    event = started(data)
    assert event["routes"]["kimi"]["profile"] == "kimi"
    assert "api.moonshot.ai" in event["routes"]["kimi"]["profile_reason"]
    assert event["routes"]["mistral"]["profile_reason"] == "routes.mistral.profile"
    # a top-level profile the operator set is inherited by every route without its own
    inherited = parse_config({**data, "profile": "groq"})
    assert {r.name: r.profile for r in inherited.all_routes()} == {
        "kimi": "groq",
        "mistral": "passthrough",
        "local": "groq",
        "default": "groq",
    }
