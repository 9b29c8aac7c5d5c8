"""messages-unsigned-thinking: no thinking block that Anthropic's signature check must refuse.

What: in an assistant message, a ``thinking`` block whose ``signature`` is absent, not a
string or blank (a history from DeepSeek's endpoint or another issuer that signs nothing, a
client's synthetic block, chatmend's own placeholder from ``messages-missing-thinking``), and a
``redacted_thinking`` block without its ``data``, are removed. A signed block is never touched,
whatever its text: its signature covers its bytes. Every text, ``tool_use`` and ``tool_result``
block stays, in order; a message left with no block is left to ``messages-empty-messages``.
Why: Anthropic answers 400 "messages.1.content.0: Invalid `signature` in `thinking` block"
(anthropics/claude-code#10627; ding113/claude-code-hub#518 after a channel switch,
code-yeongyu/oh-my-openagent#2775 for synthetic unsigned blocks, langchain-ai/langchain#33391:
enforced since 2025-10-07; docs/providers.md#anthropic-reasoning, "Anthropic: thinking
signature"). The check cannot be passed by editing: a signature is Anthropic's over the exact
block, it does not expire, and any byte difference fails (anthropics/anthropic-sdk-python#1598),
so the catalogue's repair is to drop the blocks no signature covers. With option ``signatures:
anthropic`` (the ``anthropic`` profile: the upstream is Anthropic itself), a block signed by
another issuer is removed too: its signature is not in Anthropic's shape (standard base64;
DeepSeek signs with a UUID, which a session moved from DeepSeek's Anthropic endpoint to Claude
carries), so Anthropic refuses it the same way. A signature in Anthropic's shape is
never judged further: such a block stays byte for byte.
Safety: safe: an unsigned block never reached the model (Anthropic refuses the request); a
tool loop whose last turn loses its only thinking this way is then handled by
``messages-tool-loop-thinking`` (thinking off for that request). The changes count the blocks
removed, never their text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at
from rules.messages import scan
from rules.messages.blocks import (
    content_list,
    is_foreign_thinking,
    is_unsigned_thinking,
    role,
)

NAME = "messages-unsigned-thinking"

#: The rule's options (the record below lists them; read them through these).
SIGNATURES = Option(
    "signatures",
    "any",
    "`any`: only a missing or blank signature is refused; `anthropic` (the upstream is "
    "Anthropic): also a signature not in Anthropic's shape (another issuer's, a UUID).",
    choices=("any", "anthropic"),
)


def _unsigned_or_foreign(block: Any) -> bool:
    return is_unsigned_thinking(block) or is_foreign_thinking(block)


def _wakes(options: Mapping[str, Any]) -> frozenset[str] | None:
    """Unsigned thinking wakes it; refusing other issuers' signatures too, it always runs."""
    return (
        None if options.get(SIGNATURES.name) == "anthropic" else frozenset({scan.UNSIGNED_THINKING})
    )


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    refused: Callable[[Any], bool] = is_unsigned_thinking
    if SIGNATURES.of(ctx) == "anthropic":
        refused = _unsigned_or_foreign
    elif scan.UNSIGNED_THINKING not in scan.signals(messages):
        return Outcome(messages)
    suspects = [
        index
        for index, message in enumerate(messages)
        if role(message) == "assistant" and any(map(refused, content_list(message) or ()))
    ]
    if not suspects:
        return Outcome(messages)
    changes: list[Change] = []

    def fix(index: int, message: dict[str, Any]) -> Any:
        blocks: list[Any] = message["content"]
        kept = [block for block in blocks if not refused(block)]
        redacted = sum(
            1 for block in blocks if refused(block) and block.get("type") == "redacted_thinking"
        )
        foreign = sum(1 for block in blocks if is_foreign_thinking(block) and refused(block))
        detail = {"thinking": len(blocks) - len(kept) - redacted, "redacted": redacted}
        if foreign:
            detail["foreign"] = foreign
        changes.append(Change(NAME, index, "dropped_thinking", detail))
        return {**message, "content": kept}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Remove thinking blocks without a signature (another issuer's, placeholders).",
    defect="a `thinking` block with an absent or empty `signature` (another issuer's history, "
    "a placeholder), a `redacted_thinking` without `data`: Anthropic "
    '"messages.1.content.0: Invalid `signature` in `thinking` block"',
    repair="remove those blocks (with option `signatures: anthropic`, a block signed in another "
    "issuer's shape too, such as DeepSeek's UUID; a signature in Anthropic's shape is never "
    "touched; every text, `tool_use` and `tool_result` stays); the log counts them",
    safety="lossy",
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.signals,
    woken_by=_wakes,
    options=(SIGNATURES,),
)
