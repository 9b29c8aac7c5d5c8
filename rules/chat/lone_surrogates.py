"""lone-surrogates: no string leaves with an unpaired UTF-16 surrogate.

What: every code point U+D800-U+DFFF that is not half of a valid pair becomes U+FFFD, in every
string of every message (keys included) and, in the proxy, of the whole request body. A body
carrying one cannot be read by orjson at all, so the proxy parses it with the standard library
instead, repairs it, and forwards the repaired body.
Why: a truncated emoji (an agent cutting a string between the two halves of a surrogate pair)
poisons the whole session: DeepSeek answers 400 "messages[N].content: unexpected end of hex
escape", Cerebras "Invalid JSON: lone leading surrogate in hex escape", Anthropic "The request
body is not valid JSON: no low surrogate in string" (docs/providers.md#anthropic-encoding; hermes
R26). Safety: safe. The lone half encodes no character on its own; U+FFFD marks where it was, the
way every UTF-8 decoder does, and the rest of the text is kept.
"""

from __future__ import annotations

import re
from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext
from rules.engine.messages import rewrite_each

NAME = "lone-surrogates"

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


def has_lone_surrogate(text: str) -> bool:
    return _LONE.search(text) is not None


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    # A str that encodes to UTF-8 has no surrogate at all: the common case costs one encode
    # of each message's strings, done by the repair walk only when that check fails.
    changes: list[Change] = []

    def fix(index: int, message: Any) -> Any:
        fixed, paths = repair_value(message)
        if paths:
            changes.append(Change(NAME, index, "replaced", {"count": len(paths), "paths": paths}))
        return fixed

    if not _any_surrogate(messages):
        return Outcome(messages)
    return Outcome(rewrite_each(messages, fix), tuple(changes))


def _any_surrogate(value: Any) -> bool:
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


RULE = Rule(
    name=NAME,
    summary="Replace unpaired UTF-16 surrogates with U+FFFD in every string.",
    defect="a lone UTF-16 surrogate (half of a cut emoji) in any string: DeepSeek "
    '"messages[N].content: unexpected end of hex escape" (CherryHQ/cherry-studio#20614), '
    'Anthropic "no low surrogate in string" (anthropics/claude-code#56064), Cerebras "lone '
    'leading surrogate in hex escape" (elizaOS/eliza#18079); the session stays poisoned '
    "(docs/providers.md#encoding)",
    repair="replace each lone surrogate with U+FFFD; a body orjson refuses for this reason is read "
    "with the standard library and repaired whole (every field, not only messages). The lone half "
    "encodes no character, and the rest of the text is kept",
    safety="safe",
    default=True,
    apply=apply,
)
