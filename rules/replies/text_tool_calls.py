"""response-text-tool-calls: a tool call the model wrote as text in ``content`` becomes a real
``tool_calls`` entry.

What: the model, asked with tools, writes its call in its chat template's markup inside the
answer's text (DeepSeek's DSML or tool tokens, Kimi's sections, MiniMax's
``<minimax:tool_call>``, Mistral's ``[TOOL_CALLS]``, the ``<tool_call>`` family), often with
``finish_reason: "stop"``.
Why: the agent sees prose, runs nothing, and usually stores the markup in its history; the
turn is lost. DeepSeek's own API put 2 of 19 calls in content (deepseek-ai/DeepSeek-V3#1244)
and writes ``<tool_call id=... name=...>`` text (felinics/Memoh#435); MiniMax's API returns
``<minimax:tool_call>`` (MiniMax-AI/MiniMax-M2.5#10); Kimi K2 leaks its section tokens through
Moonshot and OpenRouter (NousResearch/hermes-agent#24536). The reports by format are in
docs/replies.md.
Repair: only when the request declared tools and did not say ``tool_choice: "none"``, only
for the formats the route's profile expects (``formats``), only outside code, and only when the
block names a declared tool with arguments that are a JSON object (XML values typed by the
tool's schema): the block leaves as ``tool_calls`` (the next free ``index``, the markup's id or
a new ``call_`` id), the text around it as content, in order. Anything else, including a block
the content ends inside, leaves verbatim as text. Text is held back only while its end could
be a marker (at most one marker's length) or a block is open (at most ``max_block``
characters); once the upstream sends a real tool call in a choice, that choice's text is left
as it is (no call twice).
Safety: safe: every character leaves, as text or inside the call it spelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.engine.base import Change, Option, RuleContext
from rules.replies.base import (
    LEFT_AS_TEXT,
    ChoiceFix,
    ChoiceState,
    Delta,
    Needles,
    ReplyRule,
    Step,
    as_key,
    declared_tools,
    declares_tools,
)
from rules.replies.formats import CONFIRM_WINDOW, FORMATS, Format
from rules.replies.scanner import MAX_BLOCK, Calls, Piece, Text, TextCalls, openers

NAME = "response-text-tool-calls"


class FormatsOption(Option[list[str]]):
    """The formats a profile expects: names from ``rules.replies.formats.FORMATS``."""

    def validate(self, value: Any) -> str | None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return "must be a list of format names"
        unknown = [v for v in value if v not in FORMATS]
        if unknown:
            return f"unknown format {unknown[0]!r} (known: {', '.join(FORMATS)})"
        return None


FORMATS_OPTION = FormatsOption(
    "formats",
    [],
    "The markups read as calls (deepseek-dsml, deepseek-v3, hermes-attr, kimi-k2, minimax,"
    " mistral, hermes, qwen3-coder, glm): each profile names those of its models.",
)
WINDOW = Option(
    "confirm_window",
    CONFIRM_WINDOW,
    "Characters within which an ambiguous opener (<tool_call>) must show its format.",
)
MAX_BLOCK_OPTION = Option(
    "max_block", MAX_BLOCK, "The most characters one block is held (past it: text)."
)
#: How the ids of made calls are written: ``call_`` plus 24 hex characters (OpenAI's shape),
#: or Kimi's ``functions.NAME:IDX`` (what its history expects back).
IDS = Option("ids", "openai", "The shape of a made call's id.", choices=("openai", "kimi"))


def arms(request: Mapping[str, Any], ctx: RuleContext) -> bool:
    if not FORMATS_OPTION.of(ctx):
        return False
    choice = request.get("tool_choice")
    if choice == "none":
        return False
    if isinstance(choice, dict):  # a named tool: it must be one of the declared
        return bool(allowed_tools(request))
    return declares_tools(request)


def formats_of(ctx: RuleContext) -> tuple[Format, ...]:
    """The formats the rule reads under ``ctx``, in ``FORMATS``' order."""
    names = FORMATS_OPTION.of(ctx)
    return tuple(FORMATS[name] for name in FORMATS if name in names)


def needles(ctx: RuleContext) -> Needles:
    """A call is made only from a block that begins with an opener of a format read; and a
    choice with the upstream's own ``tool_calls`` is rebuilt around them (their indices moved
    past the calls made before)."""
    return (*openers(formats_of(ctx)), as_key("tool_calls"))


def allowed_tools(request: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    """The tools a made call may name: the declared ones, only the named one under a named
    ``tool_choice``, none under ``"none"``."""
    choice = request.get("tool_choice")
    if choice == "none":
        return {}
    declared = declared_tools(request)
    if isinstance(choice, dict):
        function = choice.get("function")
        name: Any = function.get("name") if isinstance(function, dict) else None
        return {name: declared[name]} if name in declared else {}
    return declared


class _Fix(ChoiceFix):
    def __init__(self, request: Mapping[str, Any], ctx: RuleContext, state: ChoiceState) -> None:
        self.scanner = TextCalls(
            formats_of(ctx),
            allowed_tools(request),
            confirm_window=WINDOW.of(ctx),
            max_block=MAX_BLOCK_OPTION.of(ctx),
        )
        self.state = state
        self.kimi_ids = IDS.of(ctx) == "kimi"
        self.ids: set[str] = set()
        #: Once the upstream sends a real call, the rest of the choice is left as it comes;
        #: its indices move past the calls made before it.
        self.upstream = False
        self.shift = 0

    def feed(self, step: Step) -> list[Step]:
        delta = step.delta
        calls = delta.get("tool_calls")
        if calls and not self.upstream:
            out = self._flush(self.scanner.end())
            self.upstream = True
            self.shift = self.state.made
            return [*out, Step(self._shifted(delta), step.finish)]
        if self.upstream:
            return [Step(self._shifted(delta), step.finish)] if self.shift else [step]
        content = delta.get("content")
        pieces = self.scanner.feed(content) if isinstance(content, str) and content else []
        if step.finish is not None:
            pieces += self.scanner.end()
        if len(pieces) == 1 and isinstance(pieces[0], Text) and pieces[0].text == content:
            return [step]
        if not pieces and not (isinstance(content, str) and content):
            return [step]
        return self._steps(delta, pieces, step.finish)

    def end(self) -> list[Step]:
        return self._flush(self.scanner.end())

    def _flush(self, pieces: list[Piece]) -> list[Step]:
        return self._steps({}, pieces, None) if pieces else []

    def _steps(self, delta: Delta, pieces: list[Piece], finish: str | None) -> list[Step]:
        """One step per piece, the delta's other fields (``role``, ``reasoning_content``) with
        the first, ``finish`` with the last; the other fields alone if every piece is held."""
        rest = {k: v for k, v in delta.items() if k != "content"}
        out: list[Step] = []
        for piece in pieces:
            if isinstance(piece, Text):
                out.append(Step({**rest, "content": piece.text}))
            else:
                out.append(Step({**rest, "tool_calls": self._made(piece)}))
            rest = {}
        if not out and (rest or finish is not None):
            out.append(Step(rest))
        if out and finish is not None:
            out[-1] = Step(out[-1].delta, finish)
        self._record_released()
        return out

    def _made(self, piece: Calls) -> list[dict[str, Any]]:
        made = []
        for call in piece.calls:
            index = self.state.next_index()
            self.state.made += 1
            made.append(
                {
                    "index": index,
                    "id": self._id(call.id, call.name, index),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            )
        self.state.changes.append(
            Change(
                NAME,
                self.state.index,
                "converted",
                {
                    "format": piece.format,
                    "calls": len(piece.calls),
                    "names": [call.name for call in piece.calls],
                    "held_chars": piece.chars,
                },
            )
        )
        return made

    def _id(self, given: str, name: str, index: int) -> str:
        """The markup's own id if it gave one not used yet, else a new one."""
        if given and given not in self.ids and len(given) <= 64:
            new = given
        elif self.kimi_ids:
            new = f"functions.{name}:{index}"
        else:
            new = self.state.new_id()
        self.ids.add(new)
        return new

    def _shifted(self, delta: Delta) -> Delta:
        calls = delta.get("tool_calls")
        if not self.shift or not isinstance(calls, list):
            return delta
        moved = [
            {**c, "index": c["index"] + self.shift}
            if isinstance(c, dict) and isinstance(c.get("index"), int)
            else c
            for c in calls
        ]
        return {**delta, "tool_calls": moved}

    def _record_released(self) -> None:
        for reason, chars in self.scanner.released:
            self.state.changes.append(
                Change(NAME, self.state.index, LEFT_AS_TEXT, {"reason": reason, "chars": chars})
            )
        self.scanner.released.clear()


def fix(request: Mapping[str, Any], ctx: RuleContext, state: ChoiceState) -> ChoiceFix | None:
    return _Fix(request, ctx, state) if arms(request, ctx) else None


RULE = ReplyRule(
    NAME,
    "a tool call written as text in content becomes a tool_calls entry",
    "The model writes its tool call in its template's markup inside content (DSML, Kimi"
    " sections, <minimax:tool_call>, [TOOL_CALLS], <tool_call>): the agent runs nothing.",
    "Under the formats its profile expects, a block naming a declared tool with object"
    " arguments, outside code, becomes tool_calls; anything else stays text, verbatim.",
    "safe",
    True,
    fix,
    arms,
    (FORMATS_OPTION, WINDOW, MAX_BLOCK_OPTION, IDS),
    needles,
)
