"""Merging adjacent messages: the runs of one role, and the merged message, written once.

Used by the two consecutive-* rules, by system-messages (a hoisted system folds into the first)
and by the pairing rules' ``blocks.rejoin`` (assistants a removed message stood between).
"""

from __future__ import annotations

from typing import Any

from rules.chat.message_fields import has_content
from rules.engine.base import Change

#: Assistant keys combined field by field; every other key follows "the first message's value
#: wins".
_SPECIAL = frozenset({"content", "tool_calls", "reasoning_content"})


def runs(messages: list[Any], role: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every run of two or more directly adjacent ``role`` messages."""
    found: list[tuple[int, int]] = []
    start = -1  # start of the current run, -1 outside one
    for index, message in enumerate(messages):
        if type(message) is dict and message.get("role") == role:
            if start < 0:
                start = index
        else:
            if start >= 0 and index - start > 1:
                found.append((start, index))
            start = -1
    if start >= 0 and len(messages) - start > 1:
        found.append((start, len(messages)))
    return found


def merge_assistants(messages: list[Any], rule: str) -> tuple[list[Any], list[Change]]:
    """``messages`` with every run of adjacent assistants merged into its first (a run splits
    where two contents cannot be combined: an object, a number), and a ``merged`` change per
    merge (``messages`` itself, and no change, when there is nothing to merge)."""
    found = runs(messages, "assistant")
    if not found:
        return messages, []  # the common case, checked in one tight pass
    out: list[Any] = []
    changes: list[Change] = []
    done = 0  # messages[:done] are in ``out``
    for run_start, end in found:
        out.extend(messages[done:run_start])
        start = run_start
        while start < end:
            run = _AssistantRun(messages[start])
            stop = start + 1
            while stop < end and run.add(messages[stop]):
                stop += 1
            if stop - start == 1:
                out.append(messages[start])
            else:
                merged = run.merged()
                calls = merged.get("tool_calls")
                detail = {
                    "merged_indices": list(range(start, stop)),
                    "tool_calls": len(calls) if isinstance(calls, list) else 0,
                }
                changes.append(Change(rule, start, "merged", detail))
                out.append(merged)
            start = stop
        done = end
    if not changes:
        return messages, []
    out.extend(messages[done:])
    return out, changes


class _AssistantRun:
    """A run of adjacent assistants, collected first and merged once (linear in the run)."""

    def __init__(self, first: dict[str, Any]) -> None:
        self.messages = [first]
        #: The non-empty contents, in order; a content that is neither text nor a part list
        #: can only stand alone.
        self.contents: list[Any] = [first["content"]] if has_content(first) else []

    def add(self, later: dict[str, Any]) -> bool:
        """Take ``later`` into the run; ``False`` if its content cannot be combined with it."""
        if has_content(later):
            content = later["content"]
            if self.contents and not (_combinable(self.contents[0]) and _combinable(content)):
                return False
            self.contents.append(content)
        self.messages.append(later)
        return True

    def merged(self) -> dict[str, Any]:
        """The run as one new message: the first's keys, with the later ones folded in."""
        first = self.messages[0]
        merged = dict(first)  # new top level only; nested values are shared and never written
        if self.contents:
            merged["content"] = join_contents(self.contents, "\n")
        # With no content anywhere, the first's value (None, "", [] or absence) stays.

        calls = [
            call
            for message in self.messages
            if isinstance(message.get("tool_calls"), list)
            for call in message["tool_calls"]
        ]
        # With no call on either side the first's value (or absence) stays: `[]` and `null` are
        # the empty-tool-calls rule's job, which runs last.
        if calls:
            merged["tool_calls"] = calls

        # The first non-empty reasoning wins; failing that, the first value present.
        reasonings = [m["reasoning_content"] for m in self.messages if "reasoning_content" in m]
        if reasonings:
            merged["reasoning_content"] = next(
                (r for r in reasonings if isinstance(r, str) and r), reasonings[0]
            )

        for later in self.messages[1:]:
            for key, value in later.items():
                if key not in _SPECIAL and key not in merged:
                    merged[key] = value
        return merged


def _combinable(content: Any) -> bool:
    return isinstance(content, str | list)


def merge_messages(run: list[dict[str, Any]], separator: str) -> dict[str, Any]:
    """The messages of ``run`` (dicts, two or more) as one new message: the first's keys, the
    non-empty contents joined by ``join_contents``, keys only a later message has added."""
    first = run[0]
    merged = dict(first)  # new top level only; nested values are shared and never written
    contents = [message["content"] for message in run if has_content(message)]
    if contents:
        merged["content"] = join_contents(contents, separator)
    for later in run[1:]:
        for key, value in later.items():
            if key != "content" and key not in merged:
                merged[key] = value
    return merged


def join_contents(contents: list[Any], separator: str) -> Any:
    """One content from non-empty ``contents``, as folding them pairwise in order would give.

    Strings join with ``separator`` (unstripped); from the first content that is not a string
    on, the result is a part list: the text so far becomes a leading text part, a list's parts
    are appended, a later string becomes its own text part and any other value is appended as
    one element.
    """
    if len(contents) == 1:
        return contents[0]
    texts: list[str] = []
    rest = iter(contents)
    for content in rest:
        if isinstance(content, str):
            texts.append(content)
            continue
        parts: list[Any] = [_text_part(separator.join(texts))] if texts else []
        _extend(parts, content)
        for later in rest:
            if isinstance(later, str):
                parts.append(_text_part(later))
            else:
                _extend(parts, later)
        return parts
    return separator.join(texts)


def _extend(parts: list[Any], content: Any) -> None:
    if isinstance(content, list):
        parts.extend(content)
    else:
        parts.append(content)  # junk content: kept as it came, as one element


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
