"""responses-unsupported-parts: a content part of a type the endpoint refuses leaves as the text
type its role takes, where a text rendering exists.

What: in every message item whose ``content`` is a part list, each part whose ``type`` is named
in option ``types`` is rewritten: a text part (``input_text``, ``output_text``, ``text``) becomes
the text type its message's role takes (``output_text`` for an assistant, else ``input_text``)
with the same text; a ``refusal`` part becomes that text type holding its refusal. A part with
no text rendering (an image or a file where the endpoint takes none, an unknown type) is
dropped; a list left empty becomes ``""``. Empty by default: recovery fills it from the refusal
that names the type (rules/providers/named_repairs.py).
Why: the Responses API names part types by direction and refuses the other one: "Invalid value:
'input_text'. Supported values are: 'output_text' and 'refusal'." for an assistant message
replayed with the user's part type (docs/providers.md#responses; the same closed sets as chat's
"Invalid value: 'thinking'. Supported values are: 'text' and 'image_url'.").
Safety: by change: a renamed text part is ``safe``; a rendered refusal is ``unsafe``; a dropped
part is ``lossy``, run by recovery only where the route opts in (``recover.lossy``).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.named import names

NAME = "responses-unsupported-parts"
TEXT_TYPES = frozenset({"input_text", "output_text", "text"})

TYPES: Option[list[str]] = Option(
    "types", [], "Content part types rewritten (as text) or dropped (names)."
)


def render(part: dict[str, Any], role: Any) -> tuple[dict[str, Any] | None, str]:
    """A part of a refused type as its role's text part, and the change's action."""
    text_type = "output_text" if role == "assistant" else "input_text"
    kind = part.get("type")
    if kind in TEXT_TYPES and isinstance(part.get("text"), str):
        if kind == text_type:
            return part, "kept_part"
        return {"type": text_type, "text": part["text"]}, "renamed_part"
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return {"type": text_type, "text": part["refusal"]}, "rendered_part"
    return None, "dropped_part"


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    types = frozenset(names(TYPES.of(ctx)))
    if not types:
        return Outcome(items)
    out: list[Any] | None = None
    changes: list[Change] = []
    for index, item in enumerate(items):
        content = item.get("content") if isinstance(item, dict) else None
        if not isinstance(content, list) or item.get("type", "message") != "message":
            continue
        rebuilt: list[Any] = []
        touched = False
        for position, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") in types):
                rebuilt.append(part)
                continue
            new, action = render(part, item.get("role"))
            if action == "kept_part":
                rebuilt.append(part)
                continue
            touched = True
            changes.append(
                Change(NAME, index, action, {"type": part.get("type"), "position": position})
            )
            if new is not None:
                rebuilt.append(new)
        if touched:
            out = list(items) if out is None else out
            out[index] = {**item, "content": rebuilt or ""}
    return Outcome(items) if out is None else Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Rewrite message parts of a type the endpoint refuses as its role's text type (or "
    "drop them).",
    defect='a content part type the endpoint does not take for that role: "Invalid value: '
    "'input_text'. Supported values are: 'output_text' and 'refusal'.\" "
    "(docs/providers.md#responses)",
    repair="each part of a type in option `types` becomes the text part its role takes "
    "(`output_text` for an assistant, else `input_text`) where it has text, else is dropped "
    "(lossy: recovery only where `recover.lossy` allows it)",
    safety={"renamed_part": "safe", "rendered_part": "unsafe", "dropped_part": "lossy"},
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each item is decided by itself
    options=(TYPES,),
)
