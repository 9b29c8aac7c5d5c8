"""reasoning-content: in thinking mode, every assistant tool-call turn carries its reasoning back.

What: in thinking mode (``thinking.type: enabled``, or a model that thinks by default, option
``models``), an assistant message with tool calls whose ``reasoning_content`` is absent, not a
string or ``""`` gets the reasoning the model produced for that turn back, if the proxy recalled
it (``RuleContext.given``, keyed by ``turn_key`` over the route's scope and the turn's calls);
failing that, the option ``placeholder``. A turn that already carries a non-empty string keeps
it, except a blank one (an earlier placeholder) when the real text was recalled. With option
``plain_turns``, an assistant without tool calls that sits between two user messages together
with a tool-call turn gets the placeholder too when it has no ``reasoning_content`` (absent, not a
string or ``""``): DeepSeek counts it in the tool loop (docs/providers.md, DeepSeek: hermes-agent
PR #14941, #15770, openclaw/openclaw#73417, and DeepSeek's thinking-mode guide).
Why: DeepSeek in thinking mode answers 400 "Missing `reasoning_content` field in the assistant
message at message index N" (docs/providers.md#deepseek-reasoning) and V4 "The `reasoning_content`
in the thinking mode must be passed back to the API." (docs/providers.md#deepseek-reasoning); Kimi
K2.5/K2.6 "thinking is enabled but reasoning_content is missing in assistant tool call message at
index N" (docs/providers.md#kimi-reasoning). Most clients and SDK wrappers drop the field. DeepSeek
V4 also rejects ``""`` (docs/providers.md#hermes-r9, E11, #17341): the default
placeholder is a single space; Kimi's profile uses "tool call", the placeholder cc-switch sends Kimi
targets (docs/providers.md#kimi-reasoning, farion1231/cc-switch#2365). Safety: safe when restored
(the model gets back exactly what it produced). A placeholder is unsafe in the sense that the
model's earlier reasoning is lost (it would be without chatmend, and the request would fail). The
changes name the tool-call ids and the reasoning's length, never the text. A foreign ``reasoning``
field is never promoted (hermes #15748).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final

from rules.chat import scan
from rules.engine import recall
from rules.engine.base import (
    Change,
    Option,
    Outcome,
    Rule,
    RuleContext,
    StashQuery,
    carried,
)
from rules.engine.messages import rewrite_at
from rules.engine.thinking import REASONING_FIELD, THINKING_MODELS, thinking_enabled

NAME = "reasoning-content"
FIELD: Final = REASONING_FIELD
#: DeepSeek V4 rejects ``""`` (hermes R9, #17341): one space is the smallest accepted value.
DEFAULT_PLACEHOLDER: Final = " "
#: Bumped if the key's recipe ever changes, so old stored entries simply stop matching.
_KEY_VERSION: Final = "chatmend-reasoning-1"


def tool_call_turn(message: Any) -> bool:
    """An assistant message with a non-empty ``tool_calls`` list."""
    if type(message) is not dict or message.get("role") != "assistant":
        return False
    calls = message.get("tool_calls")
    return type(calls) is list and len(calls) > 0


def lacks_reasoning(message: Any) -> bool:
    """A tool-call turn whose ``reasoning_content`` is absent, not a string or blank (a blank
    string is a placeholder the real text may replace)."""
    if not tool_call_turn(message):
        return False
    value = message.get(FIELD)
    return not (isinstance(value, str) and value.strip())


def plain_turns_in_tool_spans(messages: list[Any]) -> list[int]:
    """Indices of the assistant messages without tool calls that sit between two user messages
    (or after the last one) together with a tool-call turn: DeepSeek's thinking mode counts
    every assistant of such a span as part of the tool loop (docs/providers.md, DeepSeek)."""
    spans = tool_spans(messages, OPEN)
    assert spans is not None  # a list's start leaves nothing undecided
    return spans[0]


#: The span open at a list's start: no tool-call turn in it yet, no plain turn left undecided.
OPEN: Final = (False, 0)


def tool_spans(
    messages: list[Any], before: tuple[bool, int]
) -> tuple[list[int], tuple[bool, int]] | None:
    """``plain_turns_in_tool_spans`` of ``messages`` that follow others whose last span (after
    their last user message) ``before`` describes: whether it holds a tool-call turn, and how
    many plain turns it holds that are not found (it held none); and the same of the list then.
    ``None`` if a tool-call turn here joins that span: its plain turns are found after all."""
    found: list[int] = []
    plain: list[int] = []  # the current span's plain assistants
    calls, pending = before
    for index, message in enumerate(messages):
        if type(message) is not dict:
            continue
        role = message.get("role")
        if role == "user":
            if calls:
                found.extend(plain)
            plain, calls, pending = [], False, 0
        elif role == "assistant":
            if tool_call_turn(message):
                if pending:
                    return None
                calls = True
            else:
                plain.append(index)
    if calls:
        found.extend(plain)
    found.sort()
    return found, (calls, 0 if calls else pending + len(plain))


def turn_key(scope: str, calls: Sequence[Any]) -> str | None:
    """The stash key of a tool-call turn (``rules.engine.recall``): each call's id, function
    name and arguments. ``None`` if a call is not an object or has no string id."""
    parts: list[tuple[str, str, Any]] = []
    for call in calls:
        if type(call) is not dict:
            return None
        cid = call.get("id")
        if type(cid) is not str or not cid:
            return None
        function = call.get("function")
        function = function if type(function) is dict else {}
        name = function.get("name")
        parts.append((cid, name if type(name) is str else "", function.get("arguments")))
    return recall.turn_key(_KEY_VERSION, scope, parts)


def thinking(request: Mapping[str, Any], ctx: RuleContext) -> bool:
    """The request runs in thinking mode: the rule serves it, and its response holds reasoning
    worth keeping."""
    return thinking_enabled(request, MODELS.of(ctx))


def wanted_keys(
    request: Mapping[str, Any], ctx: RuleContext, scope: str, start: int = 0
) -> list[str]:
    """The keys the rule would look up in this request (its messages from ``start`` on):
    those of the tool-call turns lacking reasoning, in thinking mode (the proxy fetches them
    before the rules run)."""
    messages = request.get("messages")
    if type(messages) is not list or not thinking(request, ctx):
        return []
    keys: list[str] = []
    for message in islice(messages, start, None):
        if lacks_reasoning(message):
            key = turn_key(scope, message["tool_calls"])
            if key is not None:
                keys.append(key)
    return keys


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    resumed = resume(messages, ctx, None)
    assert resumed is not None  # from the list's start, nothing before can change
    return resumed[0]


def resume(
    messages: list[Any], ctx: RuleContext, before: tuple[bool, int] | None
) -> tuple[Outcome, tuple[bool, int]] | None:
    """The rule over ``messages`` that follow others whose last tool span ``before`` describes
    (``tool_spans``; ``None``: the list's start), and the same of the list after them: a
    tool-call turn is decided by itself, a plain turn (``plain_turns``) when its span ends
    (``Horizon``, rules/engine/resume.py). ``None`` if the plain turns before change."""
    state = OPEN if before is None else before
    if not thinking(ctx.request, ctx):
        return Outcome(messages), state
    found = [index for index, message in enumerate(messages) if lacks_reasoning(message)]
    if PLAIN_TURNS.of(ctx) is True:
        spans = tool_spans(messages, state)
        if spans is None:
            return None
        plain = [i for i in spans[0] if _no_reasoning(messages[i])]
        found, state = sorted(found + plain) if plain else found, spans[1]
    if not found:
        return Outcome(messages), state  # the common case: every turn carries its reasoning
    placeholder = _placeholder(ctx)
    changes: list[Change] = []

    def fix(index: int, message: dict[str, Any]) -> dict[str, Any]:
        if not tool_call_turn(message):  # a plain turn of a tool loop: no stash key, no calls
            changes.append(Change(NAME, index, "inserted_placeholder", {"tool_call_ids": []}))
            return {**message, FIELD: placeholder}
        calls = message["tool_calls"]
        ids = [call.get("id") if type(call) is dict else None for call in calls]
        recalled = ctx.given.recalled
        key = turn_key(ctx.given.scope, calls) if recalled else None
        text = recalled.get(key) if key is not None else None
        if isinstance(text, str) and text.strip():
            changes.append(
                Change(
                    NAME, index, "restored_reasoning", {"tool_call_ids": ids, "length": len(text)}
                )
            )
            return {**message, FIELD: text}
        current = message.get(FIELD)
        if isinstance(current, str) and current:
            return message  # a blank placeholder already: nothing better is known
        changes.append(Change(NAME, index, "inserted_placeholder", {"tool_call_ids": ids}))
        return {**message, FIELD: placeholder}

    out = rewrite_at(messages, found, fix)
    return Outcome(out, tuple(changes)), state


def _no_reasoning(message: dict[str, Any]) -> bool:
    """``reasoning_content`` absent, not a string or ``""`` (a blank one is accepted)."""
    value = message.get(FIELD)
    return not (isinstance(value, str) and value)


def _placeholder(ctx: RuleContext) -> str:
    value = PLACEHOLDER.of(ctx)
    return value if isinstance(value, str) and value else DEFAULT_PLACEHOLDER


@dataclass(frozen=True, slots=True)
class PlaceholderOption(Option[str]):
    """A placeholder must be a non-empty string: DeepSeek V4 rejects ``""`` (hermes R9)."""

    def validate(self, value: Any) -> str | None:
        if not isinstance(value, str):
            return f"must be of type str, got {type(value).__name__}"
        if not value:
            return 'must not be empty (DeepSeek V4 rejects ""; " " is the smallest accepted)'
        return None


#: The rule's options (the record below lists them; read them through these).
PLACEHOLDER = PlaceholderOption(
    "placeholder",
    DEFAULT_PLACEHOLDER,
    'What a turn gets when its reasoning is unknown (never ""; DeepSeek V4 rejects it).',
)
MODELS = Option(
    "models",
    list(THINKING_MODELS),
    "Model-name patterns that think unless the request sets thinking.type: disabled.",
)
PLAIN_TURNS = Option(
    "plain_turns",
    False,
    "Also give the placeholder to an assistant without tool calls that sits between two "
    "user messages with a tool-call turn (DeepSeek: "
    "docs/providers.md#deepseek-plain-turns).",
)


RULE = Rule(
    name=NAME,
    summary="In thinking mode, give tool-call turns their reasoning_content back.",
    defect="in thinking mode (`thinking.type: enabled`, or a model matching option `models` "
    "without `thinking.type: disabled`), an assistant tool-call turn without `reasoning_content`, "
    'or with `""` or a non-string: DeepSeek "Missing `reasoning_content` field in the assistant '
    'message at message index N" (hotovo/aider-desk#529) and V4 "The `reasoning_content` in the '
    'thinking mode must be passed back to the API." (anomalyco/opencode#24083), Kimi "thinking '
    'is enabled but reasoning_content is missing in assistant tool call message at index N" '
    "(iOfficeAI/AionUi#2746; docs/providers.md#deepseek-reasoning, "
    "docs/providers.md#kimi-reasoning)",
    repair="the reasoning the model produced for that turn, recalled by the proxy from the "
    "responses it relayed (the reasoning stash, keyed by the turn's tool calls; a blank earlier "
    'placeholder is upgraded too), else option `placeholder` (never `""`: DeepSeek V4 rejects '
    "it); a foreign `reasoning` field is never promoted; with option `plain_turns`, an assistant "
    "without tool calls that sits between two user messages together with a tool-call turn gets "
    "the placeholder too (docs/providers.md#deepseek-plain-turns); the log names the tool-call ids "
    "and the length, never the text. Restored text is the model's own; a placeholder loses only "
    "what the client had already dropped",
    safety={
        "restored_reasoning": "unsafe",
        "inserted_placeholder": "unsafe",
    },
    default=False,
    apply=apply,
    # Each tool-call turn is decided by itself and the request's thinking mode; a plain turn
    # (``plain_turns``) by the tool span around it: then the rule runs whole.
    # A tool-call turn is decided by itself and the request's thinking mode, a plain turn
    # (``plain_turns``) once its span ends: what is carried is the last span's state.
    horizon=carried(resume),
    options=(
        PLACEHOLDER,
        MODELS,
        PLAIN_TURNS,
    ),
    reads_request=True,
    recall=StashQuery(serves=thinking, keys=wanted_keys),
    # It only sets a ``reasoning_content`` string, a key the walk reads as plain: the walk's
    # signals still hold for the rules after it (they need not run their own prescans).
    scan=scan.scan,
    introduces=frozenset(),
)
