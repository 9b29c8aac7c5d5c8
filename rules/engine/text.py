"""Text repairs every rule set shares: lone UTF-16 surrogates; a tool result as text."""

from __future__ import annotations

import re
from typing import Any

import orjson

from rules.engine.base import Change
from rules.engine.messages import rewrite_each

# A high surrogate not followed by a low one, or a low one not preceded by a high one.
_LONE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


def repair_value(value: Any, path: str = "") -> tuple[Any, list[str]]:
    """``value`` with lone surrogates replaced, and the JSON paths of the strings changed.

    Copy-on-write: a container is new only if something inside it changed. Recursive: parsed
    JSON is at most as deep as the parser allowed.
    """
    if isinstance(value, str):
        fixed = _LONE.sub("\ufffd", value)
        return (value, []) if fixed == value else (fixed, [path or "$"])
    if isinstance(value, dict):
        paths: list[str] = []
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = _LONE.sub("\ufffd", key) if isinstance(key, str) else key
            where = f"{path}.{new_key}" if path else str(new_key)
            if new_key != key:
                paths.append(f"{where} (key)")
            new_item, item_paths = repair_value(item, where)
            paths += item_paths
            out[new_key] = new_item
        return (out, paths) if paths else (value, [])
    if isinstance(value, list):
        paths = []
        items: list[Any] | None = None
        for index, item in enumerate(value):
            new_item, item_paths = repair_value(item, f"{path}[{index}]")
            if item_paths:
                if items is None:
                    items = list(value[:index])
                paths += item_paths
            if items is not None:
                items.append(new_item)
        return (value if items is None else items), paths
    return value, []


def any_surrogate(value: Any) -> bool:
    """True if some string in ``value`` holds a surrogate code point (paired or not)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def replace_lone_surrogates(items: list[Any], rule: str) -> tuple[list[Any], list[Change]]:
    """``items`` with every lone surrogate in any string (keys included) replaced by U+FFFD,
    and a ``replaced`` change per item changed (``items`` itself when none is)."""
    # A str that encodes to UTF-8 has no surrogate at all: the common case costs one encode
    # of each item's strings, done by the repair walk only when that check fails.
    if not any_surrogate(items):
        return items, []
    changes: list[Change] = []

    def fix(index: int, item: Any) -> Any:
        fixed, paths = repair_value(item)
        if paths:
            changes.append(Change(rule, index, "replaced", {"count": len(paths), "paths": paths}))
        return fixed

    return rewrite_each(items, fix), changes


def result_text(content: Any) -> str:
    """A tool result's content as one text, nothing of it lost: a string as it is; the texts of
    a part or block list joined by newlines, each other part as its JSON text (an image's URL
    and all); anything else as its JSON text."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        return "\n".join(_part_text(part) for part in content)
    return _json_text(content)


def _part_text(part: Any) -> str:
    if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
        text = part.get("text")
        if isinstance(text, str):
            return text
    return part if isinstance(part, str) else _json_text(part)


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # nested past what orjson writes: its repr, never an error
        return repr(value)
