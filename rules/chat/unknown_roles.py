"""unknown-roles: no message with a role the provider does not know reaches it.

What: a message whose ``role`` is a string outside option ``roles`` (the roles the profile's
provider accepts) and outside option ``keep`` (roles an operator lets through anyway) is
removed; the Change names its role, its index and its content's length (the content itself only
with ``log_content``). Entries that are no object, and messages whose role is missing or not a
string, are left alone: they are not a role the provider refuses but no message at all, which
the provider's own error names better than a silent drop would (the ``unknown_role`` check
counts string roles only, and the other rules tolerate such junk in place).
Why: agents persist their own records in the transcript and some replay them: hermes-agent's
``session_meta`` rows leaked into the payload (docs/providers.md#hermes-r15, #4715:
hermes drops every role outside {system, user, assistant, tool, function, developer}). Every
provider deserializes ``role`` as a closed enum: DeepSeek "messages[0].role: unknown variant
`developer`, expected one of `system`, `user`, `assistant`, `tool`"
(docs/providers.md#deepseek-roles, earendil-works/pi#1048; the same serde error for `function`,
crazyyanchao/llmcompiler#1), Qwen and Kimi "developer is not one of ['system', 'assistant', 'user',
'tool', 'function']" (docs/providers.md#kimi-roles, earendil-works/pi#5117, can1357/oh-my-pi#843),
OpenAI "Invalid value: 'tooool'. Supported values are: 'system', 'assistant', 'user', 'function',
'tool', and 'developer'." (code invalid_value, param messages[N].role). One such row makes every
later request of the session fail. It runs after ``developer-role``, which turns ``developer`` into
``system`` where the provider knows only that.
With option ``action: rename`` such a message is kept under the accepted role nearest in
meaning (``NEAREST``: ``model`` and ``ai`` an assistant, ``human`` a user, a ``function`` or
``ipython`` result a tool message when it names its call, else a user message), its text and
all; one with no near role accepted becomes a user message.
Safety: by action: a removed message is ``lossy`` (it no longer reaches the model; a record no
provider can read, the request fails while it is there; its length is logged); a renamed one is
``unsafe`` (the model reads it under another role).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from rules import vocabulary
from rules.chat import scan
from rules.chat.message_fields import role_set
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import dropped_content, rewrite_at

NAME = "unknown-roles"

#: OpenAI's roles (its 400 lists them): the default, for providers that copy its schema.
OPENAI_ROLES: Final = ("system", "developer", "user", "assistant", "tool", "function")
#: DeepSeek's serde enum (docs/providers.md#deepseek-roles, earendil-works/pi#1048).
DEEPSEEK_ROLES: Final = vocabulary.DEEPSEEK_ROLES
#: Qwen (DashScope) and Kimi (docs/providers.md#kimi-roles, earendil-works/pi#5117,
#: can1357/oh-my-pi#843).
QWEN_ROLES: Final = ("system", "assistant", "user", "tool", "function")
#: A role longer than this is cut in the log (a hostile client could send a megabyte).
_ROLE_LOG_LIMIT: Final = 64


#: The rule's options (the record below lists them; read them through these).
ROLES = Option("roles", list(OPENAI_ROLES), "the roles the provider accepts")
KEEP: Option[list[str]] = Option(
    "keep", [], "roles let through although the provider's list lacks them"
)
ACTION = Option(
    "action",
    "drop",
    "What happens to a message whose role the provider does not know: `drop`, or `rename` "
    "(kept under the accepted role nearest in meaning, else as a user message).",
    choices=("drop", "rename"),
)

#: A role the provider refuses -> the roles nearest in meaning, in order (the first accepted one
#: is taken; ``user`` when none is).
NEAREST: Final = {
    "developer": ("system", "user"),
    "system": ("developer", "user"),
    "model": ("assistant",),
    "ai": ("assistant",),
    "bot": ("assistant",),
    "chatbot": ("assistant",),
    "human": ("user",),
    "function": ("tool", "user"),
    "ipython": ("tool", "user"),
    "tool": ("function", "user"),
}


def nearest(message: dict[str, Any], accepted: frozenset[str]) -> str | None:
    """The accepted role nearest to ``message``'s (a tool role only for a message that names its
    call), ``None`` if not even ``user`` is accepted."""
    for candidate in NEAREST.get(message["role"].lower(), ()):
        if candidate in ("tool", "function") and "tool_call_id" not in message:
            continue
        if candidate in accepted:
            return candidate
    return "user" if "user" in accepted else None


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    # An empty or malformed list (a library caller's options are not validated) would remove
    # every message: OpenAI's roles stand in for it.
    accepted = role_set(ROLES.of(ctx)) or frozenset(OPENAI_ROLES)
    accepted |= role_set(KEEP.of(ctx))
    suspects = [
        index
        for index, message in enumerate(messages)
        if type(message) is dict
        and type(message.get("role")) is str  # a junk role may be unhashable
        and message["role"] not in accepted
    ]
    if not suspects:
        return Outcome(messages)  # the common case: every role is known
    if ACTION.of(ctx) == "rename":
        renamed = _renamed(messages, suspects, accepted)
        if renamed is not None:
            return renamed
    changes = tuple(
        Change(
            NAME,
            index,
            "removed_message",
            {
                "role": messages[index]["role"][:_ROLE_LOG_LIMIT],
                **dropped_content(messages[index].get("content"), ctx),
            },
        )
        for index in suspects
    )
    return Outcome(rewrite_at(messages, suspects, lambda index, message: None), changes)


def _renamed(messages: list[Any], suspects: list[int], accepted: frozenset[str]) -> Outcome | None:
    """Each suspect under its nearest accepted role (``None``: some has none: drop them all)."""
    roles = {index: nearest(messages[index], accepted) for index in suspects}
    if any(role is None for role in roles.values()):
        return None
    changes = tuple(
        Change(
            NAME,
            index,
            "renamed_role",
            {"from": messages[index]["role"][:_ROLE_LOG_LIMIT], "to": roles[index]},
        )
        for index in suspects
    )
    out = rewrite_at(messages, suspects, lambda index, message: {**message, "role": roles[index]})
    return Outcome(out, changes)


def _wakes(options: Mapping[str, Any]) -> frozenset[str] | None:
    """The walk's odd-role signal, when the accepted roles hold the four chat roles (the walk
    names only the others); else ``None``: the rule always runs its own prescan."""
    accepted = role_set(ROLES.of(options)) or frozenset(OPENAI_ROLES)
    return frozenset({scan.ODD_ROLE}) if accepted >= scan.ROLES else None


RULE = Rule(
    name=NAME,
    summary="Remove messages whose role the provider does not know.",
    defect="a message whose role the provider does not know (an agent's `session_meta` record, "
    'NousResearch/hermes-agent#4715; a legacy `function` message for DeepSeek): DeepSeek "unknown '
    'variant `session_meta`, expected one of `system`, `user`, `assistant`, `tool`" '
    "(earendil-works/pi#1048), Qwen and Kimi \"is not one of ['system', 'assistant', 'user', "
    "'tool', 'function']\" (earendil-works/pi#5117), OpenAI \"Invalid value: '...'. Supported "
    "values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.\" "
    "(docs/providers.md#roles)",
    repair="remove it, logging its role, index and content length (the text with `log_content: "
    "true`); option `roles` is the provider's list (each profile sets its own, the list its "
    "`unknown_role` check uses), `keep` lets more roles through; an entry with no string role is "
    "left alone. Lossy: the record no longer reaches the model, but no provider can read it; with "
    "`action: rename` it is kept under the accepted role nearest in meaning (unsafe)",
    safety={
        "renamed_role": "unsafe",
        "removed_message": "lossy",
    },
    default=True,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.scan,
    woken_by=_wakes,
    options=(
        ROLES,
        KEEP,
        ACTION,
    ),
)
