"""messages-unsupported-blocks: a content block of a type the endpoint refuses leaves as text,
where a text rendering exists.

What: in every message's ``content`` list, and in every ``tool_result``'s own ``content`` list, each
block whose ``type`` is named in option ``types`` is rewritten: a ``tool_reference`` (Claude Code's
tool search: the tool it loaded) becomes the text block ``Tool reference: <name>``; a ``document``
with a text source becomes a text block of that text; a ``search_result`` becomes a text block of
its title and texts; an ``input_text`` or ``output_text`` block becomes a ``text`` block with the
same text. A block with no text rendering (an image, a PDF, an unknown type) is dropped; a
``tool_result`` content left empty becomes ``""``. ``text``, ``tool_use``, ``tool_result`` and
thinking blocks are never touched. Empty by default: recovery fills it from the refusal that names
the type (rules/providers/named_repairs.py). Why: Anthropic-format endpoints other than Anthropic's
take a closed set of block types: DeepSeek's "Failed to deserialize the JSON body into the target
type: messages[4].content: unknown variant `tool_reference`, expected `text`" for a tool search
result Claude Code sends (zhukunpenglinyutong/jetbrains-cc-gui#591;
docs/providers.md#anthropic-content). Safety: by change: a renamed text block is ``safe``; a
rendered block is ``unsafe`` (chatmend's words around the client's); a dropped block is ``lossy``,
run by recovery only where the route opts in (``recover.lossy``).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.named import names

NAME = "messages-unsupported-blocks"
#: What a message is made of: never rewritten here.
KEPT = frozenset({"text", "tool_use", "tool_result", "thinking", "redacted_thinking"})

TYPES: Option[list[str]] = Option(
    "types", [], "Content block types rewritten (as text) or dropped (names)."
)


def _texts(blocks: Any) -> list[str]:
    if isinstance(blocks, str):
        return [blocks]
    if not isinstance(blocks, list):
        return []
    return [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]


def render(block: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """A block of a refused type as a text block, and the change's action (``None``: dropped)."""
    kind = block.get("type")
    if kind in ("input_text", "output_text") and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}, "renamed_block"
    if kind == "tool_reference" and isinstance(block.get("tool_name"), str):
        return {"type": "text", "text": f"Tool reference: {block['tool_name']}"}, "rendered_block"
    source = block.get("source")
    data = source.get("data") if isinstance(source, dict) and source.get("type") == "text" else None
    if kind == "document" and isinstance(data, str):
        return {"type": "text", "text": data}, "rendered_block"
    if kind == "search_result":
        parts = _texts([{"text": block.get("title")}]) + _texts(block.get("content"))
        if parts:
            return {"type": "text", "text": "\n".join(parts)}, "rendered_block"
    return None, "dropped_block"


def _rewrite(
    blocks: list[Any], types: frozenset[str], index: int, where: str, changes: list[Change]
) -> list[Any] | None:
    """``blocks`` with each refused block rewritten or dropped, or ``None`` if none was."""
    rebuilt: list[Any] = []
    touched = False
    for position, given in enumerate(blocks):
        if not isinstance(given, dict):
            rebuilt.append(given)
            continue
        block = given
        kind = block.get("type")
        if kind == "tool_result" and isinstance(block.get("content"), list):
            inner = _rewrite(block["content"], types, index, f"{where}{position}.", changes)
            if inner is not None:
                touched = True
                block = {**block, "content": inner or ""}
        if kind in KEPT or kind not in types:
            rebuilt.append(block)
            continue
        touched = True
        new, action = render(block)
        changes.append(Change(NAME, index, action, {"type": kind, "at": f"{where}{position}"}))
        if new is not None:
            rebuilt.append(new)
    return rebuilt if touched else None


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    types = frozenset(names(TYPES.of(ctx))) - KEPT
    if not types:
        return Outcome(messages)
    out: list[Any] | None = None
    changes: list[Change] = []
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        rebuilt = _rewrite(content, types, index, "content.", changes)
        if rebuilt is not None:
            out = list(messages) if out is None else out
            out[index] = {**message, "content": rebuilt}
    return Outcome(messages) if out is None else Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Rewrite content blocks of a type the endpoint refuses as text (or drop them).",
    defect="a content block type the endpoint does not take: DeepSeek's Anthropic endpoint "
    '"messages[4].content: unknown variant `tool_reference`, expected `text`" '
    "(zhukunpenglinyutong/jetbrains-cc-gui#591; docs/providers.md#anthropic-content)",
    repair="each block of a type in option `types` (in a message or a tool result) becomes a "
    "text block where a text rendering exists (`tool_reference`: its name; a text `document`; a "
    "`search_result`), else is dropped (lossy: recovery only where `recover.lossy` allows it)",
    safety={"renamed_block": "safe", "rendered_block": "unsafe", "dropped_block": "lossy"},
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    options=(TYPES,),
)
