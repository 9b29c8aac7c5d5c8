"""Repairing a tool call's ``arguments`` into a JSON-object string, shared by the chat rule
(``invalid-tool-arguments``, ``function.arguments``) and the Responses rule
(``responses-invalid-arguments``, a ``function_call`` item's ``arguments``): lossless repairs
first (``rules.engine.json_repair_passes``, each named), ``"{}"`` last, with the original's
length and SHA-256 (its text only with ``log_content``).
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import orjson

from rules.engine import known
from rules.engine.base import Option, WorkBudgetExceeded
from rules.engine.json_repair_passes import (
    LOSSY_FIXES,
    MAX_LOGGED_CHARS,
    MAX_REQUEST_TOKENS,
    MAX_SCAN_TOKENS,
    dump_object,
)

#: ``arguments`` absent from its call.
MISSING: Final = object()

#: The option both rules list (read it through this).
TRUNCATED = Option(
    "truncated",
    "close",
    "What to do with arguments cut off inside a string: close it and keep the text, or replace"
    " them with {}.",
    choices=("close", "empty"),
)


class Budget:
    """The scan tokens a request has left."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def repair_arguments(
    raw: Any, detail: dict[str, Any], budget: Budget, *, close_strings: bool, log_content: bool
) -> tuple[str, str]:
    """The new arguments text and the change action (``filled_empty``, ``serialized_object``,
    ``repaired_arguments``, ``trimmed_arguments`` (repaired, cutting what it could not read),
    ``replaced_unrepairable``); fills ``detail`` as it goes. Raises
    ``WorkBudgetExceeded`` when the request's scan budget runs out."""
    if raw is MISSING or raw is None or (isinstance(raw, str) and not raw.strip()):
        detail["was"] = _describe_empty(raw)
        return "{}", "filled_empty"
    if isinstance(raw, dict):
        dumped = dump_object(raw)
        if dumped is not None:
            return dumped, "serialized_object"
    elif isinstance(raw, str):
        limit = min(MAX_SCAN_TOKENS, budget.left)
        repaired = known.repaired(raw, close_strings=close_strings, max_tokens=limit)
        budget.left -= repaired.tokens
        if repaired.over_cap and limit < MAX_SCAN_TOKENS:
            raise WorkBudgetExceeded(MAX_REQUEST_TOKENS)  # the request's, not the string's
        if repaired.text is not None:
            detail["fixes"] = list(repaired.fixes)
            detail["original_length"] = len(raw)
            if repaired.dropped_values:
                detail["dropped_values"] = repaired.dropped_values
                detail["dropped_chars"] = repaired.dropped_chars
            lossy = bool(LOSSY_FIXES.intersection(repaired.fixes))
            if log_content and lossy:
                detail["original"] = raw[:MAX_LOGGED_CHARS]
            # A repair that cut what it could not read (a value cut off mid-way) lost a part of
            # the client's arguments: its own action, so its class can say so (``lossy``).
            return repaired.text, "trimmed_arguments" if lossy else "repaired_arguments"
        if repaired.over_cap:
            detail["over_cost_cap"] = MAX_SCAN_TOKENS
    text = raw if isinstance(raw, str) else _as_text(raw)
    if not isinstance(raw, str):
        detail["original_type"] = type(raw).__name__
    detail["original_length"] = len(text)
    detail["original_sha256"] = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    if log_content:
        detail["original"] = text[:MAX_LOGGED_CHARS]
    return "{}", "replaced_unrepairable"


def _describe_empty(raw: Any) -> str:
    if raw is MISSING:
        return "missing"
    if raw is None:
        return "null"
    return "empty_string" if raw == "" else "whitespace"


def _as_text(value: Any) -> str:
    """A non-string value as text, for its length and hash (JSON where possible)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, ValueError):
        pass
    try:
        return repr(value)
    except Exception:  # a hostile __repr__ must not break the request
        return f"<{type(value).__name__}>"
