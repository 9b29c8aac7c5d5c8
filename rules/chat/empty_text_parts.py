"""empty-text-parts: no content part list holds an empty text part next to other parts.

What: in a message whose ``content`` is a part list, each ``text`` part whose text is empty or
only whitespace is removed when the list holds another part (an image, a text with words). A
list made only of empty text parts is left to ``text-part-arrays`` and ``null-content``. The
change counts the parts removed.
Why: Zhipu GLM answers the generic "Invalid API parameter, please check the documentation."
(1210) to an empty text part beside an image, which an agent writes after a native image read
(justrach/codegraff#812, fixed in #813 by sending a caption; docs/providers.md#glm-content).
Safety: safe: an empty text carries nothing.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, per_message

NAME = "empty-text-parts"


def _empty_text(part: Any) -> bool:
    return (
        isinstance(part, dict)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
        and not part["text"].strip()
    )


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    out: list[Any] | None = None
    changes: list[Change] = []
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list) or not any(_empty_text(p) for p in content):
            continue
        kept = [part for part in content if not _empty_text(part)]
        if not kept:
            continue
        out = list(messages) if out is None else out
        out[index] = {**message, "content": kept}
        removed = len(content) - len(kept)
        changes.append(Change(NAME, index, "dropped_empty_parts", {"count": removed}))
    return Outcome(messages) if out is None else Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Remove empty text parts from a part list that holds other parts.",
    defect='an empty text part beside an image: GLM "Invalid API parameter, please check the '
    'documentation." (1210) (justrach/codegraff#812; docs/providers.md#glm-content)',
    repair="remove each empty or blank text part of a list that keeps another part. An empty "
    "text carries nothing",
    safety="safe",
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
)
