"""consecutive-assistant-messages: directly adjacent assistant messages merge into one.

What: a run of assistant messages with no other message between them becomes one assistant
message at the position of the first. Tool calls are concatenated in order (first's, then the
later's; not deduplicated here). Non-empty string contents are joined with "\\n", unstripped;
once a part list is involved the contents are concatenated as parts, a string becoming a text
part. Empty contents (null, "", [], only empty text parts) give way to the other side. The first
non-empty ``reasoning_content`` wins; every other key keeps the first message's value, and keys
only a later message has are added. A tool, user, system or unrecognised entry ends the run.
Why: a turn split in two (text, then the tool calls) leaves the first assistant unanswered, and
DeepSeek and Moonshot/Kimi answer 400 "An assistant message with 'tool_calls' must be followed
by tool messages responding to each 'tool_call_id'. (insufficient tool messages following
tool_calls message)" (docs/providers.md#kimi-pairing; hermes R3, #29148, #49147). deepseek-reasoner
and alternating chat templates reject successive assistant messages outright
(docs/providers.md#chat-templates-roles). It runs first, so the later rules see the union of the
turn's calls (hermes E1). Safety: safe. No text and no call is dropped: texts are joined without
stripping, and where hermes discarded the later content next to a part list (R3), the string becomes
a text part. What goes is empty (a null or empty content, a later ``tool_calls: []``) or a later
message's value for a key the first already sets (the first wins). Two assistants whose non-empty
contents it cannot combine (an object, a number) are left as they are.
"""

from __future__ import annotations

from typing import Any

from rules.engine import scan
from rules.engine.base import Change, Outcome, Rule, RuleContext
from rules.engine.messages import has_content

NAME = "consecutive-assistant-messages"

#: Keys combined field by field; every other key follows "the first message's value wins".
_SPECIAL = frozenset({"content", "tool_calls", "reasoning_content"})


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    runs = _assistant_runs(messages)
    if not runs:
        return Outcome(messages)  # the common case, checked in one tight pass
    out: list[Any] = []
    changes: list[Change] = []
    done = 0  # messages[:done] are in ``out``
    for run_start, end in runs:
        out.extend(messages[done:run_start])
        start = run_start
        while start < end:  # a run may split where two contents cannot be combined
            run = _Run(messages[start])
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
                changes.append(Change(NAME, start, "merged", detail))
                out.append(merged)
            start = stop
        done = end
    if not changes:
        return Outcome(messages)
    out.extend(messages[done:])
    return Outcome(out, tuple(changes))


def _assistant_runs(messages: list[Any]) -> list[tuple[int, int]]:
    """``(start, end)`` of every run of two or more directly adjacent assistant messages."""
    runs: list[tuple[int, int]] = []
    start = -1  # start of the current assistant run, -1 outside one
    for index, message in enumerate(messages):
        if type(message) is dict and message.get("role") == "assistant":
            if start < 0:
                start = index
        else:
            if start >= 0 and index - start > 1:
                runs.append((start, index))
            start = -1
    if start >= 0 and len(messages) - start > 1:
        runs.append((start, len(messages)))
    return runs


class _Run:
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
            merged["content"] = _join(self.contents)
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


def _join(contents: list[Any]) -> Any:
    """One content from the non-empty ones, as folding them pairwise in order would give.

    Texts join with "\\n" (unstripped); from the first part list on, the result is a part list
    and each later text becomes its own text part.
    """
    if len(contents) == 1:
        return contents[0]
    texts: list[str] = []
    rest = iter(contents)
    for content in rest:
        if isinstance(content, list):
            parts = [_text_part("\n".join(texts))] if texts else []
            parts.extend(content)
            for later in rest:
                if isinstance(later, list):
                    parts.extend(later)
                else:
                    parts.append(_text_part(later))
            return parts
        texts.append(content)
    return "\n".join(texts)


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


RULE = Rule(
    name=NAME,
    summary="Merge directly adjacent assistant messages into the first one.",
    defect="two or more assistant messages in a row (a turn split into text and tool calls): "
    "DeepSeek and Kimi \"An assistant message with 'tool_calls' must be followed by tool messages "
    "responding to each 'tool_call_id'. (insufficient tool messages following tool_calls "
    'message)" (langgenius/dify#32222), deepseek-reasoner "does not support successive user or '
    'assistant messages" (deepseek-ai/DeepSeek-R1#21; docs/providers.md#deepseek-pairing)',
    repair="merge the run into its first message: tool calls concatenated in order, string "
    "contents joined with `\\n`, part lists concatenated, the first non-empty `reasoning_content` "
    "kept; never across a tool or user message. No text and no call is dropped",
    safety="safe",
    default=True,
    apply=apply,
    wakes=scan.on(scan.ADJACENT_ASSISTANTS),
)
