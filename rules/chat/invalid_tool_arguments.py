"""invalid-tool-arguments: every assistant tool call leaves with ``arguments`` a JSON-object string.

What: in each assistant ``tool_calls`` entry (a dict whose ``function`` is a dict), ``arguments``
that is not a string holding a JSON object is repaired. Valid object text is left byte-identical.
A dict is serialized; missing, ``null`` or blank arguments become ``"{}"``. Broken text gets only
repairs whose intent is clear, each named in the change
(``rules.engine.json_repair_passes.FIXES``): a
code fence, double encoding, trailing commas, raw control characters, Python literals and
quotes, ``NaN``/``Infinity`` (written as ``null``, as ``JSON.stringify`` does), unbalanced or
misnested brackets, a cut-off tail, concatenated objects (the first is kept). A repaired value
is written back as compact JSON. Text that still is not an object becomes ``"{}"``: prose,
comments, unquoted keys, missing commas and invalid escapes are not guessed at.
Why: MiniMax, vLLM, llama.cpp and a Moonshot-like gateway reject the whole request when a
historical ``arguments`` is not valid JSON ("invalid function arguments json string (2013)",
"arguments must be a valid JSON object string"), SGLang and HF templates fail on non-object JSON,
and OpenAI rejects an object where a string belongs (docs/providers.md#openai-pairing). Hermes
replaced such text with ``{}`` without trying to repair it and lost a ``write_file`` (#74146,
#119389); its repairs closed brackets in the wrong order and counted braces inside strings (#102311,
E14), and it turned dict arguments into ``{}`` (E25).
Safety: safe. The repairs keep every value that was sent, with exceptions that only affect
text which was already incomplete: a cut-off member (a key without a value, a number cut
mid-token) or a trailing concatenated object is dropped and reported, a cut-off literal with a
single completion (``tr`` -> ``true``) is completed, and ``truncated: close`` forwards a string
value that was cut off, closing it as it stands. That value may be incomplete, which is why
it is an option (``empty`` makes such arguments ``{}`` instead). Replacing the unrepairable
with ``{}`` loses the arguments, but they were unusable: the provider would have rejected
them. The change carries their length and SHA-256, and with ``log_content`` the text itself.
The scan stops after ``MAX_SCAN_TOKENS`` tokens of one string (a cost cap, against a hostile
``{"a":1,"a":1,...``): such text is replaced as unrepairable, the change says ``over_cost_cap``;
it stops at ``MAX_DEPTH`` levels of nesting too (no parser here reads deeper text back).
One request's strings share ``MAX_REQUEST_TOKENS``; past them the rule raises
``WorkBudgetExceeded`` and is skipped (the arguments go as they came).
"""

from __future__ import annotations

from typing import Any

from rules.chat import scan
from rules.chat.message_fields import call_id, function_name
from rules.engine.arguments import MISSING as _MISSING
from rules.engine.arguments import TRUNCATED
from rules.engine.arguments import Budget as _Budget
from rules.engine.arguments import repair_arguments as _repair
from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.engine.json_repair_passes import MAX_REQUEST_TOKENS
from rules.engine.known import strict_object
from rules.engine.messages import rewrite_at

NAME = "invalid-tool-arguments"

__all__ = ["NAME", "RULE", "TRUNCATED", "apply", "resume"]


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    return resume(messages, ctx, None)[0]


def resume(messages: list[Any], ctx: RuleContext, left: int | None) -> tuple[Outcome, int]:
    """The rule over ``messages`` with ``left`` scan tokens of the request's budget (``None``:
    the whole budget, the list's start), and the tokens left after them: a message is decided
    by itself and what the budget has left (``Horizon``, rules/engine/resume.py)."""
    budget = _Budget(MAX_REQUEST_TOKENS if left is None else left)
    suspects = scan.bad_arguments_at(messages)  # the walk's answer, when it read this list
    if not suspects:
        return Outcome(messages), budget.left  # the common case, checked in one tight pass
    close_strings = TRUNCATED.of(ctx) != "empty"
    changes: list[Change] = []

    def fix(index: int, message: Any) -> Any:
        return _fix_message(
            message,
            index,
            changes,
            budget,
            close_strings=close_strings,
            log_content=ctx.log_content,
        )

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes)), budget.left


def _fix_message(
    message: Any,
    index: int,
    changes: list[Change],
    budget: _Budget,
    *,
    close_strings: bool,
    log_content: bool,
) -> Any:
    """Return the message itself, or a copy with repaired tool calls."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return message
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return message
    new_calls: list[Any] | None = None
    for position, call in enumerate(calls):
        fixed = _fix_call(
            call,
            (index, position),
            changes,
            budget,
            close_strings=close_strings,
            log_content=log_content,
        )
        if fixed is not call and new_calls is None:
            new_calls = list(calls[:position])
        if new_calls is not None:
            new_calls.append(fixed)
    return message if new_calls is None else {**message, "tool_calls": new_calls}


def _fix_call(
    call: Any,
    where: tuple[int, int],
    changes: list[Change],
    budget: _Budget,
    *,
    close_strings: bool,
    log_content: bool,
) -> Any:
    """Return the call itself, or a copy whose ``function.arguments`` is an object string."""
    if not isinstance(call, dict):
        return call
    function = call.get("function")
    if not isinstance(function, dict):
        return call
    raw = function.get("arguments", _MISSING)
    if isinstance(raw, str) and strict_object(raw):
        return call  # the fast path: valid object text stays byte-identical
    index, position = where
    detail: dict[str, Any] = {
        "tool_call_id": call_id(call),
        "function": function_name(call),
        "call_index": position,
    }
    arguments, action = _repair(
        raw, detail, budget, close_strings=close_strings, log_content=log_content
    )
    changes.append(Change(NAME, index, action, detail))
    return {**call, "function": {**function, "arguments": arguments}}


RULE = Rule(
    name=NAME,
    summary="Make every tool call's arguments a JSON-object string: repair, serialize, or {}.",
    defect="`function.arguments` that is not a string holding a JSON object (a dict, missing or "
    "empty, truncated JSON, trailing commas, misnested or extra closers, control characters, "
    "Python literals and single quotes, code fences, double-encoded or concatenated JSON, `NaN`): "
    'MiniMax "invalid function arguments json string (2013)" (NousResearch/hermes-agent#12167), '
    '"arguments must be a valid JSON object string" (justrach/codegraff#752), vLLM '
    '"Unterminated string" (OpenHands/software-agent-sdk#2887), OpenAI "expected a string, but '
    'got an object instead" (aaif-goose/goose-mobile#20; docs/providers.md#pairing)',
    repair="one string-aware, linear scan: a dict is serialized, valid JSON stays byte-identical, "
    "each fix is named in the log (`trailing_comma`, `closed_brackets`, ...); text cut inside a "
    "string is closed or emptied (option `truncated`); only what cannot be repaired becomes "
    '`"{}"`, with the original\'s length and sha256 logged (its text with `log_content: true`). '
    "Every value that was sent is kept, except in text that was already incomplete",
    safety={
        "filled_empty": "safe",
        "serialized_object": "safe",
        "repaired_arguments": "safe",
        "trimmed_arguments": "lossy",
        "replaced_unrepairable": "lossy",
    },
    default=True,
    apply=apply,
    scan=scan.scan,
    woken_by=scan.on(scan.BAD_ARGUMENTS),
    # The request's scan budget is all one message's decision reads of the ones before.
    horizon=carried(resume),
    introduces=frozenset(),  # only arguments change, each to an object string
    options=(TRUNCATED,),
)
