"""function-names: function names the upstream accepts, one map for the request and its history.

What: a function name that does not match the upstream's pattern is rewritten through one
deterministic per-request map, alike in the request's ``tools[].function.name``, the history's
``tool_calls[].function.name``, tool messages' ``name`` and ``tool_choice.function.name``.
Option ``pattern``: ``strict`` (default, ``^[a-zA-Z0-9_-]{1,64}$``, Mistral and OpenAI): each
other character becomes ``_`` (``my.tool`` becomes ``my_tool``); ``gemini``
(``^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$``): dots stay, and a name that does not start with a letter
or ``_`` gets a leading ``_``. A name longer than 64 keeps its first 55 characters, then ``_``
and 8 base62 characters of its sha256. An empty name becomes option ``empty``
(``invalid_tool_call``, as hermes R18 does). A new name already taken (by a name kept, or by an
earlier new one) is cut to 55 characters and suffixed with a hash of the original and an
attempt counter, in order of first appearance (tools, then messages, then tool_choice), so the
map is one-to-one. Names that fit are kept as they are; non-string names are left alone.
Out of scope: the model's reply will call the new name (``my_tool``), and mapping names back
in responses is not done here; the client must accept the new name (or a later response-side
step must map it back). The legacy ``functions``/``function_call`` fields are not rewritten.
Why: OpenAI "Invalid 'messages[9].tool_calls[0].function.name': string does not match pattern.
Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'." (same for
``tools[0].function.name``; docs/providers.md#openai-pairing, mcp-use/mcp-use#90,
CherryHQ/cherry-studio
#2895: MCP names with dots); mistral-common "Function name was {name} but must be a-z, A-Z, 0-9,
or contain underscores and dashes, with a maximum length of 64."
(docs/providers.md#mistral-pairing); Gemini "Invalid function name. Must start with a letter or an
underscore. ..." (docs/providers.md#gemini-pairing, google-gemini/gemini-cli#7878); hermes R37
(#51944: ``multi_tool_use.parallel`` failed every later request). Safety: unsafe. The model sees
(and will answer with) the new name, not the one the client defined; history and tools stay
consistent with each other.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any, Final

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried
from rules.engine.ids import Renames, digest62, fresh_from
from rules.engine.messages import rewrite_at

NAME = "function-names"

MAX_LENGTH: Final = 64
PATTERNS: Final = ("strict", "gemini")
_VALID: Final = {
    "strict": re.compile(r"[a-zA-Z0-9_-]{1,64}"),
    "gemini": re.compile(r"[a-zA-Z_][a-zA-Z0-9_.-]{0,63}"),
}
_INVALID_CHAR: Final = {
    "strict": re.compile(r"[^a-zA-Z0-9_-]"),
    "gemini": re.compile(r"[^a-zA-Z0-9_.-]"),
}
_FIRST: Final = re.compile(r"[a-zA-Z_]")
_CUT: Final = MAX_LENGTH - 9  # room for "_" and 8 hash characters


#: The rule's options (the record below lists them; read them through these).
PATTERN = Option(
    "pattern",
    "strict",
    "strict: ^[a-zA-Z0-9_-]{1,64}$ (Mistral, OpenAI); gemini: ^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$",
    PATTERNS,
)
EMPTY = Option("empty", "invalid_tool_call", "the name an empty function name becomes")


def conforms(name: str, pattern: str) -> bool:
    return _VALID[pattern].fullmatch(name) is not None


def coerce(name: str, attempt: int = 0, *, pattern: str, empty: str) -> str:
    """The new name for ``name`` at collision ``attempt`` (0 first); always matches ``pattern``."""
    base = _INVALID_CHAR[pattern].sub("_", name if name else empty) or "invalid_tool_call"
    if pattern == "gemini" and not _FIRST.match(base):
        base = "_" + base
    if attempt == 0 and len(base) <= MAX_LENGTH:
        return base
    return f"{base[:_CUT]}_{digest62(name, attempt)[:8]}"


def _function(holder: Any) -> dict[str, Any] | None:
    function = holder.get("function") if type(holder) is dict else None
    return function if type(function) is dict else None


def _name(holder: Any) -> str | None:
    """The string ``function.name`` of a tool, call or tool_choice, else ``None``."""
    function = _function(holder)
    name = function.get("name") if function is not None else None
    return name if type(name) is str else None


def _message_names(message: Any) -> Iterator[str]:
    if type(message) is not dict:
        return
    role = message.get("role")
    if role == "assistant":
        calls = message.get("tool_calls")
        for call in calls if type(calls) is list else ():
            name = _name(call)
            if name is not None:
                yield name
    elif role == "tool":
        name = message.get("name")
        if type(name) is str:
            yield name


def _request_tools(request: Any) -> list[Any]:
    tools = request.get("tools") if hasattr(request, "get") else None
    return tools if type(tools) is list else []


def _tool_choice_name(request: Any) -> str | None:
    return _name(request.get("tool_choice")) if hasattr(request, "get") else None


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    pattern = PATTERN.of(ctx)
    if pattern not in PATTERNS:
        return Outcome(messages)
    empty = EMPTY.of(ctx)
    empty = empty if type(empty) is str else "invalid_tool_call"
    request = ctx.request
    renames = Renames(lambda name: conforms(name, pattern))
    tools = _request_tools(request)
    renames.see_all(name for tool in tools if (name := _name(tool)) is not None)
    suspects = [
        index
        for index, message in enumerate(messages)
        if renames.see_all(list(_message_names(message)))  # every name is seen
    ]
    choice = _tool_choice_name(request)
    if choice is not None:
        renames.see(choice)
    if not renames:
        return Outcome(messages)  # the common case: every name already fits

    mapping = renames.mapping(
        fresh_from(partial(coerce, pattern=pattern, empty=empty), renames.kept())
    )
    changes: list[Change] = []

    def fix(index: int, message: Any) -> Any:
        if message.get("role") == "tool":
            old = message["name"]
            changes.append(Change(NAME, index, "renamed_name", {"from": old, "to": mapping[old]}))
            return {**message, "name": mapping[old]}
        renamed: dict[str, str] = {}
        calls = [_renamed(call, mapping, renamed) for call in message["tool_calls"]]
        changes.append(Change(NAME, index, "renamed_functions", {"names": renamed}))
        return {**message, "tool_calls": calls}

    out = rewrite_at(messages, suspects, fix)
    fields = _renamed_request(request, tools, choice, mapping, changes)
    return Outcome(out, tuple(changes), request=fields)


def resume(
    messages: list[Any], ctx: RuleContext, before: bool | None
) -> tuple[Outcome, bool] | None:
    """The rule over ``messages`` after a list where it renamed nothing (``before``; ``None``:
    the list's start), and whether it renamed nothing so far. A name the map renames is renamed
    in the request's fields too, and the map is one over the whole request: once anything is
    renamed, it declines (the rule runs whole); a new turn it leaves alone after a list it left
    alone is left alone by the whole run."""
    if before is None:
        outcome = apply(messages, ctx)
        return outcome, outcome.messages is messages and not outcome.changes
    if not before:
        return None
    outcome = apply(messages, ctx)
    if outcome.messages is not messages or outcome.changes or outcome.request is not None:
        return None
    return outcome, True


def _renamed_request(
    request: Mapping[str, Any],
    tools: list[Any],
    choice: str | None,
    mapping: dict[str, str],
    changes: list[Change],
) -> dict[str, Any] | None:
    """The request's ``tools`` and ``tool_choice`` with the names ``mapping`` renames (``None``:
    neither changed)."""
    fields: dict[str, Any] | None = None
    renamed_tools: dict[str, str] = {}
    new_tools = [_renamed(tool, mapping, renamed_tools) for tool in tools]
    if renamed_tools:
        fields = {**request, "tools": new_tools}
        changes.append(Change(NAME, -1, "renamed_tools", {"names": renamed_tools}))
    if choice is not None and choice in mapping:
        renamed_choice: dict[str, str] = {}
        new_choice = _renamed(request["tool_choice"], mapping, renamed_choice)
        fields = {**(request if fields is None else fields), "tool_choice": new_choice}
        detail = {"from": choice, "to": mapping[choice]}
        changes.append(Change(NAME, -1, "renamed_tool_choice", detail))
    return fields


def _renamed(holder: Any, mapping: dict[str, str], renamed: dict[str, str]) -> Any:
    """``holder`` (a tool, call or tool_choice) with its function renamed, or itself."""
    old = _name(holder)
    if old is None or old not in mapping:
        return holder
    renamed[old] = mapping[old]
    function = _function(holder)
    assert function is not None
    return {**holder, "function": {**function, "name": mapping[old]}}


RULE = Rule(
    name=NAME,
    summary="Rewrite function names to the upstream's pattern in tools, history and tool_choice.",
    defect="function names outside `^[a-zA-Z0-9_-]{1,64}$` (MCP names with dots, long names): "
    'OpenAI "string does not match pattern. Expected a string that matches the pattern '
    "'^[a-zA-Z0-9_-]+$'\" (mcp-use/mcp-use#90), Mistral \"Function name was X but must be a-z, "
    'A-Z, 0-9, or contain underscores and dashes, with a maximum length of 64." (mistral-common), '
    'Gemini "Invalid function name. Must start with a letter or an underscore." '
    "(google-gemini/gemini-cli#7878; docs/providers.md#openai-pairing)",
    repair="request level too: one deterministic map over `tools`, history `tool_calls`, tool "
    "messages' `name` and `tool_choice` (`my.tool` becomes `my_tool`; over 64 characters cut with "
    "a hash suffix; collisions suffixed); option `pattern: gemini` keeps dots and puts `_` before "
    "a name that does not start with a letter or `_`; an empty name becomes option `empty`. "
    "Unsafe: names in the model's reply are not mapped back, so the model calls the new name, "
    "which the client may not know",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=carried(resume),  # while nothing is renamed
    options=(
        PATTERN,
        EMPTY,
    ),
    reads_request=True,
)
