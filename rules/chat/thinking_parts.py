"""thinking-parts: Anthropic ``thinking`` parts leave an assistant's chat content.

What: in an assistant message whose ``content`` is a list, every ``{"type": "thinking", ...}``
and ``{"type": "redacted_thinking", ...}`` part is removed; the other parts stay, in order (a
text-only list left behind is ``text-part-arrays``' to collapse; nothing left becomes ``null``
next to tool calls and ``""`` elsewhere, which ``empty-tool-calls`` then removes, as it removes
any reasoning-only turn). With option ``action: reasoning_content`` the thinking texts (joined
by a blank line) become the turn's ``reasoning_content``: set where it is absent, ``null`` or
blank; kept as it is where it already holds that text; otherwise the two are joined, the
existing text first. With ``action: drop`` (the default), and for a turn left with nothing to
say, or whose ``reasoning_content`` is not a string, the thinking is dropped. Every drop is a
Change with the number of parts and the thinking's length (the text only with
``log_content``); ``redacted_thinking`` (Anthropic's encrypted ``data``, readable by Anthropic
alone) is always dropped, with its count and length.
Why: a history carried over from a Claude session holds Anthropic content blocks, and OpenAI-
style providers refuse the part: DeepSeek reads content as a string only ("invalid type:
sequence, expected a string", docs/providers.md#deepseek-content, moeru-ai/airi#1222), OpenAI
refuses an unknown part type ("Invalid value: 'image'. Supported values are: 'text' and
'image_url'.", docs/providers.md#openai-content, aallam/openai-kotlin#320), xAI wants "a single
`text` element per message" (docs/providers.md#xai-content, nocmt/LLMSearchPlus#2), and Ollama Cloud
answers "invalid message format" for ``{"type": "thinking"}`` parts ("Strip non-standard part
types", docs/providers.md#ollama-content, OpenCoworkAI/open-cowork#254). DeepSeek and Kimi read the
same reasoning as ``reasoning_content`` in thinking mode (docs/providers.md#deepseek-reasoning), so
their profiles move it there instead of losing it; a signed Anthropic block means nothing to another
issuer (docs/providers.md#anthropic-reasoning "Anthropic: thinking signature", the signature is not
kept). Hermes drops thinking-only turns outright (docs/providers.md#hermes-r23,
#16959). Safety: unsafe with ``drop`` (the earlier reasoning no longer reaches the model; length
logged); ``reasoning_content`` keeps the text, in the field those providers read.
"""

from __future__ import annotations

from typing import Any, Final

from rules.chat import scan
from rules.chat.message_fields import has_calls, has_content
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import content_length, rewrite_at
from rules.engine.thinking import REASONING_FIELD as FIELD
from rules.vocabulary import REDACTED_THINKING_PART, THINKING_PART

NAME = "thinking-parts"

THINKING: Final = THINKING_PART
REDACTED: Final = REDACTED_THINKING_PART
#: What joins two thinking texts (several blocks, or a block and an existing reasoning).
SEPARATOR: Final = "\n\n"


#: The rule's options (the record below lists them; read them through these).
ACTION = Option(
    "action",
    "drop",
    "drop the thinking (logged with its length), or move it to reasoning_content",
    choices=("drop", "reasoning_content"),
)


def has_thinking(content: Any) -> bool:
    """True if ``content`` is a list holding a thinking or redacted_thinking part."""
    if type(content) is not list:
        return False
    for part in content:  # noqa: SIM110 - a plain loop: no generator per message
        if type(part) is dict and part.get("type") in (THINKING, REDACTED):
            return True
    return False


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    suspects = [
        index
        for index, message in enumerate(messages)
        if type(message) is dict
        and type(message.get("content")) is list
        and message.get("role") == "assistant"
        and has_thinking(message["content"])
    ]
    if not suspects:
        return Outcome(messages)  # the common case: no Anthropic block in chat content
    move = ACTION.of(ctx) == "reasoning_content"
    changes: list[Change] = []
    out = rewrite_at(
        messages, suspects, lambda index, message: _fix(index, message, move, ctx, changes)
    )
    return Outcome(out, tuple(changes))


class _Parts:
    """A content list read once: the parts kept, the thinking texts, and what is counted."""

    def __init__(self, content: list[Any]) -> None:
        self.kept: list[Any] = []
        self.texts: list[str] = []
        self.thinking = 0  # thinking parts
        self.lost = 0  # characters of thinking parts whose `thinking` is no string
        self.redacted = 0
        self.redacted_length = 0
        for part in content:
            kind = part.get("type") if type(part) is dict else None
            if kind == THINKING:
                self.thinking += 1
                text = part.get(THINKING)
                if type(text) is not str:
                    self.lost += content_length(text)
                elif text:
                    self.texts.append(text)
            elif kind == REDACTED:
                self.redacted += 1
                self.redacted_length += content_length(part.get("data"))
            else:
                self.kept.append(part)


def _fix(
    index: int, message: dict[str, Any], move: bool, ctx: RuleContext, changes: list[Change]
) -> dict[str, Any]:
    parts = _Parts(message["content"])
    kept, texts, thinking, lost = parts.kept, parts.texts, parts.thinking, parts.lost
    redacted, redacted_length = parts.redacted, parts.redacted_length
    fixed: dict[str, Any] = {**message}
    if kept:
        fixed["content"] = kept
    else:
        fixed["content"] = None if has_calls(message) else ""
    if redacted:
        hidden = {"parts": redacted, "length": redacted_length}
        changes.append(Change(NAME, index, "dropped_redacted_thinking", hidden))
    if not thinking:
        return fixed
    text = SEPARATOR.join(texts)
    length = len(text) + lost
    detail: dict[str, Any] = {"parts": thinking, "length": length}
    current = message.get(FIELD)
    if not move or not text or not (has_calls(fixed) or has_content(fixed)):
        if move and text:
            detail["reason"] = "nothing_left_to_say"  # the turn goes (empty-tool-calls)
        if ctx.log_content:
            detail["content"] = text
        changes.append(Change(NAME, index, "dropped_thinking", detail))
        return fixed
    if current is None or (type(current) is str and not current.strip()):
        fixed[FIELD] = text
    elif type(current) is not str:
        detail["reason"] = "reasoning_content_not_string"
        if ctx.log_content:
            detail["content"] = text
        changes.append(Change(NAME, index, "dropped_thinking", detail))
        return fixed
    elif text in current:
        detail["already_present"] = True
    else:
        fixed[FIELD] = current + SEPARATOR + text
        detail["joined"] = True
    if lost:
        detail["lost_length"] = lost
    changes.append(Change(NAME, index, "moved_thinking", detail))
    return fixed


RULE = Rule(
    name=NAME,
    summary="Move Anthropic thinking parts out of assistant content (reasoning_content, or drop).",
    defect="Anthropic `thinking` / `redacted_thinking` parts in a chat assistant's content (a "
    'history carried over from a Claude session): DeepSeek "invalid type: sequence, expected a '
    "string\" (moeru-ai/airi#1222), OpenAI \"Invalid value: '...'. Supported values are: 'text' "
    'and \'image_url\'." (aallam/openai-kotlin#320), xAI "a single `text` element per message" '
    '(nocmt/LLMSearchPlus#2), Ollama Cloud "invalid message format" '
    "(OpenCoworkAI/open-cowork#254; docs/providers.md#deepseek-thinking-parts)",
    repair="remove the parts, the others kept in order (`text-part-arrays` collapses what is left; "
    "a turn left with nothing is removed by `empty-tool-calls`); option `action`: `drop` (count "
    "and length logged, the text with `log_content: true`) or `reasoning_content` (the thinking "
    "becomes the turn's `reasoning_content`, joined after an existing different one with a blank "
    "line); `redacted_thinking` is always dropped. Unsafe with `drop`: the earlier reasoning is "
    "gone (its length is logged); `reasoning_content` keeps it where DeepSeek and Kimi read it",
    safety={
        "moved_thinking": "safe",
        "dropped_thinking": "lossy",
        "dropped_redacted_thinking": "lossy",
    },
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.scan,
    woken_by=scan.on(scan.LIST_CONTENT),
    options=(ACTION,),
)
