"""messages-tool-input: every ``tool_use`` block's ``input`` is a JSON object.

What: a ``tool_use`` block whose ``input`` is not an object is repaired: a string holding JSON
object text (an OpenAI-style ``arguments`` string a translating agent stored, cut-off text,
trailing commas, code fences, ...) is parsed with the chat ``invalid-tool-arguments`` repair
(``rules/engine/json_repair_passes.py``), so the call keeps its arguments; an absent, ``null``
or blank input becomes ``{}``; anything else (a list, a number, text that is no JSON object)
becomes ``{}``, with its type, length and sha256 logged (the text only with ``log_content``).
Why: Anthropic answers 400 "messages.61.content.0.tool_use.input: Input should be a valid
dictionary" (docs/providers.md, Anthropic; anthropics/claude-code#6696,
anthropics/anthropic-sdk-typescript#648), and the whole session stays stuck on that turn.
Safety: safe for repaired text (the same object, compacted); ``{}`` loses a value the provider
could not read anyway (logged with its hash).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from rules.engine.base import Change, Outcome, Rule, RuleContext, WorkBudgetExceeded, carried
from rules.engine.json_repair_passes import (
    LOSSY_FIXES,
    MAX_LOGGED_CHARS,
    MAX_REQUEST_TOKENS,
    MAX_SCAN_TOKENS,
    repair_object,
)
from rules.engine.messages import rewrite_at
from rules.engine.wake import on
from rules.messages import scan
from rules.messages.blocks import content_list

NAME = "messages-tool-input"


def _bad(block: Any) -> bool:
    return (
        type(block) is dict
        and block.get("type") == "tool_use"
        and type(block.get("input")) is not dict
    )


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    return _repaired(messages, ctx, [MAX_REQUEST_TOKENS])


def resume(messages: list[Any], ctx: RuleContext, left: int | None) -> tuple[Outcome, int]:
    """The rule over ``messages`` after others, ``left`` of the request's repair budget after
    them (``None``: the list's start); and the same after them. Each input is repaired by
    itself: only the budget goes on from one message to the next (``Horizon``,
    rules/engine/resume.py)."""
    budget = [MAX_REQUEST_TOKENS if left is None else left]
    outcome = _repaired(messages, ctx, budget)
    return outcome, budget[0]


def _repaired(messages: list[Any], ctx: RuleContext, budget: list[int]) -> Outcome:
    """The rule over ``messages`` with what is ``budget`` (its one entry, spent in place)."""
    if scan.BAD_INPUT not in scan.signals(messages):
        return Outcome(messages)
    suspects = [
        index
        for index, message in enumerate(messages)
        if (blocks := content_list(message)) is not None and any(map(_bad, blocks))
    ]
    if not suspects:
        return Outcome(messages)
    changes: list[Change] = []

    def fix(index: int, message: dict[str, Any]) -> Any:
        blocks = [
            _fixed(block, index, position, changes, budget, ctx.log_content)
            if _bad(block)
            else block
            for position, block in enumerate(message["content"])
        ]
        return {**message, "content": blocks}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


def _fixed(  # noqa: PLR0917
    block: dict[str, Any],
    index: int,
    position: int,
    changes: list[Change],
    budget: list[int],
    log_content: bool,
) -> dict[str, Any]:
    raw = block.get("input")
    detail: dict[str, Any] = {
        "id": block.get("id"),
        "name": block.get("name"),
        "position": position,
    }
    new: dict[str, Any] = {}
    if raw is None or (type(raw) is str and not raw.strip()):
        detail["was"] = "absent" if "input" not in block else ("null" if raw is None else "blank")
        action = "filled_empty"
    else:
        action = "replaced_unrepairable"
        if type(raw) is str:
            limit = min(MAX_SCAN_TOKENS, budget[0])
            repaired = repair_object(raw, max_tokens=limit)
            budget[0] -= repaired.tokens
            if repaired.over_cap and limit < MAX_SCAN_TOKENS:
                raise WorkBudgetExceeded(MAX_REQUEST_TOKENS)
            if repaired.text is not None:
                parsed = orjson.loads(repaired.text)
                if type(parsed) is dict:
                    # a repair that cut what it could not read lost a part of the input
                    lossy = LOSSY_FIXES.intersection(repaired.fixes)
                    new, action = parsed, "trimmed_input" if lossy else "repaired_input"
                    detail["fixes"] = list(repaired.fixes)
        if action == "replaced_unrepairable":
            text = raw if type(raw) is str else _as_text(raw)
            detail["original_type"] = type(raw).__name__
            detail["original_length"] = len(text)
            detail["original_sha256"] = hashlib.sha256(
                text.encode("utf-8", "surrogatepass")
            ).hexdigest()
            if log_content:
                detail["original"] = text[:MAX_LOGGED_CHARS]
    changes.append(Change(NAME, index, action, detail))
    return {**block, "input": new}


def _as_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # an integer beyond 64 bits, read by the standard library
        return repr(value)


RULE = Rule(
    name=NAME,
    summary="Make every tool_use input a JSON object: parse and repair text, else `{}`.",
    defect='a `tool_use.input` that is not an object: Anthropic "tool_use.input: Input should be '
    'a valid dictionary"',
    repair="object text is parsed (the chat arguments repair: trailing commas, cut-off text, "
    "fences, ...); absent, null or blank becomes `{}`; anything else `{}` with its length and "
    "sha256 logged",
    safety={
        "filled_empty": "safe",
        "repaired_input": "safe",
        "trimmed_input": "lossy",
        "replaced_unrepairable": "lossy",
    },
    default=True,
    apply=apply,
    horizon=carried(resume),  # each input by itself; the budget goes on
    scan=scan.signals,
    woken_by=on(scan.BAD_INPUT),
    # An input made an object sets no signal: the walk reads no input but its type.
    introduces=frozenset(),
)
