"""bookkeeping-keys: an agent's own bookkeeping keys leave no message and no tool call.

What: a message loses every key an agent stamps on its stored transcript for itself: the names
in ``MESSAGE_KEYS`` (``timestamp``, ``api_content``, ``tool_name``, ``effect_disposition``) and
any key starting with one of ``MESSAGE_PREFIXES`` (``_``, ``display_``, ``codex_``). A function
tool call inside an assistant's ``tool_calls`` loses ``CALL_KEYS`` (``call_id`` and
``response_item_id``, the Responses API's ids an agent keeps beside the chat id, and
``extra_content``, Gemini's thought-signature carrier). Option ``keep`` names keys kept anyway
(the gemini-openai profile keeps ``extra_content``: Gemini 3 needs its thought signatures back).
Every other key, standard or not, is left: the per-role allowlist is ``unknown-message-fields``,
an option of the strict profiles. Non-object messages and calls are left alone. The change names
the dropped keys (``tool_calls.0.call_id`` inside calls), never their values.
Why: no provider reads these keys, and strict ones refuse the whole request while one is there,
on every later turn of the session: Moonshot/Kimi and Fireworks "Extra inputs are not permitted,
field: 'messages[N].tool_name'", and the same for ``messages[0].timestamp``
(NousResearch/hermes-agent#47868); an internal marker reached a strict gateway as "Unknown
parameter: '_empty_recovery_synthetic'" and "every subsequent request in that session carries the
poisoned key" (hermes-agent commit 775a17284); Groq "property 'timestamp' is unsupported"
(docs/providers.md#groq-fields, ServiceStack/llms#17). hermes-agent's own send path strips exactly
this list (its ``convert_messages``), ``extra_content`` only for models other than Gemini and Gemma.
The pairing reads ``call_id`` first: ``codex-call-ids`` runs earlier and makes a result that names
it name the call's ``id``.
Safety: safe. The keys are the agent's own notes; the provider never reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from rules.chat import scan
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at
from rules.vocabulary import BOOKKEEPING_CALL_KEYS, BOOKKEEPING_MESSAGE_KEYS, BOOKKEEPING_PREFIXES

NAME = "bookkeeping-keys"

#: Message keys dropped by name (hermes-agent's send path, hermes-agent#47868).
MESSAGE_KEYS: Final = BOOKKEEPING_MESSAGE_KEYS
#: Message keys dropped by prefix: internal ``_…`` markers, UI-only ``display_…`` fields,
#: Codex bridge state (``codex_reasoning_items``, ``codex_message_items``).
MESSAGE_PREFIXES: Final = BOOKKEEPING_PREFIXES
#: Keys dropped from a function tool call.
CALL_KEYS: Final = BOOKKEEPING_CALL_KEYS
#: Keys that are never bookkeeping, tested first as a set: the common message is decided by one
#: subset test, not a loop over its keys.
_PLAIN: Final = frozenset(
    {
        "role",
        "content",
        "name",
        "tool_calls",
        "tool_call_id",
        "reasoning_content",
        "reasoning",
        "reasoning_details",
        "refusal",
        "audio",
        "function_call",
        "annotations",
        "prefix",
        "partial",
    }
)
_PLAIN_CALL: Final = frozenset({"id", "type", "function", "index"})


#: The rule's options (the record below lists them; read them through these).
KEEP: Option[list[str]] = Option(
    "keep",
    [],
    "bookkeeping keys kept anyway (gemini-openai: [extra_content], Gemini's thought signatures)",
)


def _keep(options: Mapping[str, Any]) -> frozenset[str]:
    value = KEEP.of(options)
    if not isinstance(value, list | tuple):
        return frozenset()
    return frozenset(name for name in value if isinstance(name, str))


def is_bookkeeping(key: Any) -> bool:
    """True for a message key this rule drops (before option ``keep``)."""
    return type(key) is str and (key in MESSAGE_KEYS or key.startswith(MESSAGE_PREFIXES))


def bookkeeping_fields(message: Any, keep: frozenset[str] = frozenset()) -> list[str]:
    """The dotted paths of the keys ``apply`` drops from ``message`` (empty for most)."""
    if type(message) is not dict:
        return []
    found: list[str] = []
    if not message.keys() <= _PLAIN:
        found = [k for k in message if is_bookkeeping(k) and k not in keep]
    calls = message.get("tool_calls")
    if type(calls) is list:
        for position, call in enumerate(calls):
            if type(call) is dict and not call.keys() <= _PLAIN_CALL:
                found.extend(
                    f"tool_calls.{position}.{k}" for k in call if k in CALL_KEYS and k not in keep
                )
    return found


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    keep = _keep(ctx.options)
    found: dict[int, list[str]] = {}
    for index, message in enumerate(messages):
        fields = bookkeeping_fields(message, keep)
        if fields:
            found[index] = fields
    if not found:
        return Outcome(messages)  # the common case: one pass, nothing built
    changes = tuple(
        Change(NAME, index, "dropped_fields", {"fields": fields}) for index, fields in found.items()
    )
    out = rewrite_at(messages, found, lambda index, message: _strip(message, found[index]))
    return Outcome(out, changes)


def _strip(message: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """A copy of ``message`` without ``fields``, copying only the calls that lose a key."""
    here = {f for f in fields if not f.startswith("tool_calls.")}
    by_call: dict[int, set[str]] = {}
    for f in fields:
        if f.startswith("tool_calls."):
            _, at, key = f.split(".", 2)
            by_call.setdefault(int(at), set()).add(key)
    out = {k: v for k, v in message.items() if k not in here}
    if by_call:
        calls = list(out["tool_calls"])
        for position, keys in by_call.items():
            calls[position] = {k: v for k, v in calls[position].items() if k not in keys}
        out["tool_calls"] = calls
    return out


RULE = Rule(
    name=NAME,
    summary="Drop an agent's bookkeeping keys from messages and tool calls.",
    defect="keys an agent stores for itself and no provider reads (`timestamp`, `api_content`, "
    "`tool_name`, `effect_disposition`, keys starting with `_`, `display_` or `codex_`; `call_id`, "
    '`response_item_id`, `extra_content` on tool calls): Moonshot/Kimi and Fireworks "Extra '
    "inputs are not permitted, field: 'messages[N].tool_name'\" (NousResearch/hermes-agent#47868), "
    "a strict gateway \"Unknown parameter: '_empty_recovery_synthetic'\", every later turn of the "
    "session failing the same way",
    repair="drop those keys, naming them in the log (never their values); option `keep` keeps some "
    "(gemini-openai keeps `extra_content`, Gemini 3's thought signatures); every other key, "
    "standard or not, is left (the per-role allowlist is `unknown-message-fields`). The keys are "
    "the agent's own notes",
    safety="safe",
    default=True,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.scan,
    woken_by=scan.on(scan.KEYS, scan.CALL_KEYS),
    introduces=frozenset(),  # it only drops keys no walk signal but KEYS and CALL_KEYS reads
    options=(KEEP,),
)
