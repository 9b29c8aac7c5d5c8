"""Fix safety: every rule's declared class (``Rule.safety``) is what its changes do.

The oracle is written here, from the three classes' definitions (rules/engine/base.py), never
from a rule's own predicates:

- whatever a change's class, unless it is ``lossy``, every piece of the conversation the client
  sent reaches the output: each text (a message's content, a part, a tool result, a thinking
  block or part; whitespace aside), each image, each tool call's arguments (as the object meant,
  or for unreadable arguments, every word of them but the spelling of a literal); reasoning
  replayed in a message field (``reasoning_content``) is a field, not the conversation; the
  request's ``system`` and ``instructions`` are the conversation too (a repair may move text
  between them and the list);
- a ``safe`` change also keeps every tool name and writes no words of its own: each text of the
  output, once every text of the input is taken out of it, holds no letter or digit.

Run over every fixture case of every rule (each fail case cites a real report) and over
generated agent histories for all three APIs, each rule alone, with its defaults and each
option value that changes what it does. A change whose action a rule does not declare fails
(``Rule.safety_of`` counts it ``lossy``, but the declaration must say so), and a declared action
no fixture exercises fails too: a declaration is not kept for what a rule no longer does.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.chat import RULES
from rules.engine.base import SAFETY_CLASSES, Change, Rule, worst
from rules.messages import MESSAGES_RULES
from rules.responses import RESPONSES_RULES
from tests import anthropic_strategies
from tests.budget import examples
from tests.rules.fixtures import (
    FIXTURE_DIR,
    MESSAGES_FIXTURE_DIR,
    RESPONSES_FIXTURE_DIR,
    Case,
    given_for,
    load_cases,
)
from tests.strategies import broken_transcripts

REGISTRIES: Mapping[str, tuple[Rule, ...]] = {
    "chat": RULES,
    "responses": RESPONSES_RULES,
    "messages": MESSAGES_RULES,
}
FOLDERS = {
    "chat": FIXTURE_DIR,
    "responses": RESPONSES_FIXTURE_DIR,
    "messages": MESSAGES_FIXTURE_DIR,
}
FIELD = {"chat": "messages", "responses": "input", "messages": "messages"}
ALL_RULES = [(api, rule) for api, rules in REGISTRIES.items() for rule in rules]

# --- what the client wrote -----------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
#: Words that only spell a literal (Python's ``True``, JSON's ``true``, ``NaN``) or a code
#: fence's language: a repair that reads them as JSON changes their spelling, not the value.
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_CUT_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?$")
_LITERALS = frozenset({"true", "false", "none", "null", "nan", "infinity", "json"})


def _clean(text: str) -> str:
    """A text as a safe coercion may leave it: lone surrogates become U+FFFD, whitespace runs
    one space."""
    return _SPACE.sub(" ", _SURROGATE.sub("\ufffd", text)).strip()


@dataclass
class Pieces:
    """The conversation a list holds, read as the client wrote it."""

    texts: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    #: Tool arguments: the object meant (parsed), or the raw text when it does not parse.
    arguments: list[Any] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def _parsed(raw: Any) -> Any:
    """Arguments as the object the client meant: JSON, else a Python literal (an agent that
    wrote ``repr``), else the text itself."""
    if isinstance(raw, str):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
        try:
            return _paired(ast.literal_eval(raw))
        except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError):
            return raw
    return raw


def _paired(value: Any) -> Any:
    """A Python literal's strings as JSON reads them: ``"\\ud800\\udc00"`` is one character
    there (a surrogate pair's escapes), two lone surrogates in Python (JSON text with a trailing
    comma reads as a literal here, and the rule repairs it as the JSON it is)."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if isinstance(value, list):
        return [_paired(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_paired(item) for item in value)
    if isinstance(value, dict):
        return {_paired(key): _paired(item) for key, item in value.items()}
    if isinstance(value, set):
        return {_paired(item) for item in value}
    return value


def _content(content: Any, into: Pieces) -> None:
    """Texts and images of a content value: a string, parts or blocks, nested results."""
    if isinstance(content, str):
        into.texts.append(content)
        return
    if isinstance(content, dict):  # a bare part, as some clients send one
        content = [content]
    if not isinstance(content, list):
        return
    for part in content:
        if isinstance(part, str):
            into.texts.append(part)
        if not isinstance(part, dict):
            continue
        for key in ("text", "thinking", "refusal"):
            if isinstance(part.get(key), str):
                into.texts.append(part[key])
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if isinstance(url, str):
            into.images.append(url)
        source = part.get("source")
        if isinstance(source, dict):
            for key in ("data", "url"):
                if isinstance(source.get(key), str):
                    into.images.append(source[key])
        kind = part.get("type")
        if kind == "tool_result":
            _content(part.get("content"), into)
        elif kind == "tool_use":
            # An input sent as JSON text means the object it spells, as a chat call's
            # arguments do (messages-tool-input reads it so, and calls that safe).
            into.arguments.append(_parsed(part.get("input")))
            if isinstance(part.get("name"), str):
                into.names.append(part["name"])
        _content(part.get("summary"), into)


def pieces(items: Sequence[Any]) -> Pieces:
    """What a list of any API holds (chat messages, Responses items, Messages messages)."""
    found = Pieces()
    for item in items:
        if isinstance(item, str):
            found.texts.append(item)
        if not isinstance(item, dict):
            continue
        _content(item.get("content"), found)
        _content(item.get("output"), found)
        calls = item.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                found.arguments.append(_parsed(function.get("arguments")))
                if isinstance(function.get("name"), str):
                    found.names.append(function["name"])
        if item.get("type") in ("function_call", "custom_tool_call"):
            found.arguments.append(_parsed(item.get("arguments", item.get("input"))))
            if isinstance(item.get("name"), str):
                found.names.append(item["name"])
    found.texts = [_clean(text) for text in found.texts if text.strip()]
    return found


def strings(value: Any) -> Iterator[str]:
    """Every string anywhere in ``value``, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)


def _argument_kept(argument: Any, outputs: list[Any], corpus: str) -> bool:
    if argument in outputs:
        return True
    if isinstance(argument, str):  # unreadable arguments: every word of them is still sent
        # (an escape cut off at the end, ``\\u0``, is no character yet)
        complete = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), _CUT_ESCAPE.sub("", argument))
        words = {word.lower() for word in _WORD.findall(complete)} - _LITERALS
        lowered = corpus.lower()
        return all(word in lowered for word in words)
    return False


def lost(before: Sequence[Any], after: Sequence[Any]) -> list[str]:
    """The pieces of ``before`` that ``after`` does not carry (``unsafe`` and ``safe`` keep all)."""
    was, now = pieces(before), pieces(after)
    corpus = "\0".join(_clean(text) for text in strings(list(after)))
    missing = [f"text {t[:30]!r}" for t in was.texts if t not in corpus]
    missing += [f"image {i[:30]!r}" for i in was.images if i not in corpus]
    missing += [
        f"arguments {a!r}"[:60]
        for a in was.arguments
        if a is not None and not _argument_kept(a, now.arguments, corpus)
    ]
    return missing


def added_words(before: Sequence[Any], after: Sequence[Any]) -> list[str]:
    """Texts of ``after`` that hold words none of ``before``'s texts had, and tool names it lost
    (a ``safe`` change does neither)."""
    was, now = pieces(before), pieces(after)
    known = sorted(set(was.texts), key=len, reverse=True)
    extra = []
    for text in now.texts:
        rest = text
        for original in known:
            rest = rest.replace(original, "")
        if re.sub(r"[\W_]+", "", rest):
            extra.append(f"new words in {text[:40]!r}")
    extra += [f"tool name {n!r} gone" for n in set(was.names) - set(now.names) if n]
    return extra


def judge(rule: Rule, changes: Sequence[Change], before: list[Any], after: list[Any]) -> None:
    """The rule's changes against its declaration: each action declared, and the run as its
    worst change's class allows."""
    if not isinstance(rule.safety, str):
        undeclared = {c.action for c in changes} - set(rule.safety)
        assert not undeclared, f"{rule.name}: actions not in its safety declaration: {undeclared}"
    kind = worst(rule.safety_of(change.action) for change in changes)
    if kind == "lossy":
        return
    assert lost(before, after) == [], (rule.name, kind, [c.action for c in changes])
    if kind == "safe":
        assert added_words(before, after) == [], (rule.name, [c.action for c in changes])


# --- the declarations ---------------------------------------------------------------------------


@pytest.mark.parametrize(("api", "rule"), ALL_RULES, ids=[r.name for _, r in ALL_RULES])
def test_every_rule_declares_its_class_in_the_vocabulary(api: str, rule: Rule) -> None:
    declared = [rule.safety] if isinstance(rule.safety, str) else list(rule.safety.values())
    assert declared and set(declared) <= set(SAFETY_CLASSES)
    assert rule.worst in SAFETY_CLASSES and rule.classes
    if not isinstance(rule.safety, str):
        assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", action) for action in rule.safety)


#: Request fields that hold conversation text outside the list (a repair may move text there).
TEXT_FIELDS = ("system", "instructions")


def conversation(items: list[Any], request: Mapping[str, Any] | None) -> list[Any]:
    """The list with the request's text fields as messages of their own: what the client
    wrote, wherever a repair puts it."""
    fields = request or {}
    return [*items, *({"content": fields[key]} for key in TEXT_FIELDS if key in fields)]


def _run(case: Case, rule: Rule, api: str) -> tuple[list[Any], list[Any], tuple[Change, ...]]:
    """The case's conversation before and after the rule, and its changes."""
    ctx = rule.context(case.options)
    if rule.reads_request:
        ctx = replace(ctx, request={**(case.request or {}), FIELD[api]: case.input})
    ctx = replace(ctx, given=given_for(case, rule, ctx, FIELD[api]))
    outcome = rule.apply(case.input, ctx)
    request = outcome.request if outcome.request is not None else case.request
    before = conversation(case.input, case.request)
    return before, conversation(outcome.messages, request), outcome.changes


CASES = [
    (api, case)
    for api, folder in FOLDERS.items()
    for case in load_cases(folder)
    if case.expected is not None
]


@pytest.mark.parametrize(("api", "case"), CASES, ids=[case.id for _, case in CASES])
def test_each_fixture_case_keeps_what_its_rule_s_class_promises(api: str, case: Case) -> None:
    rule = next(rule for rule in REGISTRIES[api] if rule.name == case.rule)
    before, after, changes = _run(case, rule, api)
    judge(rule, changes, before, after)


def test_every_declared_action_is_one_a_fixture_exercises() -> None:
    """A declaration lists what the rule does: each action it names happens in a fixture case
    (real reports), so none is kept for a behaviour the rule no longer has."""
    seen: dict[str, set[str]] = {}
    for api, case in CASES:
        rule = next(rule for rule in REGISTRIES[api] if rule.name == case.rule)
        _, _, changes = _run(case, rule, api)
        seen.setdefault(rule.name, set()).update(change.action for change in changes)
    stale = {
        rule.name: sorted(set(rule.safety) - seen.get(rule.name, set()))
        for _, rule in ALL_RULES
        if not isinstance(rule.safety, str) and set(rule.safety) - seen.get(rule.name, set())
    }
    assert stale == {}


# --- generated histories: each rule alone --------------------------------------------------------

#: Option values that change what a rule does (the defaults run too).
VARIANTS: Mapping[str, tuple[Mapping[str, Any], ...]] = {
    "tool-call-ids": ({"format": "mistral9"}, {"format": "anthropic"}, {"format": "max40"}),
    "image-parts": ({"action": "relocate"},),
    "trailing-assistant": ({"action": "prefix"}, {"action": "drop"}),
    "thinking-parts": ({"action": "reasoning_content"},),
    "system-messages": ({"later": "user"},),
    "invalid-tool-arguments": ({"truncated": "empty"},),
    "tool-call-content": ({"shape": "empty"}, {"shape": "omit"}),
    "text-part-arrays": ({"lists": True, "min_parts": 1},),
    "unknown-roles": ({"roles": ["user", "assistant"]},),
    "messages-unsigned-thinking": ({"signatures": "anthropic"},),
}

PROPERTIES = settings(
    max_examples=examples(0.3),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _each_rule_alone(api: str, items: list[Any], request: dict[str, Any]) -> None:
    for rule in REGISTRIES[api]:
        for options in ({}, *VARIANTS.get(rule.name, ())):
            ctx = rule.context(options)
            if rule.reads_request:
                ctx = replace(ctx, request={**request, FIELD[api]: items})
            outcome = rule.apply(items, ctx)
            judge(rule, outcome.changes, items, outcome.messages)


SIDE_SHAPES = st.sampled_from(
    [
        {"role": "developer", "content": "Be brief."},
        {"role": "ipython", "content": "42"},
        {"role": "system", "content": "Later rules."},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}, "said"]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {"role": "assistant", "content": "A final word."},
        {"role": "tool", "tool_call_id": "call_gone", "content": "stray result"},
        {"role": "user", "content": None},
    ]
)


@pytest.mark.slow
@PROPERTIES
@given(broken=broken_transcripts(), extra=st.lists(SIDE_SHAPES, max_size=3), at=st.integers(0, 20))
def test_chat_rules_keep_what_their_class_promises(broken: Any, extra: list[Any], at: int) -> None:
    messages = list(broken.messages)
    for shape in extra:
        messages.insert(min(at, len(messages)), shape)
    request = {
        "model": "deepseek-v4-flash",
        "tools": [{"type": "function", "function": {"name": "ls"}}],
        "tool_choice": "required",
        "temperature": 0.2,
    }
    _each_rule_alone("chat", messages, request)


@pytest.mark.slow
@PROPERTIES
@given(request=anthropic_strategies.requests())
def test_messages_rules_keep_what_their_class_promises(request: dict[str, Any]) -> None:
    _each_rule_alone("messages", request["messages"], request)


CALL_IDS = st.sampled_from(["call_1", "call_2", "", " ", "x" * 80])


@st.composite
def responses_inputs(draw: st.DrawFn) -> list[Any]:
    """A Responses ``input``: user and assistant messages, calls and outputs (ids reused,
    empty, too long; outputs missing, early, orphaned), reasoning items, invalid arguments."""
    items: list[Any] = []
    for number in range(draw(st.integers(1, 4))):
        items.append({"role": "user", "content": f"user {number}"})
        if draw(st.booleans()):
            items.append({"type": "reasoning", "id": f"rs_{number}", "summary": []})
        calls = []
        for n in range(draw(st.integers(0, 2))):
            call_id = draw(CALL_IDS)
            arguments = draw(st.sampled_from(['{"path": "a"}', "{'path': 'b'}", '{"path": "c', ""]))
            calls.append(
                {"type": "function_call", "call_id": call_id, "name": "ls", "arguments": arguments}
            )
            items.append(calls[-1])
            if draw(st.booleans()):
                items.append({"role": "assistant", "content": f"between {number}.{n}"})
        for n, call in enumerate(calls):
            fate = draw(st.sampled_from(["answered", "missing", "orphan"]))
            if fate == "answered":
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": call["call_id"],
                        "output": f"out {number}.{n}",
                    }
                )
            elif fate == "orphan":
                items.append(
                    {"type": "function_call_output", "call_id": "nobody", "output": f"lost {n}"}
                )
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{number}",
                "content": [{"type": "output_text", "text": f"said {number}"}],
            }
        )
    return draw(st.permutations(items)) if draw(st.integers(0, 4)) == 0 else items


@pytest.mark.slow
@PROPERTIES
@given(items=responses_inputs())
def test_responses_rules_keep_what_their_class_promises(items: list[Any]) -> None:
    _each_rule_alone("responses", items, {"model": "gpt-5.6", "context_management": {"x": 1}})
