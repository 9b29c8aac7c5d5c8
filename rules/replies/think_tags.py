"""response-think-tags: reasoning a model writes at the start of ``content`` inside
``<think>...</think>`` moves to ``reasoning_content``. Off unless a route asks for it.

What: a server that does not split reasoning out (no reasoning parser, or a template that the
parser does not know) sends the model's thinking as the start of its answer: ``<think>`` ...
``</think>`` then the answer (MiniMax M2.5 through NVIDIA NIM and Fireworks, BerriAI/litellm#28691;
vllm-project/vllm#34625; Qwen3 streaming, QwenLM/qwen-code#6033; ``<thinking>``,
tinyhumansai/openhuman#6184).
Why: the agent shows the thinking as the answer and stores it in its history, where it costs
context on every later request and, for a model that wants its thinking back as
``reasoning_content``, is in the wrong field.
Repair: only a tag that opens the content (after whitespace) counts: the text inside it leaves
as ``reasoning_content`` as it arrives (holding back only what could be the closing tag), the
tags themselves go, the rest is content. A tag later in the text, in a choice whose upstream
already sends ``reasoning_content``, or a choice that does not start with one, passes as it
came. ``tags`` lists the tag names read (``think``, ``thinking``).
Safety: safe: every character of the thinking and the answer leaves, each in its field; only
the two tags, which say which field it is, are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.engine.base import Change, Option, RuleContext
from rules.replies.base import ChoiceFix, ChoiceState, Needles, ReplyRule, Step, in_text

NAME = "response-think-tags"

TAGS = Option("tags", ["think", "thinking"], "The tag names read as reasoning.")

_START, _THINKING, _PASS = 0, 1, 2


class _Fix(ChoiceFix):
    def __init__(self, tags: list[str], state: ChoiceState) -> None:
        self.opens = [f"<{tag}>" for tag in tags]
        self.state = state
        self.mode = _START
        self.held = ""
        self.close = ""
        self.moved = 0

    def feed(self, step: Step) -> list[Step]:
        if self.mode == _PASS:
            return [step]
        delta = step.delta
        content = delta.get("content")
        text = content if isinstance(content, str) else ""
        if self.mode == _THINKING:
            return self._split(step, text)
        if delta.get("reasoning_content"):  # the upstream splits its reasoning itself
            self.mode = _PASS
            return self._with_held(step, text)
        if not text and not self.held:  # nothing that could open a tag (and no text to write)
            return [step]
        return self._start(step, self.held + text)

    def end(self) -> list[Step]:
        if not self.held:
            return []
        return self._flush(Step({}))

    def _with_held(self, step: Step, text: str) -> list[Step]:
        if not self.held:
            return [step]
        held, self.held = self.held, ""
        return [Step({**step.delta, "content": held + text}, step.finish)]

    def _start(self, step: Step, text: str) -> list[Step]:
        """The content so far is whitespace and a tag's beginning at most: hold, or decide."""
        body = text.lstrip()
        for opener in self.opens:
            if body.startswith(opener):
                self.mode, self.held = _THINKING, ""
                self.close = "</" + opener[1:]
                lead = text[: len(text) - len(body)]
                out = [Step({**_rest(step.delta), "content": lead})] if lead else []
                return out + self._split(
                    Step({} if lead else _rest(step.delta), step.finish), body[len(opener) :]
                )
        if any(opener.startswith(body) for opener in self.opens) and step.finish is None:
            self.held = text
            return [Step(_rest(step.delta))] if _rest(step.delta) else []
        self.mode, self.held = _PASS, ""
        if text == step.delta.get("content"):
            return [step]
        return [Step({**step.delta, "content": text}, step.finish)]

    def _split(self, step: Step, text: str) -> list[Step]:
        """Inside the thinking: up to the closing tag is reasoning, after it content."""
        text = self.held + text
        self.held = ""
        at = text.find(self.close)
        rest = _rest(step.delta)
        if at == -1:
            keep = _partial(text, self.close)
            reasoning, self.held = text[: len(text) - keep], text[len(text) - keep :]
            self.moved += len(reasoning)
            delta = {**rest, "reasoning_content": reasoning} if reasoning else rest
            if step.finish is not None and self.held:
                delta = {**delta, "reasoning_content": reasoning + self.held}
                self.moved += len(self.held)
                self.held = ""
            return [Step(delta, step.finish)] if delta or step.finish else []
        reasoning, after = text[:at], text[at + len(self.close) :]
        self.moved += len(reasoning)
        self.mode = _PASS
        self.state.changes.append(
            Change(NAME, self.state.index, "moved_reasoning", {"chars": self.moved})
        )
        out = [Step({**rest, "reasoning_content": reasoning})] if reasoning or rest else []
        if after or step.finish is not None:
            out.append(Step({"content": after} if after else {}, step.finish))
        return out

    def _flush(self, step: Step) -> list[Step]:
        """The content ended while text was held: it leaves in the field it was headed for."""
        held, self.held = self.held, ""
        key = "reasoning_content" if self.mode == _THINKING else "content"
        if self.mode == _THINKING:
            self.moved += len(held)
        return [Step({**step.delta, key: held}, step.finish)]


def _rest(delta: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in delta.items() if k != "content"}


def _partial(text: str, tag: str) -> int:
    """How many characters at the end of ``text`` could begin ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


def arms(request: Mapping[str, Any], ctx: RuleContext) -> bool:
    return bool(TAGS.of(ctx))


def fix(request: Mapping[str, Any], ctx: RuleContext, state: ChoiceState) -> ChoiceFix | None:
    return _Fix(TAGS.of(ctx), state) if arms(request, ctx) else None


def needles(ctx: RuleContext) -> Needles:
    """Only content that opens with a tag is touched: an answer without ``<think>`` (each tag
    read) is passed as it came."""
    return tuple(in_text(f"<{tag}>") for tag in TAGS.of(ctx))


RULE = ReplyRule(
    NAME,
    "<think>...</think> at the start of content moves to reasoning_content",
    "The model's thinking arrives as the start of content, inside <think> tags.",
    "A tag opening the content: its text leaves as reasoning_content, the tags go, the rest"
    " is content; anything else passes as it came.",
    "safe",
    False,
    fix,
    arms,
    (TAGS,),
    needles,
)
