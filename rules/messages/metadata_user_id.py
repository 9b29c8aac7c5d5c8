"""messages-metadata-user-id: ``metadata.user_id`` matches ``^[a-zA-Z0-9_-]+$``.

What: request level. A string ``metadata.user_id`` with a character outside
``[a-zA-Z0-9_-]`` (Claude Code 2.1.129+ sends a JSON object as text:
``{"device_id":...,"session_id":...}``), or longer than 256 characters, becomes
``user_<first 32 hex digits of its sha256>``: the same input always gives the same id, so the
provider still sees one stable, opaque user per value. Option ``action: drop`` removes the key
instead. Any other field of ``metadata`` is kept.
Why: DeepSeek's Anthropic endpoint, and Anthropic itself, answer 400 "Invalid 'user_id': string
does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
(deepseek-ai/DeepSeek-V3#1277, deepseek-ai/awesome-deepseek-agent#67, farion1231/cc-switch#2600:
the value is a JSON string; anthropics/claude-code#56643 against the Anthropic API); Anthropic
documents the id as opaque with at most 256 characters (vercel/ai#12419 quotes the docs).
Safety: safe: the id is opaque by contract; a hash keeps it stable and reveals nothing.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from rules import vocabulary
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.wake import fields
from rules.messages.blocks import valid_id

NAME = "messages-metadata-user-id"

MAX_LENGTH: Final = vocabulary.METADATA_USER_ID_MAX

#: The rule's options (the record below lists them; read them through these).
ACTION = Option(
    "action",
    "hash",
    "`hash` (a stable opaque id) or `drop` (remove the key).",
    choices=("hash", "drop"),
)


def fits(value: str) -> bool:
    return len(value) <= MAX_LENGTH and valid_id(value)


def opaque(value: str) -> str:
    """The deterministic replacement of a user id that does not fit."""
    return "user_" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    metadata = ctx.request.get("metadata")
    if type(metadata) is not dict:
        return Outcome(messages)
    value = metadata.get("user_id")
    if type(value) is not str or fits(value):
        return Outcome(messages)
    detail: dict[str, Any] = {"length": len(value)}
    if ACTION.of(ctx) == "drop":
        new = {k: v for k, v in metadata.items() if k != "user_id"}
        change = Change(NAME, -1, "dropped_user_id", detail)
    else:
        new = {**metadata, "user_id": opaque(value)}
        change = Change(NAME, -1, "hashed_user_id", detail)
    return Outcome(messages, (change,), request={**ctx.request, "metadata": new})


RULE = Rule(
    name=NAME,
    summary="Replace a `metadata.user_id` outside `^[a-zA-Z0-9_-]+$` by a stable hash.",
    defect="`metadata.user_id` with other characters (Claude Code's JSON text): \"Invalid "
    "'user_id': string does not match pattern. Expected a string that matches the pattern "
    "'^[a-zA-Z0-9_-]+$'.\"",
    repair="`user_<32 hex digits of its sha256>` (deterministic), or option `action: drop`",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    options=(ACTION,),
    reads_request=True,
    woken_by=fields("metadata"),
)
