"""messages-missing-thinking: in thinking mode, every tool-use turn carries its thinking back.

What: request level and messages. In thinking mode (``thinking.type`` ``enabled`` or
``adaptive``, or no ``thinking`` and a model matching option ``models``, which think by
default), an assistant message with ``tool_use`` blocks and no ``thinking`` or
``redacted_thinking`` block gets the thinking block(s) the model produced for that turn back,
exactly (text and signature, or a redacted block's data), at its front, if the proxy recalled
them (``RuleContext.given``: the reasoning stash observed the response that made the turn,
keyed by ``turn_key`` over the route's scope and the turn's ``tool_use`` ids, names and
inputs); failing that, a thinking block with the option ``placeholder`` text (default empty)
and an empty signature. A turn whose thinking the client kept is never touched.
Why: DeepSeek's Anthropic endpoint answers 400 "The `content[].thinking` in the thinking mode
must be passed back to the API." (NousResearch/hermes-agent#22313, #16748; decolua/9router#2397,
omnimind-ai/OmniBot#307: the turn after a ``tool_use``), and clients that do not keep thinking
(compaction, agents that store text only) poison the session for good. An empty thinking block
is what passes: QwenLM/qwen-code#3788 (only ``tool_use`` turns need a, possibly empty, thinking
block) and leookun/cursor-byok#276 (empty thinking block as the fallback, 1100+ requests
without the 400).
Safety: safe: restored blocks are the model's own, byte for byte (a signature covers them); a
placeholder says nothing, and the model's earlier reasoning was already lost by the client. The
placeholder only for providers that accept unsigned thinking (never Anthropic itself, whose
signature check refuses it). The changes name the ids, block counts and lengths, never text.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice
from typing import Any, Final

import orjson

from rules.engine import recall
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, StashQuery, per_message
from rules.engine.messages import rewrite_at
from rules.engine.thinking import THINKING_MODELS, thinking_enabled
from rules.engine.wake import on
from rules.messages import scan
from rules.messages.blocks import (
    THINKING_TYPES,
    block_type,
    content_list,
    role,
    tool_use_ids,
)

NAME = "messages-missing-thinking"
#: Bumped if the key's recipe ever changes, so old stored entries simply stop matching; not the
#: chat key's (``rules.chat.reasoning_content``), so a chat and a Messages turn never collide.
_KEY_VERSION: Final = "chatmend-thinking-1"

#: The rule's options (the record below lists them; read them through these).
PLACEHOLDER = Option(
    "placeholder", "", "The text of the thinking block a turn gets when none was recalled."
)
MODELS = Option(
    "models",
    list(THINKING_MODELS),
    "Models that think when the request has no `thinking` (globs).",
)


def turn_key(scope: str, blocks: Any) -> str | None:
    """The stash key of a tool-use turn: sha256 (hex) over the ``scope`` (the route and the
    client's credential, hashed) and, in order, each ``tool_use`` block's id, name and input
    (canonical JSON, so a client that re-serializes it still matches). ``None`` if ``blocks``
    holds no ``tool_use`` or one without a string id.

    The recipe every API shares (``rules.engine.recall``), under its own version.
    """
    if type(blocks) is not list:
        return None
    parts: list[tuple[str, str, Any]] = []
    for block in blocks:
        if type(block) is not dict or block.get("type") != "tool_use":
            continue
        tid = block.get("id")
        if type(tid) is not str or not tid:
            return None
        name = block.get("name")
        parts.append((tid, name if type(name) is str else "", block.get("input")))
    return recall.turn_key(_KEY_VERSION, scope, parts) if parts else None


def stored_form(blocks: list[dict[str, Any]]) -> str:
    """What the stash keeps for a turn: its thinking blocks as JSON text."""
    return orjson.dumps(blocks).decode()


def recalled_blocks(value: Any) -> list[dict[str, Any]] | None:
    """The thinking blocks of a stored value (``stored_form``), fresh objects, or ``None`` if it
    is not a non-empty list of well-formed ``thinking`` / ``redacted_thinking`` blocks."""
    if not isinstance(value, str):
        return None
    try:
        blocks = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if type(blocks) is not list or not blocks:
        return None
    for block in blocks:
        kind = block_type(block)
        if kind == "thinking":
            if type(block.get("thinking")) is not str:
                return None
            if type(block.get("signature", "")) is not str:
                return None
        elif kind == "redacted_thinking":
            if type(block.get("data")) is not str:
                return None
        else:
            return None
    return blocks


def _bare(message: Any) -> bool:
    if role(message) != "assistant" or not tool_use_ids(message):
        return False
    return not any(block_type(b) in THINKING_TYPES for b in content_list(message) or ())


def serves(request: Mapping[str, Any], ctx: RuleContext) -> bool:
    """The request runs in thinking mode: the rule serves it, and its response holds thinking
    worth keeping."""
    return thinking_enabled(request, MODELS.of(ctx))


def wanted_keys(
    request: Mapping[str, Any], ctx: RuleContext, scope: str, start: int = 0
) -> list[str]:
    """The keys the rule would look up in this request (its messages from ``start`` on):
    those of the tool-use turns without thinking, in thinking mode (the proxy fetches them
    before the rules run)."""
    messages = request.get("messages")
    if type(messages) is not list or not serves(request, ctx):
        return []
    keys: list[str] = []
    for message in islice(messages, start, None):
        if _bare(message):
            key = turn_key(scope, message["content"])
            if key is not None:
                keys.append(key)
    return keys


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if not serves(ctx.request, ctx):
        return Outcome(messages)
    if scan.BARE_TOOL_USE not in scan.signals(messages):
        return Outcome(messages)
    suspects = [index for index, message in enumerate(messages) if _bare(message)]
    text = PLACEHOLDER.of(ctx)
    placeholder = {
        "type": "thinking",
        "thinking": text if type(text) is str else "",
        "signature": "",
    }
    recalled = ctx.given.recalled
    changes: list[Change] = []

    def fix(index: int, message: dict[str, Any]) -> Any:
        ids = tool_use_ids(message)
        key = turn_key(ctx.given.scope, message["content"]) if recalled else None
        blocks = recalled_blocks(recalled.get(key)) if key is not None else None
        if blocks is not None:
            length = sum(len(b.get("thinking") or b.get("data") or "") for b in blocks)
            detail = {"ids": ids, "blocks": len(blocks), "length": length}
            changes.append(Change(NAME, index, "restored_thinking", detail))
            return {**message, "content": [*blocks, *message["content"]]}
        changes.append(Change(NAME, index, "added_thinking", {"ids": ids}))
        return {**message, "content": [dict(placeholder), *message["content"]]}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


RULE = Rule(
    name=NAME,
    summary="In thinking mode, give a tool-use turn its dropped thinking back, else a placeholder.",
    defect="thinking mode and an assistant `tool_use` turn without a thinking block: DeepSeek "
    '"The `content[].thinking` in the thinking mode must be passed back to the API."',
    repair="the thinking block(s) the model produced for that turn, exactly (text and "
    "signature; a redacted block's data), recalled by the proxy from the response it relayed "
    "(the reasoning stash, keyed by the turn's `tool_use` ids, names and inputs), at its front; "
    'else `{type: thinking, thinking: <placeholder>, signature: ""}` (option `placeholder`, '
    "empty); the log names the ids, block counts and lengths, never the text",
    safety={
        "restored_thinking": "unsafe",
        "added_thinking": "unsafe",
    },
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each turn by itself, the request's facts given
    scan=scan.signals,
    woken_by=on(scan.BARE_TOOL_USE),
    # The blocks it puts first are the turn's thinking: signed if recalled as such, else
    # unsigned; a redacted block recalled after a thinking one reads as thinking not first.
    introduces=frozenset({scan.UNSIGNED_THINKING, scan.MISPLACED_THINKING}),
    options=(PLACEHOLDER, MODELS),
    reads_request=True,
    recall=StashQuery(serves=serves, keys=wanted_keys),
)
