"""The reply rules armed for one response, as the relay uses them (proxy/relay/streaming.py).

``chat`` and ``messages`` (each API's ``ServedApi.replies``) read the request (its tools and
``tool_choice``) and the reply plan of the profile it ran under
(``rules.providers.planner.Planner.replies``) and give a ``Rewrite``, or ``None`` when no rule
can act on the answer (no tools declared, no format expected: the relay then reads the
response as it always did, and the request's ``Accept-Encoding`` is left alone).

A ``Rewrite`` rewrites a chat completion (``proxy.relay.replies``) or an Anthropic Messages
response (``proxy.relay.replies_messages``), streamed (``feed`` each chunk, ``finish`` at the end)
or whole (``whole``). In report mode the plan's ``report`` steps run beside it on the same bytes:
what they would write is thrown away, and the changes of the rules in report mode are kept in
``reported`` for the log. ``changes`` lists what was applied. Nothing here raises into the relay:
a rewriter that fails stops and passes the rest as it came (what it held first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, Protocol

import orjson

from proxy.relay.replies import ReplyStream, whole_reply
from proxy.relay.replies_messages import (
    MessagesReply,
    MessagesStream,
    declares_messages_tools,
    whole_messages_reply,
)
from rules.engine.base import Change
from rules.replies import finish_reason, text_tool_calls
from rules.replies.base import LEFT_AS_TEXT, Search, may_act
from rules.replies.formats import Format
from rules.replies.pipeline import ReplyPlan, ReplyRun, ReplyStep, arms_any
from rules.replies.scanner import openers


class _Rewriter(Protocol):
    @property
    def changes(self) -> list[Change]: ...

    def feed(self, chunk: bytes) -> bytes: ...

    def finish(self) -> bytes: ...


class Rewrite:
    """The reply rules of one response: one rewriter enforced, one reporting (or neither)."""

    def __init__(
        self,
        make: Callable[[tuple[ReplyStep, ...]], _Rewriter | None],
        whole: Callable[[tuple[ReplyStep, ...], bytes], tuple[bytes, list[Change]] | None],
        plan: ReplyPlan,
        needles: tuple[Search | None, Search | None] = (None, None),
    ) -> None:
        self._make = make
        self._whole = whole
        self.plan = plan
        #: What a whole answer must hold for the enforced steps, and for the reported ones,
        #: to have anything to do (``rules.replies.base.may_act``; ``None``: read it).
        self._needles = needles
        self._enforced: _Rewriter | None = None
        self._shadow: _Rewriter | None = None
        self._started = False
        #: Whole responses: what was applied, and what report mode would have done.
        self._applied: list[Change] = []
        self._would: list[Change] = []
        #: ``stream`` or ``whole`` once the relay used it, else ``None`` (not rewritten: the
        #: answer was not a 200 the rules read, or came compressed).
        self.kind: str | None = None

    @property
    def changes(self) -> list[Change]:
        """What the rules changed in the response the client got (a block held and then let go
        as the text it was, ``left_as_text``, changed nothing)."""
        done = self._enforced.changes if self._enforced is not None else self._applied
        return [change for change in done if change.action != LEFT_AS_TEXT]

    @property
    def reported(self) -> list[Change]:
        """What the rules in report mode would have changed (not applied)."""
        would = self._shadow.changes if self._shadow is not None else self._would
        return [
            change
            for change in would
            if change.rule in self.plan.reported and change.action != LEFT_AS_TEXT
        ]

    @property
    def held_ms(self) -> float | None:
        """The longest time a stream's events were held while the rules read a possible call
        (milliseconds; ``None`` for a whole answer, or a rewriter that does not time it)."""
        hold = getattr(self._enforced, "longest_hold", None)
        return None if hold is None else round(hold * 1000, 3)

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to write for ``chunk`` of a stream."""
        if not self._started:
            self._started, self.kind = True, "stream"
            self._enforced = self._make(self.plan.steps) if self.plan.steps else None
            self._shadow = self._make(self.plan.report) if self.plan.report else None
        if self._shadow is not None:
            self._shadow.feed(chunk)
        return chunk if self._enforced is None else self._enforced.feed(chunk)

    def finish(self) -> bytes:
        """The end of a stream: what the rules still hold."""
        if self._shadow is not None:
            self._shadow.finish()
        return b"" if self._enforced is None else self._enforced.finish()

    def whole(self, body: bytes) -> bytes | None:
        """A whole response rewritten, or ``None`` when no rule changed it. An answer that
        holds none of the rules' needles is not parsed: no rule could change it."""
        self.kind = "whole"
        enforced, reported = self._needles
        if self.plan.report and may_act(reported, body):
            shadow = self._whole(self.plan.report, body)
            self._would = [] if shadow is None else shadow[1]
        done = None
        if self.plan.steps and may_act(enforced, body):
            done = self._whole(self.plan.steps, body)
        if done is None:
            return None
        body, self._applied = done
        return body

    def header(self) -> str:
        """``X-Chatmend-Response-Changes`` of a whole response a rule changed: ``N; rules=a,b``,
        as ``X-Chatmend-Changes`` says of the request (a stream's changes are in the log and on
        the page: its headers left before anything was read)."""
        rules = sorted({change.rule for change in self.changes})
        return f"{len(self.changes)}; rules={','.join(rules)}"


def request_tools(body: bytes) -> dict[str, Any] | None:
    """What the reply rules read of a request body: its ``tools`` and ``tool_choice``
    (``None`` if it is not a JSON object). Module-level: a big body is read in a worker
    process, and only these come back."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(payload, dict):
        return None
    return {key: payload[key] for key in ("tools", "tool_choice") if key in payload}


#: How an API's answers get their reply rules (``ServedApi.replies``): from the plan and the
#: request, a ``Rewrite``, or ``None`` when none of them can act on the answer.
Arm = Callable[[ReplyPlan, Mapping[str, Any]], "Rewrite | None"]


def chat(plan: ReplyPlan, request: Mapping[str, Any]) -> Rewrite | None:
    """The reply rules of a chat completion (``proxy.relay.replies``)."""
    if not arms_any(plan.report or plan.steps, request):
        return None

    # Each run is armed when an answer comes that its rules may change: a stream, or a whole
    # answer past the pre-check (``Rewrite.whole``); each is asked for once.
    def make(steps: tuple[ReplyStep, ...]) -> _Rewriter | None:
        run = ReplyRun(steps, request)
        return ReplyStream(run) if run else None

    def whole(steps: tuple[ReplyStep, ...], body: bytes) -> tuple[bytes, list[Change]] | None:
        run = ReplyRun(steps, request)
        return whole_reply(run, body) if run else None

    return Rewrite(make, whole, plan, (plan.needles, plan.report_needles))


def _messages_reply(steps: tuple[ReplyStep, ...], request: Mapping[str, Any]) -> MessagesReply:
    """A Messages response reads only ``response-text-tool-calls`` (its formats and bounds) and
    ``response-finish-reason`` (``end_turn`` -> ``tool_use``)."""
    names = {rule.name: ctx for rule, ctx in steps}
    ctx = names.get(text_tool_calls.NAME)
    reply = MessagesReply(request, ctx if ctx is not None else text_tool_calls.RULE.context())
    if ctx is None:
        reply.formats = []
    reply.fix_stop = finish_reason.NAME in names
    return reply


def _messages_needles(steps: tuple[ReplyStep, ...] | None) -> Search:
    """What a whole Messages answer must hold for ``steps`` to change it: an opener of a
    format ``response-text-tool-calls`` reads (``response-finish-reason`` acts only after it
    made a call)."""
    for rule, ctx in steps or ():
        if rule.name == text_tool_calls.NAME:
            return _openers(text_tool_calls.formats_of(ctx))
    return _openers(())


@lru_cache(maxsize=64)
def _openers(formats: tuple[Format, ...]) -> Search:
    return Search.of(openers(formats))


def messages(plan: ReplyPlan, request: Mapping[str, Any]) -> Rewrite | None:
    """The reply rules of an Anthropic Messages answer (``proxy.relay.replies_messages``):
    armed when ``response-text-tool-calls`` reads a format and the request declared a client
    tool (``bool(MessagesReply)``, asked without building one)."""
    steps = plan.report or plan.steps
    reads = any(
        rule.name == text_tool_calls.NAME and text_tool_calls.formats_of(ctx) for rule, ctx in steps
    )
    if not reads or not declares_messages_tools(request):
        return None

    def make(steps: tuple[ReplyStep, ...]) -> _Rewriter | None:
        reply = _messages_reply(steps, request)
        return MessagesStream(reply) if reply else None

    def whole(steps: tuple[ReplyStep, ...], body: bytes) -> tuple[bytes, list[Change]] | None:
        reply = _messages_reply(steps, request)
        new = whole_messages_reply(reply, body) if reply else None
        return None if new is None else (new, reply.changes)

    needles = (_messages_needles(plan.steps), _messages_needles(plan.report))
    return Rewrite(make, whole, plan, needles)
