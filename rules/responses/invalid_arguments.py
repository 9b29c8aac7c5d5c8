"""responses-invalid-arguments: every ``function_call`` leaves with ``arguments`` a JSON-object
string.

What: the chat rule's repair (``invalid-tool-arguments``, shared through
``rules.engine.arguments``) over a Responses ``function_call`` item's ``arguments``: valid object
text stays byte-identical; a dict is serialized; missing, ``null`` or blank arguments become
``"{}"``; broken text gets only the repairs whose intent is clear, each named in the change
(``rules.engine.json_repair_passes.FIXES``: Python quotes and literals, trailing commas, a
cut-off tail, ...); what still is not an object becomes ``"{}"``, logged with the original's
length and SHA-256 (its text with ``log_content``).
Why: vLLM parses every historical ``arguments`` of a Responses request as it does for chat, and
a JSONDecodeError is the request's 400 ("Unterminated string starting at: line 1 column 1121
(char 1120)", docs/providers.md#chat-templates-pairing: "vLLM (chat and Responses)",
OpenHands/software-agent-sdk#2887, local-inference-lab/vllm#684): ``"{'a': 1}"``, a
truncated object and ``""`` reached the upstream as sent, and ``chatmend check`` called the body
accepted.
Safety: safe, as the chat rule: every value that was sent is kept except in text that was
already incomplete (``truncated: close`` closes a string cut off, ``empty`` makes it ``{}``);
the unrepairable was unusable and is logged by length and hash.
"""

from __future__ import annotations

from typing import Any

from rules.engine.arguments import MISSING, TRUNCATED, Budget, repair_arguments
from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.engine.json_repair_passes import MAX_REQUEST_TOKENS
from rules.engine.known import object_text, strict_object
from rules.responses.items import is_call

NAME = "responses-invalid-arguments"


def _valid(raw: Any) -> bool:
    """``raw`` is a string holding a JSON object (orjson's reading, the fast path)."""
    return type(raw) is str and object_text(raw)


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    return _repaired(items, ctx, Budget(MAX_REQUEST_TOKENS))


def resume(items: list[Any], ctx: RuleContext, left: int | None) -> tuple[Outcome, int]:
    """The rule over ``items`` after others, ``left`` of the request's scan budget after them
    (``None``: the list's start); and the same after them. Each call is repaired by itself:
    only the budget goes on (``Horizon``, rules/engine/resume.py)."""
    budget = Budget(MAX_REQUEST_TOKENS if left is None else left)
    return _repaired(items, ctx, budget), budget.left


def _repaired(items: list[Any], ctx: RuleContext, budget: Budget) -> Outcome:
    """The rule over ``items`` with what is left of ``budget`` (spent in place)."""
    suspects = [
        index
        for index, item in enumerate(items)
        if is_call(item) and not _valid(item.get("arguments", MISSING))
    ]
    if not suspects:
        return Outcome(items)
    close_strings = TRUNCATED.of(ctx) != "empty"
    out = list(items)
    changes: list[Change] = []
    for index in suspects:
        item = items[index]
        raw = item.get("arguments", MISSING)
        if isinstance(raw, str) and strict_object(raw):
            continue  # the stdlib reads it: valid object text stays byte-identical
        detail: dict[str, Any] = {"call_id": item.get("call_id"), "function": item.get("name")}
        arguments, action = repair_arguments(
            raw, detail, budget, close_strings=close_strings, log_content=ctx.log_content
        )
        out[index] = {**item, "arguments": arguments}
        changes.append(Change(NAME, index, action, detail))
    if not changes:
        return Outcome(items)
    return Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Make every function_call's arguments a JSON-object string: repair, serialize, or {}.",
    defect="a `function_call` whose `arguments` is not a string holding a JSON object (Python "
    'quotes, truncated, empty, a dict): vLLM "Unterminated string starting at: line 1 column '
    '1121 (char 1120)" (OpenHands/software-agent-sdk#2887; '
    "docs/providers.md#chat-templates-pairing, chat and Responses)",
    repair="the chat rule's repair (`invalid-tool-arguments`): valid JSON stays byte-identical, "
    "each lossless fix is named in the log, text cut inside a string is closed or emptied "
    '(option `truncated`), only what cannot be repaired becomes `"{}"`, with its length and '
    "sha256 logged",
    safety={
        "filled_empty": "safe",
        "serialized_object": "safe",
        "repaired_arguments": "safe",
        "trimmed_arguments": "lossy",
        "replaced_unrepairable": "lossy",
    },
    default=False,
    apply=apply,
    horizon=carried(resume),  # each call by itself; the budget goes on
    options=(TRUNCATED,),
)
