"""Request-level repairs: reading and rewriting a request's own fields, copy on write.

A rule with ``Rule.reads_request`` gets the request's top-level fields (``model``, ``tools``,
``tool_choice``, ``temperature``, ...) in ``RuleContext.request``, read-only, and returns the new
ones in ``Outcome.request``: a fresh dict built by ``with_fields``, sharing every value it does not
replace (the pipeline hands it to the next rule; ``rules/providers/sanitize.py`` writes it back only
when a rule reported a change, so a clean request still leaves as its original bytes). The
predicates over tool definitions live here, in the engine, so the chat rules and the Messages rules
read them alike; each API says where a tool's name is (chat's ``tools[].function.name``:
``rules.chat.message_fields.chat_tool_name``; Messages' ``tools[].name``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rules.engine.base import Change, Outcome

#: A request field a rule removes: ``with_fields(request, {"tool_choice": DROP})``.
DROP: Any = object()


def with_fields(request: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A new request: ``request``'s fields in their order, each key of ``changes`` replaced (or
    removed when its value is ``DROP``; a new key goes last). ``request`` is never written."""
    fields = {key: changes.get(key, value) for key, value in request.items()}
    for key, value in changes.items():
        fields.setdefault(key, value)
    return {key: value for key, value in fields.items() if value is not DROP}


def repeated_names(names: Iterable[str | None]) -> list[int]:
    """The positions whose name an earlier position already had (the first definition of a
    name is the one kept: decolua/9router PR#3333). ``None`` (no name) never repeats."""
    seen: set[str] = set()
    repeats: list[int] = []
    for position, name in enumerate(names):
        if name is None:
            continue
        if name in seen:
            repeats.append(position)
        seen.add(name)
    return repeats


def drop_repeated_tools(
    messages: list[Any], request: Mapping[str, Any], name_of: Callable[[Any], str | None], rule: str
) -> Outcome:
    """The request without each later definition of a tool name (``name_of`` reads a tool's
    name where its API keeps it; the first definition of each name stays), and a
    ``dropped_tools`` Change: the positions and names removed, how many, and how many
    ``differing`` from the definition kept."""
    tools = tool_list(request)
    names = [name_of(tool) for tool in tools]
    repeats = repeated_names(names)
    if not repeats:
        return Outcome(messages)
    first: dict[str, Any] = {}
    for position, name in enumerate(names):
        if name is not None:
            first.setdefault(name, tools[position])
    removed = [(position, name) for position in repeats if (name := names[position]) is not None]
    detail = {
        "positions": repeats,
        "names": sorted({name for _, name in removed}),
        "count": len(repeats),
        "differing": sum(1 for position, name in removed if tools[position] != first[name]),
    }
    dropped = set(repeats)
    kept = [tool for position, tool in enumerate(tools) if position not in dropped]
    change = Change(rule, -1, "dropped_tools", detail)
    return Outcome(messages, (change,), request=with_fields(request, {"tools": kept}))


def empty_schema(value: Any, *, absent: bool) -> bool:
    """A tool's parameter schema counts as empty: absent (when ``absent`` says the key is
    missing), ``null`` or ``{}``."""
    return absent or value is None or value == {}


#: The type of a client tool each API's server-tools repair keeps (an entry without a type is
#: one too): Responses' function tools, Messages' optional ``custom`` tag.
CLIENT_TOOL_TYPES: Mapping[str, str] = {"responses": "function", "messages": "custom"}


def foreign_tool(tool: Any, client: str, keep: Any = ()) -> bool:
    """Whether a ``tools`` entry is one the server-tools repairs remove (``messages-server-tools``,
    ``responses-server-tools``, their checks and recovery's reading of a tools path): not an
    object, or of a string ``type`` other than ``client`` (``CLIENT_TOOL_TYPES``) and not in
    ``keep``. An entry without a type is a client tool."""
    if type(tool) is not dict:
        return True
    kind = tool.get("type")
    return type(kind) is str and kind != client and not (isinstance(keep, list) and kind in keep)


def tool_list(request: Mapping[str, Any]) -> Sequence[Any]:
    """The request's ``tools`` if it is a list, else ``[]``."""
    tools = request.get("tools")
    return tools if type(tools) is list else []
