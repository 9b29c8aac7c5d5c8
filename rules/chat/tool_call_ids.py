"""tool-call-ids: tool-call ids in the format the upstream accepts, mapped alike on both sides.

What: with option ``format`` other than ``preserve``, every tool-call id (``tool_calls[].id`` of
an assistant) and every ``tool_call_id`` (of a tool message) that does not fit the format goes
through one per-request map to a new id that does: ``mistral9`` ``^[a-zA-Z0-9]{9}$`` (base62 of
the original's sha256), ``max40`` at most 40 characters (only longer ids change: ``call_`` and
base62 of the sha256), ``anthropic`` ``^[a-zA-Z0-9_-]+$`` (each other character becomes ``_``,
so ``functions.Bash:0`` becomes ``functions_Bash_0``). Ids that fit are kept as they are. A new
id that is already taken (by an id kept, or by an earlier new one) is derived again from the
original and an attempt counter, in order of first appearance, so the map is deterministic and
one-to-one. A call and the result that answer each other share an id, so they share the new id.
Only non-empty string ids are ids: a missing, empty or non-string id is the missing-id rules'
business and is left alone.
Why: Mistral (API and mistral-common, vLLM mistral mode) "Tool call id was call_0fypS1hVX but
must be a-z, A-Z, 0-9, with a length of 9." (docs/providers.md#chat-templates-pairing,
langchain-ai/langchain#24668, vllm-project/vllm#12332); OpenAI "Invalid
'messages[10].tool_calls[0].id': string too long. Expected a string with maximum length 40, but got
a string with length 53 instead." (docs/providers.md#openai-pairing, agno-agi/agno#5382;
docs/providers.md#question-4: the limit may have been relaxed, so only ids over 40 change);
Anthropic "messages.92.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
(docs/providers.md#kimi-pairing, maximhq/bifrost#5097: Kimi ids like ``functions.Bash:0``). Kimi
must keep its own ids (docs/providers.md#kimi, docs/providers.md#question-10, llxprt-code#712):
``preserve``, the default, never rewrites. It runs after the pairing rules, so the ids it maps are
unique and paired; it maps ids, not pairs, so anything else (a duplicate, an orphan) keeps its
shape. Safety: safe. Ids are opaque handles between a call and its result, and both sides get the
same new id. The model's next reply does not refer to past ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from typing import Any, Final

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried
from rules.engine.ids import Renames, digest62, fresh_from
from rules.engine.messages import rewrite_at

NAME = "tool-call-ids"

FORMATS: Final = ("preserve", "mistral9", "max40", "anthropic")
MAX_LENGTH: Final = 40

_MISTRAL9: Final = re.compile(r"[a-zA-Z0-9]{9}")
_ANTHROPIC: Final = re.compile(r"[a-zA-Z0-9_-]+")
_NOT_ANTHROPIC: Final = re.compile(r"[^a-zA-Z0-9_-]")


#: The rule's options (the record below lists them; read them through these).
FORMAT = Option(
    "format",
    "preserve",
    "id format the upstream accepts: preserve (never rewrite, Kimi), mistral9, max40, anthropic",
    FORMATS,
)


def conforms(value: str, fmt: str) -> bool:
    """True if the id ``value`` is acceptable as it is under ``fmt``."""
    if fmt == "mistral9":
        return _MISTRAL9.fullmatch(value) is not None
    if fmt == "max40":
        return len(value) <= MAX_LENGTH
    if fmt == "anthropic":
        return _ANTHROPIC.fullmatch(value) is not None
    return True


def _candidate(value: str, attempt: int, *, fmt: str) -> str:
    """The new id for ``value`` at collision ``attempt`` (0 first); always conforms to ``fmt``."""
    if fmt == "mistral9":
        return digest62(value, attempt)[:9]
    if fmt == "max40":
        return "call_" + digest62(value, attempt)[:24]
    readable = _NOT_ANTHROPIC.sub("_", value)  # anthropic
    return readable if attempt == 0 else f"{readable}_{digest62(value, attempt)[:8]}"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    made = _renamed(messages, FORMAT.of(ctx), frozenset(), {})
    assert made is not None  # from the start nothing was made that a new id could meet
    return made[0]


#: What the rule carries from one part of a list to the next: the ids kept as they are, and
#: the map so far (never changed in place: a retry resumes from the same state again).
State = tuple[frozenset[str], dict[str, str]]


def resume(
    messages: list[Any], ctx: RuleContext, before: State | None
) -> tuple[Outcome, State] | None:
    """The rule over ``messages`` after the list ``before`` describes (``None``: its start):
    ids seen before keep their new ids, new ones avoid every id kept or made. ``None`` where
    the new messages keep an id the map made before (the whole run would have made another)."""
    kept, known = (frozenset(), {}) if before is None else before
    return _renamed(messages, FORMAT.of(ctx), kept, known)


def _renamed(
    messages: list[Any], fmt: str, kept: frozenset[str], known: dict[str, str]
) -> tuple[Outcome, State] | None:
    """``messages`` with each id that does not fit ``fmt`` renamed, after the ids ``kept`` and
    the map ``known`` of the messages before; and the state after them."""
    if fmt not in FORMATS or fmt == "preserve":
        return Outcome(messages), (kept, known)
    renames = Renames(lambda value: conforms(value, fmt))
    suspects = [index for index, ids in _ids(messages) if renames.see_all(ids)]
    here = renames.kept()
    if known and not here.isdisjoint(known.values()):
        return None
    now = kept | here if here - kept else kept
    if not renames:
        return Outcome(messages), (now, known)  # the common case: every id already fits
    make = fresh_from(partial(_candidate, fmt=fmt), set(now) | set(known.values()))
    mapping = {**known, **renames.mapping(lambda value: known.get(value) or make(value))}
    changes: list[Change] = []

    def fix(index: int, message: Any) -> Any:
        if message.get("role") == "tool":
            old = message["tool_call_id"]
            new = mapping[old]
            changes.append(Change(NAME, index, "renamed_id", {"from": old, "to": new}))
            return {**message, "tool_call_id": new}
        renamed: dict[str, str] = {}
        calls = [_renamed_call(call, mapping, renamed) for call in message["tool_calls"]]
        changes.append(Change(NAME, index, "renamed_ids", {"ids": renamed, "format": fmt}))
        return {**message, "tool_calls": calls}

    out = Outcome(rewrite_at(messages, suspects, fix), tuple(changes))
    return out, (now, mapping if len(mapping) > len(known) else known)


def _renamed_call(call: Any, mapping: dict[str, str], renamed: dict[str, str]) -> Any:
    old = _id(call, "id")
    if old is None or old not in mapping:
        return call
    renamed[old] = mapping[old]
    return {**call, "id": mapping[old]}


def _id(holder: Any, key: str) -> str | None:
    value = holder.get(key) if type(holder) is dict else None
    return value if type(value) is str and value else None


def _ids(messages: list[Any]) -> Iterator[tuple[int, list[str]]]:
    """Each message holding ids (a tool message's ``tool_call_id``, an assistant's calls'
    ``id``): its index and its ids, in order."""
    for index, message in enumerate(messages):
        if type(message) is not dict:
            continue
        role = message.get("role")
        if role == "tool":
            found = [_id(message, "tool_call_id")]
        elif role == "assistant" and type(message.get("tool_calls")) is list:
            found = [_id(call, "id") for call in message["tool_calls"]]
        else:
            continue
        yield index, [value for value in found if value is not None]


RULE = Rule(
    name=NAME,
    summary="Rewrite tool-call ids to the upstream's format, calls and results alike.",
    defect='tool-call ids the upstream refuses: Mistral "Tool call id was call_0fypS1hVX but must '
    'be a-z, A-Z, 0-9, with a length of 9." (langchain-ai/langchain#24668), OpenAI "string too '
    'long. Expected a string with maximum length 40" (agno-agi/agno#5382), Anthropic "String '
    "should match pattern '^[a-zA-Z0-9_-]+$'\" for Kimi's `functions.Bash:0` "
    "(maximhq/bifrost#5097; docs/providers.md#mistral-pairing)",
    repair="one deterministic per-request map, the same for `tool_calls[].id` and `tool_call_id`, "
    "in the format of option `format`: `preserve` (never rewrite: Kimi needs its own ids), "
    "`mistral9` (9 base62 characters of the id's sha256), `max40` (only ids over 40 characters "
    "change), `anthropic` (other characters become `_`); ids that fit are kept, new ids are unique "
    "in the request. A call and its result get the same new id",
    safety="safe",
    default=False,
    apply=apply,
    horizon=carried(resume),  # the map so far: ids seen before keep their new id
    options=(FORMAT,),
)
