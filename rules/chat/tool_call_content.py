"""tool-call-content: the empty content of an assistant with tool calls, in the provider's shape.

What: an assistant with tool calls (a ``tool_calls`` list holding at least one object) whose
content is empty (absent, ``null``, ``""``, ``[]``, or a part list whose text parts are all
empty) gets the one empty shape its provider accepts, by option ``shape``:
``null`` (``"content": null``), ``empty`` (``"content": ""``) or ``omit`` (no ``content`` key).
Option ``kinds`` names the empty shapes rewritten (``absent``, ``null``, ``empty_string``,
``empty_list``, ``empty_parts``; default all of them): a profile lists only the shapes its
provider refuses, so an accepted shape reaches it as sent (DeepSeek accepts ``""`` and ``null``
there and refuses only lists). Non-empty content is never touched; assistants without tool calls
are null-content's.
Why: there is no universal value (docs/providers.md#question-6):
- ``null``: OpenAI accepts ``null`` only next to tool calls (docs/providers.md#openai-content,
  langchain-ai/langchainjs#4153); DeepSeek refuses ``content: []`` there ("invalid type: sequence,
  expected a string", docs/providers.md#deepseek-content, BerriAI/litellm#9905) and accepts ``null``
  or ``""`` (docs/providers.md#question-6, req_llm#966 withdrawn; a live table in
  ranxianglei/billion-context#719: ``null`` with ``tool_calls`` is a 200), so the deepseek profile
  rewrites only ``empty_list`` and ``empty_parts``.
- ``empty``: xAI rejects a tool-call assistant with ``null`` or no content ("Each message must
  have at least one content element.", docs/providers.md#xai-content, langchain-ai/langchain#34140,
  whose workaround is ``content: ""``; AstrBotDevs/AstrBot#6447 for ``[]``).
- ``omit``: Moonshot/Kimi reject an empty text next to tool calls ("text content is empty",
  docs/providers.md#kimi-content, MoonshotAI/kimi-cli#2621 for ``""``, MoonshotAI/kimi-cli#2035 for
  ``[{"type": "text", "text": ""}]``); kimi-cli's fix deletes the ``content`` key. No report
  shows Kimi refusing ``null`` there, so the kimi profile leaves it.
Safety: safe. Only an empty content is rewritten, into another empty shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.chat import scan
from rules.chat.message_fields import has_calls, has_content
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at
from rules.vocabulary import EMPTY_KINDS

NAME = "tool-call-content"

SHAPES = ("null", "empty", "omit")
#: How an empty content can look (``empty_kind``), the values of option ``kinds``.
KINDS = EMPTY_KINDS


#: The rule's options (the record below lists them; read them through these).
SHAPE = Option(
    "shape",
    "null",
    "the empty content of an assistant with tool calls: null (OpenAI, DeepSeek), "
    'empty ("", xAI) or omit (no key, Kimi)',
    SHAPES,
)
KINDS_OPTION = Option(
    "kinds",
    list(KINDS),
    "the empty shapes rewritten (absent, null, empty_string, empty_list, empty_parts): "
    "only those the provider refuses",
)


def empty_kind(message: dict[str, Any]) -> str:
    """How an empty content looks, for a Change: absent, null, empty_string, empty_list or
    empty_parts (text parts with no text). Call only when ``has_content`` is false."""
    if "content" not in message:
        return "absent"
    content = message["content"]
    if content is None:
        return "null"
    if content == "":
        return "empty_string"
    return "empty_list" if content == [] else "empty_parts"


def kind_set(value: Any) -> frozenset[str]:
    """The empty kinds of a ``kinds`` option (anything else in it is ignored)."""
    if not isinstance(value, list | tuple):
        return frozenset(KINDS)
    return frozenset(kind for kind in value if kind in KINDS)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    shape = SHAPE.of(ctx)
    kinds = kind_set(KINDS_OPTION.of(ctx))
    suspects = [
        index
        for index, message in enumerate(messages)
        if type(message) is dict
        and message.get("role") == "assistant"
        and not _in_shape(message, shape)
        and has_calls(message)
        and not has_content(message)
        and empty_kind(message) in kinds
    ]
    if not suspects:
        return Outcome(messages)
    changes: list[Change] = []

    def fix(index: int, message: Any) -> Any:
        was = empty_kind(message)
        if shape == "omit":
            changes.append(Change(NAME, index, "dropped_content", {"was": was}))
            return {k: v for k, v in message.items() if k != "content"}
        to = "null" if shape == "null" else "empty_string"
        changes.append(Change(NAME, index, "set_content", {"was": was, "to": to}))
        return {**message, "content": None if shape == "null" else ""}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


def _in_shape(message: dict[str, Any], shape: Any) -> bool:
    """True if the content already has the shape asked for (or the shape is unknown)."""
    if shape == "null":
        return "content" in message and message["content"] is None
    if shape == "empty":
        content = message.get("content")
        return type(content) is str and content == ""
    if shape == "omit":
        return "content" not in message
    return True  # an unvalidated shape: leave every message alone


def _wakes(options: Mapping[str, Any]) -> frozenset[str]:
    """An empty content of an assistant with calls, in one of the kinds the rule reshapes."""
    return frozenset(scan.CALL_EMPTY + kind for kind in kind_set(KINDS_OPTION.of(options)))


RULE = Rule(
    name=NAME,
    summary="Give tool-call assistants with empty content the provider's empty shape.",
    defect="the empty content of an assistant with tool calls in a shape the provider refuses "
    '(there is no universal value, docs/providers.md#question-6): Kimi "text content is empty" '
    'for `""` and an empty text part (MoonshotAI/kimi-cli#2621, #2035), xAI "Each message must '
    'have at least one content element." for `null`, absent and `[]` '
    '(langchain-ai/langchain#34140), DeepSeek "invalid type: sequence" for `[]` '
    "(BerriAI/litellm#9905)",
    repair='option `shape`: `null` (OpenAI, DeepSeek), `empty` (`""`, xAI) or `omit` (the key '
    "removed, as kimi-cli does), only for the empty kinds option `kinds` names: each profile lists "
    'just its provider\'s refusals, so DeepSeek gets `""` and `null` as sent; non-empty content '
    "is never touched. An empty content becomes another empty shape",
    safety="safe",
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.scan,
    woken_by=_wakes,
    options=(
        SHAPE,
        KINDS_OPTION,
    ),
)
