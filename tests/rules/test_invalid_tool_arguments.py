"""invalid-tool-arguments beyond the fixtures: each repair, limits, determinism, log detail."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rules.chat.invalid_tool_arguments import RULE, TRUNCATED
from rules.engine.base import RuleContext
from rules.engine.json_repair_passes import (
    FIXES,
    LOSSY_FIXES,
    MAX_LOGGED_CHARS,
    dump_object,
    parse_strict_object,
    repair_object,
    strip_code_fence,
)
from tests.budget import examples
from tests.work import assert_linear, lines_executed

# input text -> (repaired compact text, fixes), with the default `truncated: close`.
REPAIRS: list[tuple[str, str, tuple[str, ...]]] = [
    ('{"a":1,}', '{"a":1}', ("trailing_comma",)),
    ('{"a":[1,2,]}', '{"a":[1,2]}', ("trailing_comma",)),
    ('{"a":{"b":1,},}', '{"a":{"b":1}}', ("trailing_comma",)),
    ('{"s":"a, }","t":1,}', '{"s":"a, }","t":1}', ("trailing_comma",)),
    ('{"s":"a\nb\tc\x00"}', '{"s":"a\\nb\\tc\\u0000"}', ("control_characters",)),
    ('{"s":"\x1f\r\x08\x0c"}', '{"s":"\\u001f\\r\\b\\f"}', ("control_characters",)),
    ('{"a":True,"b":False,"c":None}', '{"a":true,"b":false,"c":null}', ("python_literals",)),
    ('{"a":[None,True]}', '{"a":[null,true]}', ("python_literals",)),
    ("{'a':'b'}", '{"a":"b"}', ("single_quotes",)),
    ("{'a':'say \"x\"'}", '{"a":"say \\"x\\""}', ("single_quotes",)),
    ("{'a':'it\\'s'}", '{"a":"it\'s"}', ("single_quotes",)),
    ("{'a':'\\\\'}", '{"a":"\\\\"}', ("single_quotes",)),
    ('{"a":NaN,"b":[Infinity,-Infinity]}', '{"a":null,"b":[null,null]}', ("non_finite_numbers",)),
    ('```json\n{"a": 1}\n```', '{"a":1}', ("code_fence",)),
    ('```\n{"a": 1}\n```', '{"a":1}', ("code_fence",)),
    ('  ```JSON\r\n{"a": 1}\r\n```  ', '{"a":1}', ("code_fence",)),
    ('```json\n{"a": 1', '{"a":1}', ("code_fence", "closed_brackets")),
    ("```json\n```", "{}", ("code_fence",)),
    ('```json {"a": 1}```', '{"a":1}', ("code_fence",)),
    ('```{"a": "```"}```', '{"a":"```"}', ("code_fence",)),
    ('"{\\"a\\":1}"', '{"a":1}', ("double_encoded",)),
    ('"{\\"a\\":1,}"', '{"a":1}', ("double_encoded", "trailing_comma")),
    ('"\\"{\\\\\\"a\\\\\\":1}\\""', '{"a":1}', ("double_encoded",)),
    ("'{\"a\": 1}'", '{"a":1}', ("double_encoded", "single_quotes")),
    ('"{\\"a\\":\\"hel', '{"a":"hel"}', ("double_encoded", "closed_string", "closed_brackets")),
    ('{"a":[1,2', '{"a":[1,2]}', ("closed_brackets",)),
    ('{"a":{"b":[{"c":"}]"', '{"a":{"b":[{"c":"}]"}]}}', ("closed_brackets",)),
    ('{"a":"\\"{["', '{"a":"\\"{["}', ("closed_brackets",)),
    ("{", "{}", ("closed_brackets",)),
    ('{"a":[{"b":1}}', '{"a":[{"b":1}]}', ("misnested_closers",)),
    ('{"a":[[{"b":1}}', '{"a":[[{"b":1}]]}', ("misnested_closers",)),
    ('{"a":[1,}', '{"a":[1]}', ("trailing_comma", "misnested_closers")),
    ('{"k":"v"}}', '{"k":"v"}', ("extra_closers",)),
    ('{"k":"v"}]}\n', '{"k":"v"}', ("extra_closers",)),
    ('{"a":[1]]}', '{"a":[1]}', ("extra_closers",)),
    ('{"a":{"b":1]}}', '{"a":{"b":1}}', ("extra_closers",)),
    ('{"a":1,', '{"a":1}', ("incomplete_tail", "closed_brackets")),
    ('{"a":1,"b"', '{"a":1}', ("incomplete_tail", "closed_brackets")),
    ('{"a":1,"b":', '{"a":1}', ("incomplete_tail", "closed_brackets")),
    ('{"a":1,"b', '{"a":1}', ("incomplete_tail", "closed_brackets")),
    ('{"a":1,"b":tr', '{"a":1,"b":true}', ("completed_literal", "closed_brackets")),
    ('{"a":[Fa', '{"a":[false]}', ("completed_literal", "closed_brackets")),
    ('{"a":1,"b":N', '{"a":1,"b":null}', ("completed_literal", "closed_brackets")),
    ('{"a":1,"b":-Inf', '{"a":1,"b":null}', ("completed_literal", "closed_brackets")),
    ('{"a":1,"b":1.', '{"a":1}', ("incomplete_tail", "closed_brackets")),
    ('{"a":1,"b":2e', '{"a":1}', ("incomplete_tail", "closed_brackets")),
    ('{"a":1,"b":-', '{"a":1}', ("incomplete_tail", "closed_brackets")),
    ('{"a":[1,2,', '{"a":[1,2]}', ("incomplete_tail", "closed_brackets")),
    ('{"a":1,"b":{"c":', '{"a":1,"b":{}}', ("incomplete_tail", "closed_brackets")),
    ('{"a":"hello wor', '{"a":"hello wor"}', ("closed_string", "closed_brackets")),
    ('{"a":"line\n', '{"a":"line\\n"}', ("control_characters", "closed_string", "closed_brackets")),
    (
        '{"a":"ends with spaces  ',
        '{"a":"ends with spaces  "}',
        ("closed_string", "closed_brackets"),
    ),
    ('{"a":["x","y', '{"a":["x","y"]}', ("closed_string", "closed_brackets")),
    ('{"a":"end\\', '{"a":"end"}', ("closed_string", "closed_brackets")),
    ('{"a":"end\\u00e', '{"a":"end"}', ("closed_string", "closed_brackets")),
    ('{"a":"end\\ud83d', '{"a":"end"}', ("closed_string", "closed_brackets")),
    ('{"a":"end\\ud83d\\ude', '{"a":"end"}', ("closed_string", "closed_brackets")),
    ('{"a":"end\\\\u12', '{"a":"end\\\\u12"}', ("closed_string", "closed_brackets")),
    ('{"a":1}{"b":2}', '{"a":1}', ("dropped_trailing",)),
    ('{"a":1}\n{"b":2}\n{"c":[3]}', '{"a":1}', ("dropped_trailing",)),
    ('{"a":1}}{"b":', '{"a":1}', ("extra_closers", "dropped_trailing")),
    # Valid JSON goes through unchanged apart from compaction (callers keep it as it was).
    ('{ "a" : [ 1 , 2.50 ] , "é" : "ü" }', '{"a":[1,2.5],"é":"ü"}', ()),
    # Integers beyond 64 bits keep every digit (orjson would round them through a float).
    (
        '{"n":123456789012345678901234567890,}',
        '{"n":123456789012345678901234567890}',
        ("trailing_comma",),
    ),
    # Escaped lone surrogates stay escaped (the output stays valid UTF-8 for the proxy).
    ('{"s":"\\ud800",}', '{"s":"\\ud800"}', ("trailing_comma",)),
]

UNREPAIRABLE: list[str] = [
    "",
    "   ",
    "null",
    "None",
    "42",
    "[1,2]",
    '[{"a":1}]',
    '"just a string"',
    '"[1,2]"',
    'Sure: {"a":1}',
    '{"a":1} hope this helps',
    '{"a":1},',
    "{a:1}",
    '{"a":1 // comment\n}',
    '{"a":1 /* c */}',
    '{"a":1 "b":2}',
    '{"a":,"b":2}',
    '{"a":}',
    '{"a"}',
    '{,"a":1}',
    '{"a":1,,"b":2}',
    '{"a":"\\d"}',
    '{"a":"\\x41"}',
    '{"a":"\\u12G4"}',
    '{"a":"it\\\'s"}',
    '{"a":"x\\\ny"}',
    '{"a":undefined}',
    '{"a":nothing',
    '{"a":t rue}',
    '{"a":0x1F}',
    '{"a":01}',
    '{"a":.5}',
    '{"a":+1}',
    '{"a":1e400,}',
    "{'it's': 1}",
    '{"a": [1, 2}, "b": 3}',
    "\ufeff{}",
    '<tool_call>{"a":1}</tool_call>',
    '"' * 3,
    '"\\"\\"\\"{}\\\\\\"\\"\\""',
]


@pytest.mark.parametrize(("text", "expected", "fixes"), REPAIRS)
def test_repair(text: str, expected: str, fixes: tuple[str, ...]) -> None:
    repaired = repair_object(text)
    assert (repaired.text, repaired.fixes) == (expected, fixes)
    assert parse_strict_object(expected)


@pytest.mark.parametrize("text", UNREPAIRABLE)
def test_unrepairable(text: str) -> None:
    assert repair_object(text).text is None


def test_every_fix_is_exercised() -> None:
    used = {fix for _, _, fixes in REPAIRS for fix in fixes}
    assert used == set(FIXES)
    assert set(FIXES) >= LOSSY_FIXES


def test_truncated_string_with_empty_option_is_unrepairable() -> None:
    assert repair_object('{"a":"hello wor', close_strings=False).text is None
    assert repair_object('"{\\"a\\":1', close_strings=False).text is None
    # A key cut off is an incomplete member, not an incomplete value: dropped either way.
    assert repair_object('{"a":1,"bcd', close_strings=False).text == '{"a":1}'
    # Strings that end before the cut are fine.
    assert repair_object('{"a":"x","b":[1', close_strings=False).text == '{"a":"x","b":[1]}'


def test_concatenated_counts_what_it_dropped() -> None:
    repaired = repair_object('{"a":1} {"b":"}{"} [2]\n{"c":')
    assert repaired.text == '{"a":1}'
    assert (repaired.dropped_values, repaired.dropped_chars) == (3, 20)


def test_code_fence() -> None:
    assert strip_code_fence('```json\n{"a":1}\n```') == '{"a":1}'
    assert strip_code_fence('```\n{"a":"```"}\n```') == '{"a":"```"}'
    assert strip_code_fence('{"a":"```"}') is None
    assert strip_code_fence("```python\nprint(1)") == "print(1)"
    assert strip_code_fence("```text is not a fence") is None


def test_parse_strict_object() -> None:
    assert parse_strict_object('{"a": 1}')
    assert parse_strict_object('{"s":"\\ud800"}')  # grammatical; orjson refuses it
    assert parse_strict_object('{"n":1e400}')  # grammatical; orjson refuses it
    assert not parse_strict_object('{"a": NaN}')
    assert not parse_strict_object("[1]")
    assert not parse_strict_object('"{}"')
    assert not parse_strict_object("{")


def test_dump_object() -> None:
    assert dump_object({"a": float("nan"), 1: [True]}) == '{"a":null,"1":[true]}'
    assert dump_object({"n": 2**70}) == '{"n":1180591620717411303424}'
    assert dump_object({"x": object()}) is None


# --- the rule ----------------------------------------------------------------------------


def _messages(*arguments: Any) -> list[Any]:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": f"f{i}", "arguments": a}}
        for i, a in enumerate(arguments)
    ]
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": calls},
    ]


def _run(messages: list[Any], *, log_content: bool = False, **options: Any) -> Any:
    return RULE.apply(messages, RULE.context(options, log_content=log_content))


def test_copy_on_write_shares_what_did_not_change() -> None:
    messages = _messages('{"ok": 1}', '{"broken": 1,', {"dict": True})
    messages.append({"role": "tool", "tool_call_id": "c0", "content": "ok"})
    snapshot = copy.deepcopy(messages)
    outcome = _run(messages)
    assert messages == snapshot
    out = outcome.messages
    assert out is not messages
    assert out[0] is messages[0] and out[2] is messages[2]
    assert out[1] is not messages[1]
    old_calls, new_calls = messages[1]["tool_calls"], out[1]["tool_calls"]
    assert new_calls is not old_calls
    assert new_calls[0] is old_calls[0]
    assert new_calls[1]["function"] is not old_calls[1]["function"]
    assert [c["function"]["arguments"] for c in new_calls] == [
        '{"ok": 1}',
        '{"broken":1}',
        '{"dict":true}',
    ]
    assert [c.action for c in outcome.changes] == ["trimmed_arguments", "serialized_object"]


def test_other_keys_are_kept() -> None:
    messages = [
        {
            "role": "assistant",
            "content": "x",
            "extra": 1,
            "tool_calls": [
                {"id": "c", "type": "function", "index": 0, "function": {"name": "f", "x": 2}}
            ],
        }
    ]
    out = _run(messages).messages
    assert out == [
        {
            "role": "assistant",
            "content": "x",
            "extra": 1,
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "index": 0,
                    "function": {"name": "f", "x": 2, "arguments": "{}"},
                }
            ],
        }
    ]


def test_unrepairable_detail_never_holds_text_without_log_content() -> None:
    secret = '{"password": "hunter2" oops}'
    outcome = _run(_messages(secret))
    (change,) = outcome.changes
    assert change.action == "replaced_unrepairable"
    assert change.as_dict() == {
        "rule": "invalid-tool-arguments",
        "index": 1,
        "action": "replaced_unrepairable",
        "tool_call_id": "c0",
        "function": "f0",
        "call_index": 0,
        "original_length": len(secret),
        "original_sha256": hashlib.sha256(secret.encode()).hexdigest(),
    }
    assert "hunter2" not in repr(outcome.changes)


def test_log_content_keeps_the_original_capped() -> None:
    huge = "{oops " + "x" * (MAX_LOGGED_CHARS + 10)
    (change,) = _run(_messages(huge), log_content=True).changes
    assert change.detail["original"] == huge[:MAX_LOGGED_CHARS]
    assert change.detail["original_length"] == len(huge)


def test_log_content_keeps_the_original_of_lossy_repairs_only() -> None:
    lossy, lossless = '{"a":1}{"b":2}', '{"a":1,}'
    changes = _run(_messages(lossy, lossless), log_content=True).changes
    assert changes[0].detail["original"] == lossy
    assert changes[0].detail["fixes"] == ["dropped_trailing"]
    assert (changes[0].detail["dropped_values"], changes[0].detail["dropped_chars"]) == (1, 7)
    assert "original" not in changes[1].detail
    for change in _run(_messages(lossy, lossless)).changes:
        assert "original" not in change.detail


def test_non_string_arguments() -> None:
    outcome = _run(_messages([1, 2], True, {"x": object()}))
    assert _arguments(outcome.messages) == ["{}"] * 3
    details = [c.detail for c in outcome.changes]
    assert [d["original_type"] for d in details] == ["list", "bool", "dict"]
    assert details[0]["original_length"] == len("[1,2]")


def _arguments(messages: list[Any]) -> list[Any]:
    """The ``arguments`` of every tool call, in order."""
    return [
        call["function"].get("arguments")
        for message in messages
        if isinstance(message, dict)
        for call in message.get("tool_calls") or []
    ]


def test_surrogates_in_text_do_not_break_hashing() -> None:
    (change,) = _run(_messages("{\ud800 broken")).changes
    assert change.action == "replaced_unrepairable"
    assert len(change.detail["original_sha256"]) == 64


def test_valid_json_that_orjson_refuses_is_kept_byte_identical() -> None:
    messages = _messages('{"s": "\\ud800"}', '{"n": 1e400}', '{"s": "\ud83d\ude00"}')
    outcome = _run(messages)
    assert outcome.messages is messages
    assert outcome.changes == ()


def test_option() -> None:
    assert TRUNCATED.validate("close") is None
    assert TRUNCATED.validate("empty") is None
    assert TRUNCATED.validate("drop") is not None
    text = '{"a":"cut'
    assert _arguments(_run(_messages(text)).messages) == ['{"a":"cut"}']
    empty = _run(_messages(text), truncated="empty")
    assert _arguments(empty.messages) == ["{}"]
    assert empty.changes[0].action == "replaced_unrepairable"


def test_deterministic_and_idempotent() -> None:
    texts = [t for t, _, _ in REPAIRS] + UNREPAIRABLE + [None, {"b": 1, "a": 2}, 3]
    messages = _messages(*texts)
    first = _run(messages)
    second = _run(copy.deepcopy(messages))
    assert first.messages == second.messages
    assert first.changes == second.changes
    again = _run(first.messages)
    assert again.messages is first.messages
    assert again.changes == ()
    for arguments in _arguments(first.messages):
        assert parse_strict_object(arguments)


def test_context_without_options_uses_the_default() -> None:
    outcome = RULE.apply(_messages('{"a":"cut'), RuleContext())
    assert outcome.changes[0].detail["fixes"] == ["closed_string", "closed_brackets"]


# --- robustness: never raise, stay linear ----------------------------------------------------

#: Hostile argument texts of a chosen size: ``make(200_000)`` is the full-size attack.
HOSTILE: list[Callable[[int], str]] = [
    lambda n: "{" * n,
    lambda n: "[" * n,
    lambda n: '{"a":' * (n // 2),
    lambda n: '{"a":[' * (n // 2),
    lambda n: "{" + '"a":1,' * n,
    lambda n: "}" * n,
    lambda n: '{"a":1}' + "}" * n,
    lambda n: '{"a":1}' + "{" * n,
    lambda n: '{"s":"' + "\\" * (2 * n + 1),
    lambda n: '{"s":"' + "\\n" * n,
    lambda n: '{"s":"' + "\n" * (2 * n) + '"}',
    lambda n: "{'s':'" + '"' * (2 * n) + "'}",
    lambda n: '{"a":' + "0" * (2 * n) + "}",
    lambda n: '{"a":' + "x" * (2 * n),
    lambda n: "```" + "\n " * n,
    lambda n: "```json" + " " * (2 * n) + "{",
    lambda n: '{"a":"' + " " * (2 * n),
    lambda n: '"' + '\\"' * n,
    lambda n: "{" + "[" * (n // 2) + "]" * (n // 2 - 1) + "}",
    lambda n: "{" + '"a":{' * 1100 + "}" * 1101,
]


@pytest.mark.parametrize("make", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_inputs_are_linear_and_safe(make: Callable[[int], str]) -> None:
    outcome = _run(_messages(make(200_000)))
    arguments = outcome.messages[1]["tool_calls"][0]["function"]["arguments"]
    assert parse_strict_object(arguments)
    assert_linear(lambda n: _messages(make(n)), _run, 1_000)


def repeated_items(size: int) -> str:
    return '{"items":[' + '{"n":1,"s":"a, }"},' * size


@pytest.mark.slow
def test_repair_work_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    from rules.engine import json_repair_passes

    monkeypatch.setattr(json_repair_passes, "MAX_SCAN_TOKENS", 10**7)  # the scan, not its cap
    assert repair_object(repeated_items(80_000)).text is not None
    assert_linear(repeated_items, repair_object, 500)


JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
)
JSON_TEXT = st.text(st.characters(codec="utf-8"), max_size=8)  # no lone surrogates
JSON_VALUE = st.recursive(
    JSON_LEAF | JSON_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(JSON_TEXT, inner, max_size=4),
    max_leaves=12,
)
JSON_OBJECT = st.dictionaries(JSON_TEXT, JSON_VALUE, max_size=5)


@pytest.mark.slow
@settings(max_examples=examples(1.5), deadline=None)
@given(JSON_OBJECT, st.booleans())
def test_every_prefix_of_an_object_repairs_to_an_object(
    value: dict[str, Any], pretty: bool
) -> None:
    option = orjson.OPT_INDENT_2 if pretty else 0
    text = orjson.dumps(value, option=option).decode()
    assert repair_object(text).text == orjson.dumps(value).decode()
    for cut in range(1, len(text)):
        closed = repair_object(text[:cut])
        assert closed.text is not None, text[:cut]
        assert type(orjson.loads(closed.text)) is dict
        emptied = repair_object(text[:cut], close_strings=False)
        if emptied.text is not None:
            assert "closed_string" not in emptied.fixes


@settings(max_examples=examples(3), deadline=None)
@given(st.text(alphabet=st.sampled_from("{}[]\",:'\\ \n\tabTrueNn01.-e`") | st.characters()))
def test_arbitrary_text_never_raises(text: str) -> None:
    for close_strings in (True, False):
        repaired = repair_object(text, close_strings=close_strings)
        if repaired.text is not None:
            assert parse_strict_object(repaired.text)
            again = repair_object(repaired.text, close_strings=close_strings)
            assert (again.text, again.fixes) == (repaired.text, ())


@settings(max_examples=examples(4), deadline=None)
@given(st.text(alphabet=st.sampled_from("\\\\\\nu0aAdb/x"), max_size=12))
def test_escapes_are_judged_like_a_json_reader(body: str) -> None:
    trailing = len(body) - len(body.rstrip("\\"))
    assume(trailing % 2 == 0)  # an odd run would escape the closing quote
    text = '{"k":"' + body + '"}'
    try:
        expected = json.loads(text)
    except ValueError:
        assert repair_object(text).text is None
    else:
        repaired = repair_object(text).text
        assert repaired is not None
        assert json.loads(repaired) == expected


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # A named function: hypothesis 6.170 misreads this lambda as not using its argument.
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)


ANY_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    _containers,
    max_leaves=10,
)


@settings(max_examples=examples(2), deadline=None)
@given(
    st.lists(
        ANY_JSONISH
        | st.fixed_dictionaries(
            {"role": st.just("assistant")},
            optional={
                "tool_calls": st.lists(
                    ANY_JSONISH
                    | st.fixed_dictionaries(
                        {"function": st.fixed_dictionaries({}, optional={"arguments": ANY_JSONISH})}
                    ),
                    max_size=3,
                )
            },
        ),
        max_size=4,
    )
)
def test_any_payload_never_raises_and_is_idempotent(messages: list[Any]) -> None:
    snapshot = copy.deepcopy(messages)
    outcome = _run(messages)
    assert messages == snapshot
    if not outcome.changes:
        assert outcome.messages is messages
    again = _run(outcome.messages)
    assert again.changes == ()
    assert again.messages is outcome.messages


# Issue 15: 21 KB of gzip holding `{"a":{"a":...` arguments took 16 s of scanning (~1.4 µs/byte).

WIDE = "{" + '"a":1,' * 30_000 + "x"  # 90,000 tokens, then junk: unrepairable at the end


def test_the_scan_stops_at_its_token_cap_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from rules.engine import json_repair_passes

    small = "{" + '"a":1,' * 500 + "x"
    assert json_repair_passes.repair_object(small).over_cap is False  # 1,500 tokens: scanned
    monkeypatch.setattr(json_repair_passes, "MAX_SCAN_TOKENS", 1_000)
    capped = json_repair_passes.repair_object(small)
    assert capped.text is None and capped.over_cap and capped.tokens == 1_000
    nested = json.dumps(small)  # double-encoded: the cap holds inside the unwrapped text too
    assert json_repair_passes.repair_object(nested).over_cap is True


def test_the_scan_stops_past_the_deepest_nesting_a_parser_reads_back() -> None:
    from rules.engine.json_repair_passes import MAX_DEPTH

    deep = repair_object('{"a":' * 400_000)  # 2 MB: about 16 s of scanning before
    assert deep.text is None and not deep.over_cap
    assert deep.tokens <= 3 * MAX_DEPTH + 3


def test_hostile_arguments_are_replaced_within_the_cap() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": WIDE}}
        ],
    }
    outcome = RULE.apply([message], RULE.context())
    (change,) = outcome.changes
    assert change.action == "replaced_unrepairable"
    assert change.detail["over_cost_cap"] == 20_000
    assert outcome.messages[0]["tool_calls"][0]["function"]["arguments"] == "{}"
    # Past the cap, length costs nothing more: twice as wide, the same work.
    wider = "{" + '"a":1,' * 60_000 + "x"
    narrow = lines_executed(lambda: _run(_messages(WIDE)))
    wide = lines_executed(lambda: _run(_messages(wider)))
    assert wide <= narrow * 1.01, (narrow, wide)


def test_one_request_s_strings_share_a_token_budget() -> None:
    from rules.chat.invalid_tool_arguments import apply
    from rules.engine.base import WorkBudgetExceeded
    from rules.engine.json_repair_passes import MAX_REQUEST_TOKENS

    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": WIDE}}
        for i in range(MAX_REQUEST_TOKENS // 20_000 + 1)
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    with pytest.raises(WorkBudgetExceeded):
        apply([message], RULE.context())
