"""Configuration: precedence, validation messages, and the example file kept in step."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy.config import (
    DEFAULT_MAX_BODY_BYTES,
    KNOWN_RULES,
    Config,
    ConfigError,
    RecoverConfig,
    load_config,
    parse_config,
    unknown_env,
)
from rules.chat import RULES
from rules.messages import MESSAGES_RULES_BY_NAME
from rules.providers.profiles import PROFILES
from rules.replies import REPLY_RULES_BY_NAME
from rules.responses import RESPONSES_RULES_BY_NAME
from tools import docs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config.example.yaml"


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_embedded_defaults() -> None:
    config = load_config(env={})
    assert config.listen.host == "127.0.0.1"
    assert config.listen.port == 8787
    assert config.default.upstream.url == "https://api.deepseek.com"
    assert config.max_body_bytes == DEFAULT_MAX_BODY_BYTES == 64 * 1024 * 1024
    assert config.default.log_content is False
    assert (config.default.profile, config.default.models, config.default.rules) == (
        "deepseek",
        (),
        {},
    )
    steps = config.planner().plans["deepseek"].steps
    assert [rule.name for rule, _ in steps] == [
        r.name for r in RULES if r.default or PROFILES["deepseek"].rules.get(r.name)
    ]


def test_precedence_flags_over_env_over_yaml(tmp_path: Path) -> None:
    """The container convention: flags > environment > file > defaults, each source logged."""
    env = {"CHATMEND_UPSTREAM": "http://env.example"}
    assert load_config(env=env).default.upstream.url == "http://env.example"
    path = write(tmp_path, {"upstream": {"url": "http://yaml.example"}, "listen": {"port": 9000}})
    assert load_config(path, env={}).default.upstream.url == "http://yaml.example"
    from_env = load_config(path, env=env)
    assert from_env.default.upstream.url == "http://env.example"  # the environment beats the file
    assert from_env.listen.port == 9000
    assert from_env.sources["upstream.url"] == "env CHATMEND_UPSTREAM"
    assert from_env.sources["listen"] == "file"
    assert from_env.sources["max_body_bytes"] == "default"
    flagged = load_config(path, env=env, upstream="http://flag.example/", port=9100, host="0.0.0.0")
    assert flagged.default.upstream.url == "http://flag.example"
    assert (flagged.listen.host, flagged.listen.port) == ("0.0.0.0", 9100)
    assert flagged.sources["upstream.url"] == "flag --upstream"
    assert flagged.sources["listen.port"] == "flag --port"
    assert flagged.sources["listen.host"] == "flag --host"


@pytest.mark.parametrize(
    ("kwargs", "env", "message"),
    [
        ({"upstream": "ftp://x"}, {}, "--upstream: must be an absolute http"),
        ({}, {"CHATMEND_UPSTREAM": "nope"}, "CHATMEND_UPSTREAM: must be an absolute http"),
        ({"port": 70000}, {}, "--port: must be a port number"),
        ({"profile": "nope"}, {}, "--profile: unknown profile"),
    ],
)
def test_flag_and_env_errors_name_their_source(
    kwargs: dict[str, Any], env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(env=env, **kwargs)
    assert str(info.value).startswith(message), str(info.value)


def test_config_path_from_env(tmp_path: Path) -> None:
    path = write(tmp_path, {"listen": {"port": 9001}})
    assert load_config(env={"CHATMEND_CONFIG": str(path)}).listen.port == 9001


def test_the_example_file_is_the_defaults() -> None:
    assert load_config(EXAMPLE, env={}) == Config()


#: A commented-out rule in the example's rules section (``  # name:  # rule default: on``) and
#: one of its options (``  #   option: value``), one per line.
_COMMENTED_RULE = re.compile(r"^  # ([a-z][a-z0-9-]*):  # rule default: (on|off)$")
_COMMENTED_OPTION = re.compile(r"^  #   ([a-z_]+): (.+)$")
#: Options the planner fills from the route (``direct_openai`` from the upstream's host): shown
#: in the example, they would override that when uncommented, so only their doc is written.
ROUTE_FILLED = docs.ROUTE_FILLED


def example_rules() -> dict[str, dict[str, Any]]:
    """The rules config.example.yaml lists, in order, each with the options shown under it
    (checking each rule's ``rule default`` comment on the way)."""
    section = EXAMPLE.read_text().split("\nrules:\n", 1)[1]
    found: dict[str, dict[str, Any]] = {}
    current = None
    for line in section.splitlines():
        rule, option = _COMMENTED_RULE.match(line), _COMMENTED_OPTION.match(line)
        if rule and rule.group(1) in KNOWN_RULES:
            current = rule.group(1)
            found[current] = {}
            assert (rule.group(2) == "on") is KNOWN_RULES[current].default, current
        elif option and current is not None:
            found[current][option.group(1)] = yaml.safe_load(option.group(2))
        elif not line.startswith("  # ") or line.startswith("  #   "):
            current = None  # a line that belongs to no rule's block
    return found


def test_the_example_file_lists_every_rule_and_option_in_order() -> None:
    found = example_rules()
    assert list(found) == [
        *(rule.name for rule in RULES),
        *RESPONSES_RULES_BY_NAME,
        *MESSAGES_RULES_BY_NAME,
        *REPLY_RULES_BY_NAME,
    ]
    for name, options in found.items():
        declared = {o.name: o.default for o in KNOWN_RULES[name].options}
        shown = {k: v for k, v in declared.items() if (name, k) not in ROUTE_FILLED}
        assert options == shown, f"{name}: document each option with its default"
        parse_config({"rules": {name: options or None}})  # valid once uncommented


@pytest.mark.slow
def test_the_example_file_is_safe_to_uncomment_line_by_line() -> None:
    """Each commented line of config.example.yaml, uncommented on its own: either not valid
    (YAML, or a config error at start-up: loud), or a config that keeps every profile's switch
    of every rule. The issue: `reasoning-content: {enabled: false, ...}` uncommented to change
    the placeholder switched the rule off under deepseek and kimi."""
    lines = EXAMPLE.read_text().splitlines()
    baseline = _switches(load_config(EXAMPLE, env={}))
    loaded = 0
    rule_lines = 0
    for number, line in enumerate(lines):
        stripped = line.lstrip()
        if not stripped.startswith("#"):
            continue
        indent = line[: len(line) - len(stripped)]
        uncommented = [
            *lines[:number],
            indent + stripped[1:].removeprefix(" "),
            *lines[number + 1 :],
        ]
        try:
            data = yaml.safe_load("\n".join(uncommented))
            config = parse_config(data if isinstance(data, dict) else {}, env={})
        except (yaml.YAMLError, ConfigError):
            continue
        loaded += 1
        rule_lines += bool(_COMMENTED_RULE.match(line))
        assert _switches(config) == baseline, f"line {number + 1}: {line.strip()}"
    assert rule_lines == len(KNOWN_RULES)  # every rule's line was tried and loaded
    assert loaded > len(KNOWN_RULES)


def test_a_rule_line_and_one_option_under_it_change_that_option_only() -> None:
    """Uncommenting `reasoning-content:` and its `placeholder:` line: the option applies, and the
    rule stays on exactly where the profiles switch it on."""
    text = EXAMPLE.read_text()
    for line in ("  # reasoning-content:  # rule default: off", '  #   placeholder: " "'):
        assert line in text
        text = text.replace(line, "  " + line.removeprefix("  # "), 1)
    text = text.replace('  placeholder: " "', '  placeholder: "(thinking)"')
    config = parse_config(yaml.safe_load(text), env={})
    assert _switches(config) == _switches(load_config(EXAMPLE, env={}))
    for name, plan in config.planner().plans.items():
        for rule, ctx in plan.steps:
            if rule.name == "reasoning-content":
                assert ctx.options["placeholder"] == "(thinking)", name


def _switches(config: Config) -> dict[str, list[str]]:
    """Every profile's enforced rules, in order: what an example line must never change."""
    planner = config.planner()
    plans = {**planner.plans, **{f"{n} (messages)": p for n, p in planner.messages_plans.items()}}
    return {name: [rule.name for rule, _ in plan.steps] for name, plan in plans.items()}


def test_rule_toggles_and_options(tmp_path: Path) -> None:
    config = parse_config(
        {"rules": {"empty-tool-calls": False, "invalid-tool-arguments": {"truncated": "empty"}}}
    )
    assert config.default.rules["empty-tool-calls"].enabled is False
    assert config.default.rules["invalid-tool-arguments"].enabled is None  # the profile decides
    assert config.default.rules["invalid-tool-arguments"].options == {"truncated": "empty"}
    settings = config.rule_settings()
    assert settings == {
        "empty-tool-calls": {"enabled": False},
        "invalid-tool-arguments": {"truncated": "empty"},
    }
    steps = {rule.name: ctx for rule, ctx in config.planner().plans["deepseek"].steps}
    assert "empty-tool-calls" not in steps
    assert steps["invalid-tool-arguments"].options == {"truncated": "empty"}


def test_overrides_apply_over_every_profile_and_keep_its_options() -> None:
    config = parse_config({"rules": {"thinking-tool-choice": {"replacement": "omit"}}})
    plans = config.planner().plans
    # deepseek switches it on: the operator's option rides on the profile's switch
    deepseek = {rule.name: ctx for rule, ctx in plans["deepseek"].steps}
    assert deepseek["thinking-tool-choice"].options["replacement"] == "omit"
    assert "thinking-tool-choice" not in {rule.name for rule, _ in plans["openai"].steps}
    assert plans["passthrough"].steps == []


def test_profile_and_models(tmp_path: Path) -> None:
    config = parse_config({"profile": "openai", "models": {"Mistral-*": "mistral"}})
    assert (config.default.profile, config.default.models) == (
        "openai",
        (("Mistral-*", "mistral"),),
    )
    planner = config.planner()
    assert planner.plan("mistral-large-latest").profile == "mistral"
    assert planner.plan("gpt-5").profile == "openai"
    assert planner.plan(None).profile == "openai"
    assert load_config(env={}, profile="kimi").default.profile == "kimi"
    # the default profile hands deepseek-reasoner to its stricter sibling
    default = parse_config({}).planner()
    assert default.plan("deepseek-reasoner").profile == "deepseek-reasoner"
    assert default.plan("DeepSeek-Reasoner").profile == "deepseek-reasoner"
    assert default.plan("deepseek-chat").profile == "deepseek"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"listn": {}}, "listn: unknown key"),
        ({"listen": {"port": 70000}}, "listen.port: must be a port number"),
        ({"listen": {"port": "80"}}, "listen.port: must be a port number"),
        ({"listen": []}, "listen: must be a mapping"),
        ({"upstream": {"url": "ftp://x"}}, "upstream.url: must be an absolute http"),
        ({"upstream": {"url": "http://u:p@x"}}, "upstream.url: must not carry credentials"),
        ({"upstream": {"read_timeout": 0}}, "upstream.read_timeout: must be a positive number"),
        ({"upstream": {"retries": 3}}, "upstream.retries: unknown key"),
        ({"max_body_bytes": -1}, "max_body_bytes: must be a positive integer"),
        ({"log_content": "yes"}, "log_content: must be true or false"),
        (
            {"profile": "claude"},
            "profile: unknown profile 'claude'; known profiles: deepseek",
        ),
        ({"models": {"x-*": "nope"}}, "models.x-*: unknown profile 'nope'"),
        ({"models": ["x"]}, "models: must be a mapping"),
        ({"mode": "dry-run"}, "mode: must be enforce or report"),
        ({"rules": {"empty-tool-calls": {"mode": "off"}}}, "rules.empty-tool-calls.mode: must be"),
        ({"rules": {"no-such-rule": True}}, "rules.no-such-rule: unknown rule (docs/rules.md"),
        (
            {"rules": {"empty-tool-call": True}},
            "rules.empty-tool-call: unknown rule; did you mean empty-tool-calls",
        ),
        ({"rules": {"empty-tool-calls": {"enabled": "on"}}}, "rules.empty-tool-calls.enabled"),
        ({"rules": {"empty-tool-calls": {"speed": 1}}}, "rules.empty-tool-calls.speed: unknown"),
        (
            {"rules": {"invalid-tool-arguments": {"truncated": "guess"}}},
            "rules.invalid-tool-arguments.truncated: must be one of 'close', 'empty'",
        ),
    ],
)
def test_errors_name_the_dotted_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert str(info.value).startswith(message), str(info.value)


def test_unknown_rule_suggests_a_few_close_ones_in_one_short_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"rules": {"typo": True}})
    message = str(info.value)
    assert "\n" not in message and len(message) < 200  # not the 62 names
    assert "docs/rules.md" in message  # where the list is
    with pytest.raises(ConfigError) as info:
        parse_config({"rules": {"orphan-tool-result": True}})
    suggested = str(info.value).split("did you mean ")[1].split("?")[0].split(" or ")
    assert "orphan-tool-results" in suggested and len(suggested) <= 3
    assert all(name in {rule.name for rule in RULES} for name in suggested)


def test_invalid_yaml_is_one_line_with_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("listen:\n  port: 8787\n rules: [\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad, env={})
    message = str(info.value)
    assert "\n" not in message and "invalid YAML at line 3, column 2" in message, message


def test_unknown_chatmend_variables_are_warned_about(capsys: pytest.CaptureFixture[str]) -> None:
    env = {
        "CHATMEND_PORT": "9000",
        "CHATMEND_UPSTRAEM": "https://x",
        "CHATMEND_KEY": "k",
        "CHATMEND_CONFIG": "",
        "PATH": "/bin",
    }
    lines = unknown_env(env, {"upstream": {"api_key_env": "CHATMEND_KEY"}})
    assert len(lines) == 2  # the config names CHATMEND_KEY: not unknown
    assert lines[0].startswith("CHATMEND_PORT is not a chatmend variable") and "--port" in lines[0]
    assert "did you mean CHATMEND_UPSTREAM?" in lines[1]
    load_config(env=env)
    assert "warning: CHATMEND_PORT" in capsys.readouterr().err


def test_missing_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.yaml", env={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("listen: [\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(bad, env={})
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(scalar, env={})


def test_the_example_routes_and_credentials_are_valid_once_uncommented() -> None:
    """The commented ``routes:`` example and the credential lines parse as documented."""
    text = EXAMPLE.read_text()
    block = text.split("\nroutes: {}\n", 1)[1].split("\n\n", 1)[0]
    routes = yaml.safe_load("\n".join(line.removeprefix("#") for line in block.splitlines()))
    upstream = {"api_key_env": "DEEPSEEK_API_KEY", "api_key_header": "authorization"}
    for line in ("# api_key_env: DEEPSEEK_API_KEY", "# api_key_header: authorization"):
        assert line in text
    assert "# client_tokens_env: CHATMEND_CLIENT_TOKENS" in text
    env = {
        "MOONSHOT_API_KEY": "sk-moonshot",
        "DEEPSEEK_API_KEY": "sk-deepseek",
        "CHATMEND_CLIENT_TOKENS": "token-0123456789abcdef",
    }
    config = parse_config(
        {"upstream": upstream, "client_tokens_env": "CHATMEND_CLIENT_TOKENS", "routes": routes},
        env=env,
    )
    assert [(r.name, r.prefix, r.profile) for r in config.routes] == [
        ("mistral", "/mistral", "mistral"),
        ("kimi", "/kimi", "kimi"),
    ]


def test_recover_top_level_and_per_route() -> None:
    # on by default (issue 26): a retry follows only a refusal, which cost no tokens
    assert load_config(env={}).default.recover == RecoverConfig(enabled=True, max_attempts=1)
    routes = {
        "a": {"upstream": {"url": "http://a.example"}},
        "b": {"upstream": {"url": "http://b.example"}, "recover": {"enabled": False}},
    }
    config = parse_config({"recover": {"enabled": True}, "routes": routes}, env={})
    by_name = {route.name: route.recover for route in config.all_routes()}
    assert by_name["default"] == by_name["a"] == RecoverConfig(enabled=True)
    assert by_name["b"] == RecoverConfig(enabled=False)
    assert not RecoverConfig(enabled=True, max_attempts=0).active


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"recover": {"enabled": "yes"}}, "recover.enabled"),
        ({"recover": {"max_attempts": 2}}, "recover.max_attempts"),
        ({"recover": {"max_attempts": True}}, "recover.max_attempts"),
        ({"recover": {"retries": 1}}, "recover.retries"),
        ({"recover": []}, "recover"),
        (
            {"routes": {"k": {"upstream": {"url": "http://k.example"}, "recover": {"x": 1}}}},
            "routes.k.recover.x",
        ),
    ],
)
def test_bad_recover_values_name_the_dotted_key(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(data, env={})
    assert str(raised.value).startswith(f"{key}:")
