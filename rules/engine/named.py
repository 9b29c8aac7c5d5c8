"""Repairs of what a refusal names, shared by the three APIs' rules: a request parameter, a key of a
message or an item, a request value. Each rule reads the names from its options (recovery fills them
from the refusal, rules/providers/named_repairs.py; an operator may set them too) and acts on
nothing else; copy on write, like every rule.

A value is logged only when it cannot be text the client wrote (a number, a boolean, ``null``,
a short word such as ``auto`` or ``json_object``), else by its type and length; with
``log_content``, as it is (capped).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from rules.engine.base import Change, Outcome
from rules.engine.request import DROP, with_fields

#: A string value logged as it is: a word of at most 32 characters (an enum value).
_WORDLIKE = re.compile(r"[A-Za-z0-9_.:-]{0,32}")
#: How many characters of a value ``log_content`` logs.
MAX_LOGGED_CHARS = 200


def loggable(value: str) -> bool:
    """Whether a string value is a word no client writes as text (an enum value such as ``auto``
    or ``json_object``): logged as it is, where anything longer is logged only with
    ``log_content``."""
    return _WORDLIKE.fullmatch(value) is not None


def described(value: Any, *, log_content: bool = False) -> dict[str, Any]:
    """What a log may say of a dropped or replaced value (never text the client wrote, unless
    the route logs content)."""
    if value is None or isinstance(value, bool | int | float):
        return {"value": value}
    if isinstance(value, str):
        if log_content or loggable(value):
            return {"value": value[:MAX_LOGGED_CHARS]}
        return {"type": "string", "length": len(value)}
    if isinstance(value, dict):
        return {"type": "object", "keys": sorted(str(key) for key in value)[:16]}
    if isinstance(value, list):
        return {"type": "array", "length": len(value)}
    return {"type": type(value).__name__}


def names(value: Any) -> list[str]:
    """An option holding names: its strings, in order (anything else in it is ignored)."""
    return [name for name in value if isinstance(name, str)] if isinstance(value, list) else []


def renames(value: Any) -> dict[str, str]:
    """An option mapping old names to new ones: its string pairs."""
    if not isinstance(value, Mapping):
        return {}
    return {old: new for old, new in value.items() if isinstance(old, str) and isinstance(new, str)}


def drop_parameters(
    messages: list[Any],
    request: Mapping[str, Any],
    *,
    rule: str,
    drop: Iterable[str],
    rename: Mapping[str, str],
    protected: Collection[str],
    log_content: bool,
) -> Outcome:
    """The request without the parameters in ``drop`` and with those in ``rename`` under their
    new names (never one of ``protected``, never over a parameter the request already has):
    one ``dropped_parameter`` or ``renamed_parameter`` Change each, naming it and its value
    (``described``)."""
    fields: dict[str, Any] = {}
    changes: list[Change] = []
    for name in drop:
        if name in request and name not in protected and name not in fields:
            fields[name] = DROP
            detail = {"parameter": name, **described(request[name], log_content=log_content)}
            changes.append(Change(rule, -1, "dropped_parameter", detail))
    for old, new in rename.items():
        if old in request and old not in protected and new not in protected and new not in request:
            fields[old] = DROP
            fields[new] = request[old]
            detail = {"parameter": old, "to": new, **described(request[old], log_content=False)}
            changes.append(Change(rule, -1, "renamed_parameter", detail))
    if not changes:
        return Outcome(messages)
    return Outcome(messages, tuple(changes), request=with_fields(request, fields))


def without_keys(
    items: list[Any],
    keys: Collection[str],
    *,
    rule: str,
    nested: Callable[[dict[str, Any]], tuple[dict[str, Any], list[str]]] | None = None,
) -> Outcome:
    """``items`` without ``keys`` on each object item, and what ``nested`` drops inside one
    (its own copy and the dotted keys it dropped): one ``dropped_keys`` Change per item
    changed, naming the keys, never their values."""
    out: list[Any] | None = None
    changes: list[Change] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        dropped = [key for key in item if key in keys]
        new = {key: value for key, value in item.items() if key not in keys} if dropped else item
        if nested is not None:
            new, inner = nested(new)
            dropped += inner
        if not dropped:
            continue
        if out is None:
            out = list(items)
        out[index] = new
        changes.append(Change(rule, index, "dropped_keys", {"keys": dropped}))
    return Outcome(items) if out is None else Outcome(out, tuple(changes))


def in_list(
    container: dict[str, Any], field: str, keys: Collection[str], label: str
) -> tuple[dict[str, Any], list[str]]:
    """``container`` with ``keys`` dropped from each object of its list ``field`` (a copy, if
    any was), and the dropped keys as ``<label>.<position>.<key>``."""
    values = container.get(field)
    if not isinstance(values, list) or not keys:
        return container, []
    dropped: list[str] = []
    rebuilt: list[Any] = []
    for position, value in enumerate(values):
        if isinstance(value, dict) and any(key in value for key in keys):
            dropped += [f"{label}.{position}.{key}" for key in value if key in keys]
            rebuilt.append({key: inner for key, inner in value.items() if key not in keys})
        else:
            rebuilt.append(value)
    if not dropped:
        return container, []
    return {**container, field: rebuilt}, dropped


def replace_values(
    messages: list[Any],
    request: Mapping[str, Any],
    *,
    rule: str,
    replace: Any,
) -> Outcome:
    """The request with each dotted field of option ``replace`` (``{"thinking.type":
    {"enabled": "adaptive"}}``) that holds one of the values it maps set to the value mapped:
    one ``replaced_value`` Change each, naming the field and both values (words only: see
    ``described``)."""
    if not isinstance(replace, Mapping):
        return Outcome(messages)
    fields: dict[str, Any] = {}
    changes: list[Change] = []
    for path, table in replace.items():
        if not isinstance(path, str) or not isinstance(table, Mapping):
            continue
        steps = path.split(".")
        current: Any = {**request, **fields}
        found = _at(current, steps)
        kind = (
            "{object}"
            if isinstance(found, dict)
            else "{array}"
            if isinstance(found, list)
            else None
        )
        if kind is not None and kind in table:  # a value of a refused type, whatever it holds
            new = table[kind]
        elif isinstance(found, str | int | float | bool) and found in table:
            new = table[found]
        else:
            continue
        if new == found:
            continue
        fields[steps[0]] = _set(current[steps[0]], steps[1:], new)
        was = kind or described(found).get("value")
        now = described(new).get("value")
        changes.append(Change(rule, -1, "replaced_value", {"field": path, "was": was, "now": now}))
    if not changes:
        return Outcome(messages)
    return Outcome(messages, tuple(changes), request=with_fields(request, fields))


def _at(value: Any, steps: list[str]) -> Any:
    for step in steps:
        if not isinstance(value, dict) or step not in value:
            return None
        value = value[step]
    return value


def _set(value: Any, steps: list[str], new: Any) -> Any:
    """``value`` with ``new`` at ``steps`` (copies of the objects on the way; the caller checked
    the path exists)."""
    if not steps:
        return new
    return {**value, steps[0]: _set(value[steps[0]], steps[1:], new)}


#: What makes a tool definition: never named away.
_TOOL_KEYS = frozenset({"type", "name", "function", "description", "parameters", "input_schema"})


def without_tool_keys(
    messages: list[Any], request: Mapping[str, Any], *, rule: str, keys: Iterable[str]
) -> Outcome:
    """The request with ``keys`` removed from every tool of ``tools`` and from its
    ``function`` object (chat's shape): one ``dropped_tool_keys`` Change naming the keys and
    the tools' positions."""
    drop = frozenset(keys) - _TOOL_KEYS
    tools = request.get("tools")
    if not drop or not isinstance(tools, list):
        return Outcome(messages)
    rebuilt: list[Any] = []
    positions: list[int] = []
    dropped: set[str] = set()
    for position, tool in enumerate(tools):
        if not isinstance(tool, dict):
            rebuilt.append(tool)
            continue
        new = {key: value for key, value in tool.items() if key not in drop}
        dropped |= set(tool) & drop
        function = tool.get("function")
        if isinstance(function, dict) and set(function) & drop:
            dropped |= set(function) & drop
            new["function"] = {key: value for key, value in function.items() if key not in drop}
        if new != tool:
            positions.append(position)
        rebuilt.append(new if new != tool else tool)
    if not positions:
        return Outcome(messages)
    detail = {"keys": sorted(dropped), "positions": positions[:64], "count": len(positions)}
    change = Change(rule, -1, "dropped_tool_keys", detail)
    return Outcome(messages, (change,), request=with_fields(request, {"tools": rebuilt}))
