"""unsupported-part-types: a content part of a type the endpoint refuses leaves as text, where a
text rendering exists.

What: in every message whose ``content`` is a part list, each part whose ``type`` is named in
option ``types`` is rewritten: an ``input_text`` or ``output_text`` part (the Responses API's
names) becomes a ``text`` part with the same text; a ``refusal`` part becomes a ``text`` part
holding its refusal; a ``tool_reference`` part becomes the text ``Tool reference: <name>``. A
part with no text rendering (an image, a file, an audio clip, an unknown type) is dropped, and
a list left empty becomes ``""``. Thinking parts are ``thinking-parts``' business and are left
alone. Empty by default: recovery fills it from the refusal that names the type
(rules/providers/named_repairs.py).
Why: each endpoint takes its own closed set of part types and refuses the rest by name: OpenAI
"Invalid value: 'thinking'. Supported values are: 'text' and 'image_url'."
(docs/providers.md#content), serde-based endpoints "unknown variant `tool_reference`, expected
`text`" (zhukunpenglinyutong/jetbrains-cc-gui#591: DeepSeek's Anthropic endpoint, the same
wording on its chat endpoint).
Safety: by change: a renamed text part is ``safe`` (the same text, the type the endpoint
knows); a rendered refusal or tool reference is ``unsafe`` (chatmend's words around the
client's); a dropped part is ``lossy``, run by recovery only where the route opts in
(``recover.lossy``).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.named import names

NAME = "unsupported-part-types"
#: Part types whose text is kept as a ``text`` part of the same text.
TEXT_TYPES = frozenset({"input_text", "output_text"})
#: Left to thinking-parts (moved to ``reasoning_content`` or dropped there).
THINKING = frozenset({"thinking", "redacted_thinking"})

TYPES: Option[list[str]] = Option(
    "types", [], "Content part types rewritten (as text) or dropped (names)."
)


def render(part: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """A part of a refused type as a text part, and the change's action (``None``: dropped)."""
    kind = part.get("type")
    if kind in TEXT_TYPES and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}, "renamed_part"
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return {"type": "text", "text": part["refusal"]}, "rendered_part"
    if kind == "tool_reference" and isinstance(part.get("tool_name"), str):
        return {"type": "text", "text": f"Tool reference: {part['tool_name']}"}, "rendered_part"
    return None, "dropped_part"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    types = frozenset(names(TYPES.of(ctx))) - THINKING
    if not types:
        return Outcome(messages)
    out: list[Any] | None = None
    changes: list[Change] = []
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        rebuilt: list[Any] = []
        touched = False
        for position, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") in types):
                rebuilt.append(part)
                continue
            touched = True
            new, action = render(part)
            detail = {"type": part.get("type"), "position": position}
            changes.append(Change(NAME, index, action, detail))
            if new is not None:
                rebuilt.append(new)
        if touched:
            out = list(messages) if out is None else out
            out[index] = {**message, "content": rebuilt or ""}
    return Outcome(messages) if out is None else Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Rewrite content parts of a type the endpoint refuses as text (or drop them).",
    defect='a content part type the endpoint does not take, named in its refusal: "unknown '
    'variant `tool_reference`, expected `text`" (zhukunpenglinyutong/jetbrains-cc-gui#591), '
    "\"Invalid value: 'thinking'. Supported values are: 'text' and 'image_url'.\" "
    "(docs/providers.md#content)",
    repair="each part of a type in option `types` becomes a text part where a text rendering "
    "exists (`input_text`/`output_text`: the same text; `refusal`; `tool_reference`: its name), "
    "else is dropped (lossy: recovery only where `recover.lossy` allows it)",
    safety={"renamed_part": "safe", "rendered_part": "unsafe", "dropped_part": "lossy"},
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    options=(TYPES,),
)
