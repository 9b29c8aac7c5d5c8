"""trailing-assistant: a request does not end on a plain assistant message.

What: when the last entry of ``messages`` is an assistant message without tool calls (its
``tool_calls`` is not a non-empty list), option ``action`` says what happens:
- ``continue`` (default): a user message with option ``content`` (default "Continue.") is
  appended after it.
- ``prefix``: ``"prefix": true`` is set on it, asking for a prefix completion (Mistral, DeepSeek
  beta). A request made of that one message gets ``continue`` instead: prefix completion needs a
  conversation before the prefix (Mistral: "Conversation must start with a user message or system
  message" for a single assistant message).
- ``drop``: it is removed, with every plain assistant right before it (two in a row would leave
  the next one trailing); each removal is logged with its index and content length (characters
  of a string, of the JSON text otherwise), the text only with ``log_content``. A request made
  only of such messages gets ``continue`` instead: removing all of them leaves no conversation
  ("Conversation must have at least one message", mistral-common).
An assistant that already carries ``"prefix": true`` is an explicit prefill request and is left
alone under every action, unless option ``prefix_allowed`` is false (a provider with no prefix
completion, e.g. llama.cpp, prefills any trailing assistant: the key changes nothing there) or it
is the only message. When such a message does get a user message after it, its ``prefix`` key
is removed: Mistral rejects a prefix assistant that is not last ("Assistant message with prefix
True must be last message", mistral-common ``validator.py``). Under ``prefix``, ``prefix_allowed``
is taken as true. A trailing assistant WITH tool calls is left to the pairing rules (its calls
are unanswered: unanswered-tool-calls adds their results), and a trailing tool message is fine.
Only the last entry is looked at: a list ending on a non-message is the request schema's
rejection, not this one.
Why: Mistral answers 400 "Expected last role User or Tool (or Assistant with prefix True) for
serving but got assistant" (docs/providers.md#mistral-roles, NEKOparapa/AiNiee#641,
QuantumNous/new-api#2858, 0xPlaygrounds/rig#1130); deepseek-reasoner "The last message of
deepseek-reasoner must be a user message, or an assistant message with prefix mode on (...)"
(docs/providers.md#deepseek-roles, BerriAI/litellm#8090, huggingface/smolagents#430); llama.cpp with
thinking on "Assistant response prefill is incompatible with enable_thinking."
(docs/providers.md#chat-templates-roles, ggml-org/llama.cpp#20861, #21889); Claude 4.6+ "This model
does not support assistant message prefill." (docs/providers.md#anthropic-roles). Appending
"Continue." is what vscode-unify-chat-provider#250 does for the last one: the assistant's turn stays
in the context. Safety: safe with ``continue`` (the default) and ``prefix``: nothing is removed, the
model is asked to go on (a new user turn, or a completion of the assistant's text). ``drop`` is
unsafe: the assistant's text no longer reaches the model (its index and length are logged).
"""

from __future__ import annotations

from typing import Any

import orjson

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, TextOption, carried
from rules.engine.messages import dropped_content

NAME = "trailing-assistant"

ACTIONS = ("continue", "prefix", "drop")
#: The continuation vscode-unify-chat-provider#250 appends (docs/providers.md#roles).
DEFAULT_CONTENT = "Continue."


#: The rule's options (the record below lists them; read them through these).
ACTION = Option(
    "action",
    "continue",
    "continue: append a user message; prefix: set prefix: true on the assistant (falls "
    "back to continue for a lone assistant); drop: remove it (unsafe; falls back to "
    "continue when nothing would remain)",
    ACTIONS,
)
CONTENT = TextOption(
    "content",
    DEFAULT_CONTENT,
    "the appended user message's text (action continue): fixed, so the same request "
    "always gives the same bytes; never empty",
)
PREFIX_ALLOWED = Option(
    "prefix_allowed",
    True,
    "false for a provider without prefix completion (llama.cpp): an assistant's "
    "prefix: true then does not keep it trailing",
)


def is_plain_assistant(message: Any) -> bool:
    """An assistant message whose ``tool_calls`` is not a non-empty list."""
    if type(message) is not dict or message.get("role") != "assistant":
        return False
    calls = message.get("tool_calls")
    return not (type(calls) is list and calls)


def ends_open(messages: list[Any], prefix_allowed: bool, end: int | None = None) -> bool:
    """True if ``messages[:end]`` (default: all) ends on a plain assistant that the provider
    would not serve: one without ``"prefix": true``, or with it where the provider has no prefix
    completion (``prefix_allowed`` false) or where it is the only message."""
    end = len(messages) if end is None else end
    if end == 0:
        return False
    last = messages[end - 1]
    if not is_plain_assistant(last):
        return False
    return not (prefix_allowed and end > 1 and last.get("prefix") is True)


def resume(
    messages: list[Any], ctx: RuleContext, acted: bool | None
) -> tuple[Outcome, bool] | None:
    """The rule over ``messages`` after others, ``acted`` if it changed the end of those
    (``None``: the list's start); and the same after them. It reads the end of the list only:
    a list that goes on is decided anew, and one that ends on anything but a plain assistant
    needs nothing; else ``None`` (``Horizon``, rules/engine/resume.py)."""
    if acted is None:
        outcome = apply(messages, ctx)
        return outcome, bool(outcome.changes)
    if not messages:
        return Outcome(messages), acted
    if acted or is_plain_assistant(messages[-1]):
        return None
    return Outcome(messages), False


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if not messages or not is_plain_assistant(messages[-1]):
        return Outcome(messages)  # the common case: a request ending on a user or tool message
    action = ACTION.of(ctx)
    prefix_allowed = action == "prefix" or PREFIX_ALLOWED.of(ctx) is not False
    if not ends_open(messages, prefix_allowed):
        return Outcome(messages)
    last = len(messages) - 1
    if action == "prefix" and last > 0:
        detail = {"was": _describe(messages[last].get("prefix", _ABSENT))}
        change = Change(NAME, last, "set_prefix", detail)
        return Outcome([*messages[:last], {**messages[last], "prefix": True}], (change,))
    if action == "drop":
        start = last
        while start > 0 and ends_open(messages, prefix_allowed, start):
            start -= 1
        if start > 0:  # else nothing would remain: continue instead
            changes = tuple(
                Change(NAME, index, "removed_message", _removed(messages[index], ctx))
                for index in range(start, len(messages))
            )
            return Outcome(messages[:start], changes)
    return _continue(messages, ctx)


def _continue(messages: list[Any], ctx: RuleContext) -> Outcome:
    last = len(messages) - 1
    content = CONTENT.of(ctx)
    out = list(messages)
    changes: list[Change] = []
    if out[last].get("prefix") is True:  # no longer last: Mistral rejects a prefix before others
        out[last] = {k: v for k, v in out[last].items() if k != "prefix"}
        changes.append(Change(NAME, last, "dropped_fields", {"fields": ["prefix"]}))
    out.append({"role": "user", "content": content})
    changes.append(Change(NAME, len(messages), "inserted_message", {"role": "user"}))
    return Outcome(out, tuple(changes))


class _Absent:
    pass


_ABSENT = _Absent()


def _describe(value: Any) -> str:
    """The previous ``prefix`` value, by kind only."""
    if value is _ABSENT:
        return "absent"
    if value is None or type(value) is bool:
        return orjson.dumps(value).decode()
    return type(value).__name__


def _removed(message: dict[str, Any], ctx: RuleContext) -> dict[str, Any]:
    return {"reason": "trailing_assistant", **dropped_content(message.get("content"), ctx)}


RULE = Rule(
    name=NAME,
    summary="Do not end a request on an assistant message without tool calls.",
    defect='the last message is an assistant without tool calls: Mistral "Expected last role User '
    'or Tool (or Assistant with prefix True) for serving but got assistant" '
    '(NEKOparapa/AiNiee#641), deepseek-reasoner "The last message of deepseek-reasoner must be a '
    'user message, or an assistant message with prefix mode on" (BerriAI/litellm#8090), llama.cpp '
    '"Assistant response prefill is incompatible with enable_thinking." '
    "(ggml-org/llama.cpp#20861; docs/providers.md#mistral-roles)",
    repair="option `action`: `continue` appends a user message with option `content`; `prefix` "
    'sets `"prefix": true` on the assistant (Mistral, DeepSeek beta; a lone assistant gets '
    "`continue`); `drop` removes the trailing plain assistants (never all messages); one sent with "
    "`prefix: true` is kept unless option `prefix_allowed` is false (llama.cpp). Safe with "
    "`continue` and `prefix`; `drop` loses the text (index and length logged)",
    safety={
        "inserted_message": "unsafe",
        "set_prefix": "unsafe",
        "dropped_fields": "unsafe",
        "removed_message": "lossy",
    },
    default=False,
    apply=apply,
    horizon=carried(resume),  # reads the end of the list only
    options=(
        ACTION,
        CONTENT,
        PREFIX_ALLOWED,
    ),
)
