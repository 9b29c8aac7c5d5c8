"""messages-tool-result-cache-control: ``cache_control`` on a ``tool_result``, not inside it.

What: a ``tool_result`` block whose ``content`` is a list of blocks some of which carry
``cache_control`` gets that ``cache_control`` moved up onto itself: the inner blocks lose the
key, and the ``tool_result`` takes the last inner value (the breakpoint nearest the end of the
result) unless it already has its own, which is kept. Nothing else in the block changes.
Why: GitHub Copilot's Anthropic endpoint answers 400
"messages.5.content.0.tool_result.content.16.cache_control: cache_control may not be specified
within `tool_result.content`. Instead, place it directly on `tool_result`"
(caozhiyuan/copilot-api#241; docs/providers.md#anthropic-content, "cache_control placement"),
and the repair is the error's own advice. The evidence is a relay's, not a built-in provider's
(Anthropic accepts the shape), so no profile switches this on: enable it by name for a route
whose upstream refuses it.
Safety: safe: no content changes; the cache breakpoint moves from inside the result to its end,
which at most caches a few more tokens of the same result.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at
from rules.messages.blocks import content_list, role, tool_result_id

NAME = "messages-tool-result-cache-control"


def nested(block: Any) -> list[int]:
    """The positions, inside a ``tool_result`` block's ``content`` list, of the blocks that
    carry ``cache_control`` (empty for any other block)."""
    if type(block) is not dict or block.get("type") != "tool_result":
        return []
    inner = block.get("content")
    if type(inner) is not list:
        return []
    return [n for n, part in enumerate(inner) if type(part) is dict and "cache_control" in part]


def _holds_nested(message: Any) -> bool:
    return role(message) == "user" and any(nested(b) for b in content_list(message) or ())


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    suspects = [index for index, message in enumerate(messages) if _holds_nested(message)]
    if not suspects:
        return Outcome(messages)
    changes: list[Change] = []

    def lift(block: Any) -> Any:
        positions = nested(block)
        if not positions:
            return block
        inner: list[Any] = block["content"]
        value = inner[positions[-1]]["cache_control"]
        moved = set(positions)
        content = [
            {k: v for k, v in part.items() if k != "cache_control"} if n in moved else part
            for n, part in enumerate(inner)
        ]
        return {**block, "content": content, "cache_control": block.get("cache_control", value)}

    def fix(index: int, message: dict[str, Any]) -> Any:
        blocks: list[Any] = message["content"]
        ids = [tool_result_id(b) for b in blocks if nested(b)]
        count = sum(len(nested(b)) for b in blocks)
        changes.append(Change(NAME, index, "moved_cache_control", {"ids": ids, "count": count}))
        return {**message, "content": [lift(block) for block in blocks]}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Move `cache_control` from inside a `tool_result`'s content onto the `tool_result`.",
    defect="`cache_control` on a block inside `tool_result.content`: GitHub Copilot's Anthropic "
    'endpoint "cache_control may not be specified within `tool_result.content`. Instead, '
    'place it directly on `tool_result`"',
    repair="remove it from the inner blocks and put the last one's on the `tool_result` (its own "
    "kept if it has one); no content changes. For relays: no built-in profile needs it",
    safety="safe",
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
)
