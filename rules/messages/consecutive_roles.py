"""messages-consecutive-roles: user and assistant turns alternate.

What: a run of two or more adjacent messages with the same role (``user`` or ``assistant``) is
merged into its first message: if every content is a string they are joined with a blank line,
else the contents become one block list (a string as a text block), in order. The first
message's other keys are kept. Nothing is dropped.
Why: Anthropic answered 400 'messages: roles must alternate between "user" and "assistant", but
found multiple "user" roles in a row' (docs/providers.md, Anthropic;
mattermost/mattermost-plugin-agents#180, lobehub/lobehub#1496). Later reports suggest Anthropic
merges such turns itself; merging first is harmless, and the pairing rule needs it: an
assistant turn split in two (``tool_use`` in the first, text in the second) would otherwise
leave the calls without results "immediately after".
Safety: safe: every block and text is kept in order; only the turn boundary between two turns
of the same speaker goes.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.engine.wake import on
from rules.messages import scan
from rules.messages.blocks import as_blocks, role

NAME = "messages-consecutive-roles"

_ROLES = ("user", "assistant")


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if scan.ADJACENT not in scan.signals(messages):
        return Outcome(messages)
    previous = None
    for message in messages:
        current = role(message)
        if current in _ROLES and current == previous:
            break
        previous = current
    else:
        return Outcome(messages)  # the common case: turns alternate
    out: list[Any] = []
    changes: list[Change] = []
    run: list[Any] = []
    start = 0

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            out.append(_merged(run))
            changes.append(
                Change(NAME, start, "merged", {"role": run[0]["role"], "count": len(run)})
            )

    for index, message in enumerate(messages):
        current = role(message)
        if run and current in _ROLES and current == run[0]["role"]:
            run.append(message)
            continue
        flush()
        run = [message] if current in _ROLES else []
        start = index
        if not run:
            out.append(message)
    flush()
    return Outcome(out, tuple(changes))


def _merged(run: list[dict[str, Any]]) -> dict[str, Any]:
    contents = [message.get("content") for message in run]
    if all(type(content) is str for content in contents):
        merged: Any = "\n\n".join(c for c in contents if c)
    else:
        merged = [block for content in contents for block in as_blocks(content)]
    return {**run[0], "content": merged}


def resume(
    messages: list[Any], ctx: RuleContext, before: tuple[str | None] | None
) -> tuple[Outcome, tuple[str | None]] | None:
    """The rule over ``messages`` after others, ``before`` holding the role of the last of them
    (``None``: the list's start); and the same after them. A merge looks one message back:
    ``None`` when the first message here would join the one before (``Horizon``,
    rules/engine/resume.py)."""
    previous = None if before is None else before[0]
    if not messages:
        return Outcome(messages), (previous,)
    first = role(messages[0])
    if first in _ROLES and first == previous:
        return None
    return apply(messages, ctx), (role(messages[-1]),)


RULE = Rule(
    name=NAME,
    summary="Merge adjacent messages of the same role into one turn.",
    defect='two user (or two assistant) messages in a row: Anthropic "roles must alternate '
    'between \\"user\\" and \\"assistant\\""',
    repair="merge the run into its first message: strings joined with a blank line, else one "
    "block list in order",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(resume),  # a merge looks one message back
    scan=scan.signals,
    woken_by=on(scan.ADJACENT),
)
