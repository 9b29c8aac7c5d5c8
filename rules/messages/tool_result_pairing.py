"""messages-tool-result-pairing: every ``tool_use`` is answered first thing in the next user turn.

What: for each assistant message with ``tool_use`` blocks, the ``tool_result`` blocks answering
it are gathered from the user messages that follow it (up to the next assistant) into the first
of them, ahead of its other blocks (their own order kept); a call with no result gets a stub
result (``is_error: true``, option ``content``), and if no user message follows at all one is
inserted. A result standing anywhere else (in a later user turn: the call's turn, then "never
mind", "ok", then the result; or before its call) is moved there when it answers a call its own
turn left unanswered: the leftover results answer the leftover calls by the pairing law
(``rules.engine.pairing``: the k-th naming X answers the k-th naming X), so the real result
takes the place a stub would have. A ``tool_result`` that then answers no call (an orphan: its
id names no call, a history cut after a compaction) or that answers a call a second time is
removed, logged with its id, the reason and its length (the text only with ``log_content``).
A user message left with nothing is removed, and two assistant messages that this leaves
adjacent are joined. With option ``orphans: text`` such a result is not removed but kept as a
text block the model reads (its content under the heading of option ``heading``, ``{id}``: its
tool_use_id), after the results of its message.
Why: Anthropic answers 400 "messages.33: `tool_use` ids were found without `tool_result` blocks
immediately after: toolu_…. Each `tool_use` block must have a corresponding `tool_result` block
in the next message." (anthropics/claude-code#1237, #2697, #5989; DeepSeek's Anthropic endpoint
the same, Hmbown/Codewhale#4329), for results placed after text "Did not find 1 `tool_result`
block(s) at the beginning of this message" (anthropic-sdk-typescript#653; live-verified in
NousResearch/hermes-agent#65369, QwenLM/qwen-code#8161), and for orphans "unexpected
`tool_use_id` found in `tool_result` blocks: toolu_…. Each `tool_result` block must have a
corresponding `tool_use` block in the previous message." (anthropics/claude-code#13460, #18947).
Safety: by action: moving results loses nothing (``safe``); a stub, an inserted user message or
an orphan kept as text is chatmend's words (``unsafe``: the stub says the result is unknown,
which is true); dropping an orphan is ``lossy`` (its text no longer reaches the model; the
provider refuses the whole request while it is there; it is logged).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, TextOption, carried
from rules.engine.messages import dropped_content
from rules.engine.text import result_text
from rules.engine.wake import on
from rules.messages import scan
from rules.messages.apart import TURNS
from rules.messages.blocks import (
    as_blocks,
    content_list,
    is_tool_result,
    role,
    tool_result_id,
    tool_use_ids,
)
from rules.messages.remap import answer_places

NAME = "messages-tool-result-pairing"

#: The chat stub's text (``rules/chat/unanswered_tool_calls.py``).
DEFAULT_CONTENT: Final = "[chatmend] No result was recorded for this tool call."

#: The rule's options (the record below lists them; read them through these).
CONTENT = Option("content", DEFAULT_CONTENT, "The text of a stub tool_result.")
ORPHANS = Option(
    "orphans",
    "drop",
    "What happens to a result that answers no call (or answers one a second time): `drop`, or "
    "`text` (kept as a text block of its message).",
    choices=("drop", "text"),
)
HEADING = TextOption(
    "heading",
    "[chatmend] The result of tool call {id}, whose call is not in this conversation:",
    "The line above a result kept as text (`orphans: text`); `{id}` is its tool_use_id.",
)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    # The shared walk (rules/messages/scan.py) checks the pairing: every call answered at the
    # head of the next message, once, and no result anywhere else.
    if scan.UNPAIRED not in scan.signals(messages):
        return Outcome(messages)
    run = _Run(messages, ctx)
    out: list[Any] = []
    dropped_user = False  # a user message was removed since the last message kept
    index, n = 0, len(messages)
    while index < n:
        message = messages[index]
        speaker = role(message)
        if speaker == "assistant":
            if dropped_user and out and role(out[-1]) == "assistant":
                out[-1] = _joined(out[-1], message)
                run.changes.append(Change(NAME, index, "rejoined", {"into": len(out) - 1}))
            else:
                out.append(message)
            dropped_user = False
            ids = tool_use_ids(message)
            end = index + 1
            while ids and end < n and role(messages[end]) == "user":
                end += 1
            if ids:
                out.extend(run.answer(index, end, ids))
            index = end
            continue
        if speaker == "user":
            kept = run.strays(index, content_list(message))
            if kept is not None and not kept:
                run.changes.append(Change(NAME, index, "dropped_message", {"role": "user"}))
                dropped_user = True
                index += 1
                continue
            if kept is not None:
                message = {**message, "content": kept}
        out.append(message)
        dropped_user = False
        index += 1
    if not run.changes:  # the shared walk over-reports (a result in an assistant message)
        return Outcome(messages)
    return Outcome(out, tuple(run.changes))


class _Run:
    """One run of the rule: the list, what the pairing law assigned, the changes so far."""

    def __init__(self, messages: list[Any], ctx: RuleContext) -> None:
        self.messages = messages
        self.ctx = ctx
        self.stub_text = CONTENT.of(ctx)
        self.as_text = ORPHANS.of(ctx) == "text"
        self.heading = HEADING.of(ctx)
        #: (message, position) of a result -> the assistant message of the call it answers;
        #: per assistant message, its results that stand elsewhere (``_assign``).
        self.owner_of, self.late = _assign(messages)
        self.named = {tid for message in messages for tid in tool_use_ids(message)}
        self.changes: list[Change] = []

    def strays(self, index: int, blocks: list[Any] | None) -> list[Any] | None:
        """A user message's blocks without the results that answer no call of the turn right
        before it: they move to the turn of the call they answer (the pairing law), or are
        dropped (an orphan, a second answer). ``None``: no result in it, nothing to do."""
        if blocks is None or not any(map(is_tool_result, blocks)):
            return None
        kept: list[Any] = []
        for position, block in enumerate(blocks):
            if (index, position) in self.owner_of:
                continue  # it moves home
            if is_tool_result(block):
                self.drop(block, index, position, _why(block, self.named), kept)
            else:
                kept.append(block)
        return kept

    def drop(self, block: Any, index: int, position: int, why: str, into: list[Any]) -> None:
        """A result that answers no call: kept as a text block at the end of ``into``
        (``orphans: text``), else removed; logged either way."""
        if self.as_text:
            tid = tool_result_id(block)
            shown = tid if tid and tid.strip() else "(no id)"
            text = self.heading.replace("{id}", shown) + "\n" + result_text(block.get("content"))
            into.append({"type": "text", "text": text})
            detail = {"tool_use_id": tid, "position": position, "reason": why}
            self.changes.append(Change(NAME, index, "rendered_result", detail))
            return
        detail = {
            "tool_use_id": tool_result_id(block),
            "position": position,
            "reason": why,
            **dropped_content(block.get("content"), self.ctx),
        }
        self.changes.append(Change(NAME, index, "dropped_result", detail))

    def answer(self, start: int, end: int, ids: list[str]) -> list[Any]:
        """The user messages ``start+1 .. end-1`` rebuilt so the first one opens with one
        result per call of the assistant at ``start``: its own results, then those the pairing
        law moves here from elsewhere, then stubs."""
        found, rests, wanted = self.gather(start, end, ids)
        head = found + self.stubs(start, ids, wanted)
        if start + 1 == end:
            self.changes.append(Change(NAME, start + 1, "inserted_user", {"results": len(head)}))
            return [{"role": "user", "content": head}]
        return [self.first(start, head, found, rests[0]), *self.others(start, rests[1:])]

    def gather(
        self, start: int, end: int, ids: list[str]
    ) -> tuple[list[Any], list[list[Any] | None], Counter[str]]:
        """The turn's results (its own, in order, then the late ones moved home), per user
        message its other blocks (``None``: a string content), and the calls still unanswered
        (a count per id)."""
        wanted = Counter(ids)
        found: list[Any] = []
        rests: list[list[Any] | None] = []
        for at in range(start + 1, end):
            blocks = content_list(self.messages[at])
            if blocks is None:
                rests.append(None)
                continue
            rest: list[Any] = []
            for position, block in enumerate(blocks):
                owner = self.owner_of.get((at, position))
                if not is_tool_result(block):
                    rest.append(block)
                elif owner == start:
                    wanted[tool_result_id(block) or ""] -= 1
                    found.append(block)
                elif owner is None:
                    why = "second_answer" if tool_result_id(block) in ids else "orphan"
                    self.drop(block, at, position, why, rest)
                # else: it answers a call of another turn, and moves there
            rests.append(rest)
        for block in self.late.get(start, []):
            tid = tool_result_id(block) or ""
            wanted[tid] -= 1
            found.append(block)
            self.changes.append(Change(NAME, start + 1, "moved_result_home", {"tool_use_id": tid}))
        return found, rests, wanted

    def stubs(self, start: int, ids: list[str], wanted: Counter[str]) -> list[Any]:
        """A stub result for each call still unanswered, in call order."""
        missing: list[str] = []
        for tid in ids:
            if wanted[tid] > 0:
                wanted[tid] -= 1
                missing.append(tid)
        if missing:
            self.changes.append(Change(NAME, start, "added_stubs", {"ids": missing}))
        return [
            {"type": "tool_result", "tool_use_id": tid, "content": self.stub_text, "is_error": True}
            for tid in missing
        ]

    def first(self, start: int, head: list[Any], found: list[Any], rest: list[Any] | None) -> Any:
        """The user message right after the turn, opening with ``head``."""
        first = self.messages[start + 1]
        own = content_list(first)
        content = head + (as_blocks(first.get("content")) if rest is None else rest)
        unchanged = own is not None and len(content) == len(own)
        if unchanged and all(a is b for a, b in zip(content, own or (), strict=True)):
            return first
        if found and (own is None or own[: len(found)] != found):
            moved = [tool_result_id(b) for b in found]
            self.changes.append(Change(NAME, start + 1, "moved_results", {"ids": moved}))
        return {**first, "content": content}

    def others(self, start: int, rests: list[list[Any] | None]) -> list[Any]:
        """The later user messages of the run, without the results that left them."""
        rebuilt: list[Any] = []
        for offset, others in enumerate(rests, start=start + 2):
            message = self.messages[offset]
            if others is None or len(others) == len(content_list(message) or ()):
                rebuilt.append(message)
            elif others:
                rebuilt.append({**message, "content": others})
            else:
                self.changes.append(Change(NAME, offset, "dropped_message", {"role": "user"}))
        return rebuilt


def _assign(messages: list[Any]) -> tuple[dict[tuple[int, int], int], dict[int, list[Any]]]:
    """Which call each result answers (``rules.messages.remap.answer_places``): (message,
    position) of each result that answers a call -> the index of that call's assistant
    message; and, per assistant message, its results that stand outside the user message right
    after it (a later turn, or before the call), in document order. A result given no call is
    in neither (an orphan, or a second answer)."""
    owner_of: dict[tuple[int, int], int] = {}
    late: dict[int, list[Any]] = {}
    run_end: list[int] = [0] * (len(messages) + 1)  # where the user run after each message ends
    run_end[len(messages)] = len(messages)
    for index in range(len(messages) - 1, -1, -1):
        follows = index + 1 < len(messages) and role(messages[index + 1]) == "user"
        run_end[index] = run_end[index + 1] if follows else index + 1
    for (at, position), (home, _) in sorted(answer_places(messages).items()):
        owner_of[(at, position)] = home
        if not home < at < run_end[home]:
            late.setdefault(home, []).append(messages[at]["content"][position])
    return owner_of, late


def _why(block: Any, named: set[str]) -> str:
    """Why a result answers no call: a call it names has its answer already, or none is named."""
    return "second_answer" if tool_result_id(block) in named else "orphan"


def _joined(first: dict[str, Any], second: Any) -> dict[str, Any]:
    content = as_blocks(first.get("content")) + as_blocks(second.get("content"))
    return {**first, "content": content}


RULE = Rule(
    name=NAME,
    summary="Put each assistant turn's tool results first in the next user turn; stub the "
    "missing, drop orphans.",
    defect="a `tool_use` without its `tool_result` at the head of the next user message: "
    'Anthropic "`tool_use` ids were found without `tool_result` blocks immediately after"; a '
    'result answering no call: "unexpected `tool_use_id` found in `tool_result` blocks"',
    repair="gather the turn's results at the head of the next user message (order kept), and a "
    "result of the turn's call sent in a later turn or before the call (the leftover k-th "
    "naming X answers the leftover k-th call naming X); stub a missing one (`is_error`, option "
    "`content`), insert that user message if absent; drop orphan and second results (logged "
    "with id and length; lossy), or with `orphans: text` keep each as a text block under a "
    "heading (unsafe)",
    safety={
        "moved_results": "safe",
        "moved_result_home": "safe",
        "rejoined": "safe",
        "dropped_message": "safe",
        "added_stubs": "unsafe",
        "inserted_user": "unsafe",
        "rendered_result": "unsafe",
        "dropped_result": "lossy",
    },
    default=True,
    apply=apply,
    scan=scan.signals,
    woken_by=on(scan.UNPAIRED),
    options=(CONTENT, ORPHANS, HEADING),
    horizon=carried(TURNS.apart(apply)),  # a new turn apart from the history
)
