"""unknown-message-fields: messages leave with only the keys the chat-completions schema knows.

What: a message with a known role keeps only the keys of its role's allowlist (``ALLOWED``) plus the
option ``allow``; every other key is dropped. Inside an assistant's ``tool_calls``, a function call
(``type`` ``"function"``, missing or null) keeps only ``id``, ``type`` and ``function``, and its
``function`` only ``name`` and ``arguments`` (plus ``allow`` at both levels); the option ``deny``
drops message keys even where the role allows them (Mistral knows ``name`` only on tool messages).
With ``drop_null`` (the default) a kept optional key whose value is ``null`` (``name: null``,
``tool_calls: null``, ``prefix: null``, an allowed extra) is dropped too; ``role``, ``content`` and
``tool_call_id`` are never dropped for being null (a null content or id is the content and pairing
rules' business). Messages with an unknown role (or none), entries that are no object, calls of
another type (``custom``) and calls or functions that are no object are left alone. The change names
the dropped keys (paths like ``tool_calls.0.index`` inside calls), never their values.
Why: strict gateways reject any key they do not know, and agents stamp their own bookkeeping on the
messages they replay (docs/providers.md#hermes-e16: ``_…`` markers, ``timestamp``,
``tool_name``, ``api_content``, ``display_*``, ``finish_reason``, Gemini ``extra_content`` on calls
sent to a non-Gemini target; "every subsequent request … fails identically"). Groq: "'messages.0' :
for 'role:user' the following must be satisfied[('messages.0' : property 'timestamp' is
unsupported)]" (docs/providers.md#groq-fields, ServiceStack/llms#17); Azure OpenAI: "Additional
properties are not allowed ('parsed', 'refusal' were unexpected) - 'messages.2'"
(docs/providers.md#azure-fields, microsoft/azurechat#503); Mistral 422 ``extra_forbidden`` "Extra
inputs are not permitted", even for ``name`` and ``tool_calls`` on a user message when null
(docs/providers.md#mistral-fields, Gage-Technologies/mistral-go#2; mistral-common's UserMessage,
SystemMessage and AssistantMessage have no ``name``); Cerebras "property '…' is unsupported"
(docs/providers.md#cerebras-fields). Reasoning fields replayed from a thinking model are the most
common case: Groq, Cerebras, Mistral and vLLM's mistral mode reject
``reasoning_content``/``reasoning`` (docs/providers.md#mistral-reasoning, janhq/jan#8136,
Kilo-Org/kilocode#10375, charmbracelet/crush#1590, vllm-project/vllm#20973); profiles whose upstream
needs ``reasoning_content`` back (DeepSeek, Kimi) keep it with ``allow``. The allowlist is section
2's ``strip_unknown_fields`` (docs/providers.md#fields "Allowlist per role", inferred), with
Mistral's and DeepSeek's assistant ``prefix``. Safety: safe for the upstreams it is meant for: they
reject the request while the keys are there, and none of them reads such a key. Whatever an upstream
does accept and use (``audio``, ``reasoning_content``) must be named in ``allow``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at
from rules.vocabulary import CHAT_CALL_FIELDS, CHAT_FIELDS, CHAT_FUNCTION_FIELDS

NAME = "unknown-message-fields"

_BASE: Final = frozenset({"role", "content", "name"})

#: The keys each known role may carry (docs/providers.md#mistral-fields and
#: docs/providers.md#repairs, inferred; Mistral's and DeepSeek's ``prefix`` on assistants).
#: ``developer`` and the legacy ``function`` role are OpenAI's own and have system's and function's
#: shapes.
ALLOWED: Final = CHAT_FIELDS
#: The keys of a function tool call, and of its ``function``.
CALL_KEYS: Final = CHAT_CALL_FIELDS
FUNCTION_KEYS: Final = CHAT_FUNCTION_FIELDS
#: Keys never dropped for being null: the role, and what other rules repair (content, ids).
REQUIRED: Final = frozenset({"role", "content", "tool_call_id"})


#: Where a dropped key sits: ``("timestamp",)``, ``("tool_calls", 0, "index")``,
#: ``("tool_calls", 0, "function", "x")``.
Path = tuple[Any, ...]


#: The rule's options (the record below lists them; read them through these).
ALLOW: Option[list[str]] = Option(
    "allow",
    [],
    "extra key names kept on every message, call and function (e.g. "
    '["reasoning_content"] for DeepSeek and Kimi)',
)
DENY: Option[list[str]] = Option(
    "deny",
    [],
    'message keys dropped even where the role allows them (Mistral: ["name"]; never '
    "role, content or tool_call_id)",
)
DROP_NULL = Option(
    "drop_null",
    True,
    "also drop optional keys whose value is null (never role, content or tool_call_id)",
)


@dataclass(frozen=True, slots=True)
class Settings:
    """The rule's (and the check's) options, read once."""

    #: Extra keys kept at every level (message, call, function).
    allow: frozenset[str] = frozenset()
    #: Message keys dropped even where the role's allowlist has them (never ``REQUIRED``).
    deny: frozenset[str] = frozenset()
    drop_null: bool = True

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Settings:
        """From rule or check options, tolerant of a missing or odd value."""
        return cls(
            _names(ALLOW.of(options)),
            _names(DENY.of(options)) - REQUIRED,
            bool(DROP_NULL.of(options)),
        )

    def allowed(self, role: Any) -> frozenset[str] | None:
        """The keys a message with ``role`` keeps, or ``None`` for a role left alone."""
        allowed = ALLOWED.get(role) if type(role) is str else None
        if allowed is None:
            return None
        return (allowed | self.allow) - self.deny if self.allow or self.deny else allowed


def _names(value: Any) -> frozenset[str]:
    if not isinstance(value, list | tuple | set | frozenset):
        return frozenset()
    return frozenset(name for name in value if isinstance(name, str))


def unknown_fields(message: Any, settings: Settings) -> list[Path]:
    """The keys ``apply`` drops from ``message``, in key order (paths inside calls); empty for a
    clean message or one this rule leaves alone."""
    if type(message) is not dict:
        return []
    role = message.get("role")
    allowed = settings.allowed(role)
    if allowed is None:
        return []
    allow = settings.allow
    found = _extra(message, allowed, settings.drop_null, ())
    calls = message.get("tool_calls")
    if role == "assistant" and type(calls) is list and ("tool_calls",) not in found:
        for position, call in enumerate(calls):
            found.extend(_call_fields(call, allow, ("tool_calls", position)))
    return found


def _extra(
    obj: dict[Any, Any], allowed: frozenset[str], drop_null: bool, prefix: Path
) -> list[Path]:
    if not drop_null and obj.keys() <= allowed:
        return []  # the common case inside calls, decided by one set comparison
    return [
        (*prefix, key)
        for key, value in obj.items()
        if key not in allowed or (drop_null and value is None and key not in REQUIRED)
    ]


def _call_fields(call: Any, allow: frozenset[str], prefix: Path) -> list[Path]:
    if type(call) is not dict or call.get("type") not in (None, "function"):
        return []  # junk is another rule's; a custom call has other keys
    found = _extra(call, CALL_KEYS | allow, False, prefix)
    function = call.get("function")
    if type(function) is dict and (*prefix, "function") not in found:
        found.extend(_extra(function, FUNCTION_KEYS | allow, False, (*prefix, "function")))
    return found


def dotted(path: Path) -> str:
    """A path as the change and the check name it: ``tool_calls.0.index``."""
    return ".".join(str(part) for part in path)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    settings = Settings.of(ctx.options)
    found: dict[int, list[Path]] = {}
    for index, message in enumerate(messages):
        paths = unknown_fields(message, settings)
        if paths:
            found[index] = paths
    if not found:
        return Outcome(messages)  # the common case: nothing built
    changes = tuple(
        Change(NAME, index, "dropped_fields", {"fields": [dotted(p) for p in paths]})
        for index, paths in found.items()
    )
    out = rewrite_at(messages, found, lambda index, message: _strip(message, found[index]))
    return Outcome(out, changes)


def _strip(obj: dict[Any, Any], paths: Iterable[Path]) -> dict[Any, Any]:
    """A copy of ``obj`` without the keys at ``paths`` (copying only the dicts and lists on the
    way to them)."""
    here: set[Any] = set()
    below: dict[Any, list[Path]] = {}
    for path in paths:
        if len(path) == 1:
            here.add(path[0])
        else:
            below.setdefault(path[0], []).append(path[1:])
    out = {k: v for k, v in obj.items() if k not in here}
    for key, rests in below.items():
        if key == "tool_calls":
            calls = list(out[key])
            by_position: dict[int, list[Path]] = {}
            for rest in rests:
                by_position.setdefault(rest[0], []).append(rest[1:])
            for position, inner in by_position.items():
                calls[position] = _strip(calls[position], inner)
            out[key] = calls
        else:
            out[key] = _strip(out[key], rests)
    return out


RULE = Rule(
    name=NAME,
    summary="Drop message keys outside each role's allowlist (and null optional keys).",
    defect="message keys a strict upstream does not know, stamped by agents and SDKs (`timestamp`, "
    "`refusal`, `parsed`, `reasoning_content`, `extra_content` on calls, `name: null`): Groq "
    '"property \'timestamp\' is unsupported" (ServiceStack/llms#17), Azure "Additional properties '
    "are not allowed ('parsed', 'refusal' were unexpected)\" (microsoft/azurechat#503), Mistral "
    "422 `extra_forbidden` (Gage-Technologies/mistral-go#2), Cerebras \"property '...' is "
    'unsupported" (docs/providers.md#fields)',
    repair="keep only each role's keys (system/user: role, content, name; assistant: + tool_calls, "
    "prefix; tool: role, content, tool_call_id, name), a call's id/type/function and its "
    "function's name/arguments; option `allow` keeps more, `deny` drops allowed ones (Mistral: "
    "`name`), `drop_null` also drops null optional keys (never role, content or tool_call_id); the "
    "log names the keys, never values; a message with an unknown role is left to `unknown-roles`. "
    "Safe for the upstreams that refuse these keys: none of them reads one",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    options=(
        ALLOW,
        DENY,
        DROP_NULL,
    ),
)
