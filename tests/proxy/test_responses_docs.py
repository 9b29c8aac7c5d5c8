"""The Responses rules in the example config, and ``chatmend check`` on a
Responses body."""

from __future__ import annotations

from pathlib import Path

import orjson

from proxy.config import parse_config
from rules.responses import RESPONSES_RULES
from tests.proxy.test_config import ROUTE_FILLED, example_rules
from tools.check import REPAIRED, check_body, render_text

NAMES = {rule.name for rule in RESPONSES_RULES}

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_file_lists_every_responses_rule_and_option_in_order() -> None:
    found = {name: options for name, options in example_rules().items() if name in NAMES}
    assert list(found) == [rule.name for rule in RESPONSES_RULES]
    for rule in RESPONSES_RULES:
        shown = {o.name for o in rule.options if (rule.name, o.name) not in ROUTE_FILLED}
        assert set(found[rule.name]) == shown
        assert all(found[rule.name][o.name] == o.default for o in rule.options if o.name in shown)
        parse_config({"rules": {rule.name: found[rule.name] or None}})


def test_check_reads_a_responses_body() -> None:
    body = orjson.dumps(
        {
            "model": "gpt-4.1",
            "input": [
                {"role": "user", "content": "list"},
                {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"},
            ],
        }
    )
    report = check_body(body, parse_config({}).planner())
    assert report.profile == "responses:deepseek" and report.api == "responses"
    assert [v.code for v in report.before] == ["responses_unanswered_call"]
    assert report.after == ()
    assert report.status == REPAIRED
    text = render_text(report)
    assert (
        "input[1] responses_unanswered_call: No tool output found for function call call_1." in text
    )
    assert "after repair: accepted" in text
    # --profile names a chat profile: a Responses body gets that profile's Responses rules
    chat_plan = parse_config({}).planner().plans["groq"]
    assert check_body(body, chat_plan).status == REPAIRED
    # ... and passthrough's none: it runs no rule on any API
    passthrough = parse_config({}).planner().plans["passthrough"]
    assert check_body(body, passthrough).status != REPAIRED


def test_check_reports_and_repairs_invalid_arguments_where_the_provider_refuses_them() -> None:
    """Issue 24: invalid ``function_call.arguments`` JSON was called accepted; vLLM refuses it
    with the JSONDecodeError's text (docs/providers.md#chat-templates-pairing)."""
    body = orjson.dumps(
        {
            "model": "qwen3",
            "input": [
                {"role": "user", "content": "go"},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{'a': 1}"},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            ],
        }
    )
    vllm = parse_config({"profile": "chat-template"}).planner()
    report = check_body(body, vllm)
    assert [v.code for v in report.before] == ["responses_invalid_arguments"]
    assert "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)" in (
        render_text(report)
    )
    assert report.after == () and report.status == REPAIRED
    assert orjson.loads(report.result.body)["input"][1]["arguments"] == '{"a":1}'
    # OpenAI is not on record refusing it: accepted as sent.
    openai = parse_config({"profile": "openai"}).planner()
    assert check_body(body, openai).before == ()
