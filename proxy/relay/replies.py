"""The reply rules on the wire: a chat-completions response, streamed (SSE) or whole (JSON),
through the rules armed for its request (``rules.replies``), on its way to the client.

``ReplyStream`` frames an event stream into events and gives each event's choices to their
``ChoicePipe``; an event no rule changed is written as the very bytes that came (held only
until the event is complete: a blank line ends it), a changed one is written as new events,
one per step, in order. ``[DONE]`` and the end of the body first release what the rules still
hold. ``whole_reply`` does the same for a whole JSON body. Neither ever raises into the relay:
a failure stops the rewriting and the rest passes as it comes (what was held first).

Bounded: one event is held at most ``MAX_EVENT`` bytes (past it, the rest of the stream passes
as it comes), a whole body is rewritten only up to ``MAX_WHOLE`` bytes, and the rules hold at
most their own bounds (``response-text-tool-calls``: one marker, or one block of ``max_block``
characters).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from proxy.observe.log import get_logger
from rules.engine.base import Change
from rules.replies.base import Step
from rules.replies.pipeline import ChoicePipe, ReplyRun, fix_message

log = get_logger()

#: The most bytes one SSE event may hold while it is read (an event is a chunk of a few
#: hundred bytes; a line longer than this is not one the rules read).
MAX_EVENT: Final = 8 * 1024 * 1024
#: The most bytes of events held while the rules hold text (past it, what the rules gave is
#: written as new events: the same text, framed anew).
MAX_HELD: Final = 1024 * 1024
#: The biggest whole JSON body the rules read.
MAX_WHOLE: Final = 8 * 1024 * 1024

_DONE: Final = b"[DONE]"


@dataclass(slots=True)
class _Held:
    """An event held while the rules hold text: its bytes, and (for an event with choices) the
    chunk, each choice's step in and the steps the rules gave for it."""

    event: bytes
    chunk: dict[str, Any] | None = None
    ins: list[tuple[dict[str, Any], Step]] = field(default_factory=list)
    outs: list[tuple[dict[str, Any], list[Step]]] = field(default_factory=list)


class EventRewriter:
    """What both streamed rewriters share (chat here, Messages in
    ``proxy.relay.replies_messages``): ``feed`` reads the chunks' complete SSE events and gives
    each to ``_event``; ``finish`` writes what is left, after what the rules still hold
    (``_release``). Nothing raises into the relay: on a failure, or an event past
    ``MAX_EVENT``, the rewriting stops (``reply_rewrite_failed``) and the rest passes as it
    came, what the rules held (``_let_go``) first."""

    #: The API it rewrites, in its log line.
    api = "chat"

    def __init__(self, on_error: Callable[[str], None] | None) -> None:
        self.on_error = on_error
        self._buffer = bytearray()
        self._off = False

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to write for ``chunk``: its complete events, each as it came or rewritten."""
        if self._off:
            return chunk
        self._buffer += chunk
        out = bytearray()
        try:
            for event, end in events(self._buffer):
                out += self._event(event, end)
        except Exception as exc:  # the rewriting stops; the relay goes on
            return bytes(out) + self._fail(exc)
        if len(self._buffer) > MAX_EVENT:
            return bytes(out) + self._fail(None)
        return bytes(out)

    def finish(self) -> bytes:
        """The end of the body: what the rules still hold, then what is left."""
        if self._off:
            return b""
        try:
            rest = bytes(self._buffer)
            self._buffer.clear()
            return self._release() + rest
        except Exception as exc:
            return self._fail(exc)

    def _fail(self, exc: Exception | None) -> bytes:
        self._off = True
        held = self._let_go() + bytes(self._buffer)
        self._buffer.clear()
        error = type(exc).__name__ if exc else "event_too_big"
        log.warning("reply_rewrite_failed", api=self.api, error=error)
        if self.on_error is not None:
            self.on_error("reply_rewrite")
        return held

    def _event(self, event: bytes, end: int) -> bytes:
        """The bytes to write for one complete event (``end``: where its lines end)."""
        raise NotImplementedError

    def _release(self) -> bytes:
        """What the rules still hold at the end of the body."""
        raise NotImplementedError

    def _let_go(self) -> bytes:
        """What the rules held, as the client should get it once the rewriting stopped."""
        raise NotImplementedError


class ReplyStream(EventRewriter):
    """One streamed response's rewriting: ``feed`` each chunk as it comes and write what it
    returns; ``finish`` at the end of the body. ``changes`` lists what the rules did.

    An event whose steps the rules pass as they came is written as its bytes at once. From the
    first event they change or hold, the events are held (their bytes and what the rules gave)
    until the rules let go of everything: if what a client rebuilds from the rules' steps is
    what it would rebuild from the events (text held for a marker that turned out to be text),
    the events are written as they came, byte for byte; else (a call was made) as new events,
    in order. At most ``MAX_HELD`` bytes of events are held: past it, the rules' steps are
    written as new events (the same text, in order, framed anew)."""

    def __init__(self, run: ReplyRun, *, on_error: Callable[[str], None] | None = None) -> None:
        super().__init__(on_error)
        self.run = run
        self.pipes: dict[int, ChoicePipe] = {}
        self._template: dict[str, Any] | None = None
        self._held: list[_Held] = []
        self._held_bytes = 0
        self._held_since = 0.0
        #: The held events against the rules' steps for them, compared as they come.
        self._compare = _Compare()
        #: The longest time events were held (seconds): what the rules cost the client in
        #: latency, logged with the changes.
        self.longest_hold = 0.0
        self.events = 0
        self.rewritten = 0

    @property
    def changes(self) -> list[Change]:
        return [change for pipe in self.pipes.values() for change in pipe.state.changes]

    def _let_go(self) -> bytes:
        """The held events as they came: nothing the upstream sent is lost."""
        held = b"".join(h.event for h in self._held)
        self._held.clear()
        return held

    def _event(self, event: bytes, end: int) -> bytes:
        self.events += 1
        data = data_of(event[:end])
        if data is not None and data.strip() == _DONE:
            return self._release() + event
        read = None if data is None else _choices(data)
        if read is None:  # not an event the rules read: in its place
            if not self._held:
                return event
            self._hold(_Held(event))
            return b""
        chunk, choices = read
        self._template = chunk
        if len(choices) == 1 and not self._held:  # the common case, without a record
            choice = choices[0]
            delta = choice.get("delta")
            step = Step(delta if isinstance(delta, dict) else {}, choice.get("finish_reason"))
            steps = self._pipe(choice["index"]).feed(step)
            if len(steps) == 1 and steps[0] is step:
                return event
            self._hold(_Held(event, chunk, [(choice, step)], [(choice, steps)]))
            return self._settle(final=False)
        held = _Held(event, chunk)
        for choice in choices:
            delta = choice.get("delta")
            step = Step(delta if isinstance(delta, dict) else {}, choice.get("finish_reason"))
            held.ins.append((choice, step))
            held.outs.append((choice, self._pipe(choice["index"]).feed(step)))
        same = all(
            len(steps) == 1 and steps[0] is step
            for (_, step), (_, steps) in zip(held.ins, held.outs, strict=True)
        )
        if same and not self._held:
            return event
        self._hold(held)
        return self._settle(final=False)

    def _hold(self, held: _Held) -> None:
        if not self._held:
            self._held_since = time.perf_counter()
        self._held.append(held)
        self._held_bytes += len(held.event)
        for choice, step in held.ins:
            self._compare.given(choice["index"], step)
        for choice, steps in held.outs:
            for step in steps:
                self._compare.made(choice["index"], step)

    def _settle(self, *, final: bool) -> bytes:
        """The held events once the rules let go: as they came if the client rebuilds the same
        from the rules' steps, else rewritten; nothing while the rules still hold text (within
        ``MAX_HELD``)."""
        compare = self._compare
        if compare.same():
            out = b"".join(h.event for h in self._held)
        elif not final and compare.holding() and self._held_bytes <= MAX_HELD:
            return b""
        else:
            out = b"".join(self._rewritten(h) for h in self._held)
        self.longest_hold = max(self.longest_hold, time.perf_counter() - self._held_since)
        self._held.clear()
        self._held_bytes = 0
        self._compare = _Compare()
        return out

    def _rewritten(self, held: _Held) -> bytes:
        if held.chunk is None or (
            len(held.ins) == len(held.outs)  # what the rules let go at the end has no event
            and all(
                len(steps) == 1 and steps[0] is step
                for (_, step), (_, steps) in zip(held.ins, held.outs, strict=True)
            )
        ):
            return held.event
        self.rewritten += 1
        frames = [
            {**held.chunk, "choices": [{**choice, "delta": s.delta, "finish_reason": s.finish}]}
            for choice, steps in held.outs
            for s in steps
        ]
        for frame in frames[:-1]:  # the usage, once: with the last of them
            frame.pop("usage", None)
        return b"".join(map(_frame, frames))

    def _pipe(self, index: int) -> ChoicePipe:
        pipe = self.pipes.get(index)
        if pipe is None:
            pipe = self.pipes[index] = self.run.choice(index)
        return pipe

    def _release(self) -> bytes:
        """What every choice's rules still hold, after the held events (as events after the
        last one seen)."""
        template = self._template
        if template is None:
            return b"".join(h.event for h in self._held)
        ends = _Held(b"", template)
        for index, pipe in self.pipes.items():
            steps = pipe.end()
            if steps:
                ends.outs.append(({"index": index}, steps))
        if not self._held:
            return self._rewritten(ends) if ends.outs else b""
        if ends.outs:
            self._hold(ends)
        return self._settle(final=True)


def _choices(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """A chunk with choices the rules read (each with an integer ``index``), else ``None``."""
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not isinstance(choices, list) or not choices:
        return None
    if not all(isinstance(c, dict) and isinstance(c.get("index"), int) for c in choices):
        return None
    return chunk, choices


@dataclass(frozen=True, slots=True)
class _Value:
    """A field's value that is not text (``null``, a number, an object): one token."""

    value: Any


class _Field:
    """One field of one choice (``content``, ``role``, ``reasoning_content`` ...) as a client
    rebuilds it, from the events (``given``) and from the rules' steps (``made``): text joined,
    other values one token each. The steps' tokens are matched against the events' as they
    come, each compared once: ``ok`` while what the steps wrote is the start of what the events
    wrote; ``ahead``, how many tokens of the events the steps have not written (yet)."""

    __slots__ = ("ahead", "offset", "ok", "pending")

    def __init__(self) -> None:
        self.pending: deque[str | _Value] = deque()
        self.offset = 0  # into pending[0], when it is text
        self.ahead = 0
        self.ok = True

    def given(self, value: Any) -> None:
        if isinstance(value, str):
            if value:
                self.pending.append(value)
                self.ahead += len(value)
        else:
            self.pending.append(_Value(value))
            self.ahead += 1

    def made(self, value: Any) -> None:
        if not self.ok:
            return
        if not isinstance(value, str):
            head = self.pending[0] if self.pending else None
            self.ok = isinstance(head, _Value) and head.value == value
            if self.ok:
                self.pending.popleft()
                self.ahead -= 1
            return
        at = 0
        while at < len(value):
            head = self.pending[0] if self.pending else None
            if not isinstance(head, str):
                self.ok = False
                return
            size = min(len(value) - at, len(head) - self.offset)
            if not head.startswith(value[at : at + size], self.offset):
                self.ok = False
                return
            at, self.offset, self.ahead = at + size, self.offset + size, self.ahead - size
            if self.offset == len(head):
                self.pending.popleft()
                self.offset = 0


@dataclass(slots=True)
class _Choice:
    """One choice of the held events against the rules' steps for them."""

    fields: dict[str, _Field] = field(default_factory=dict)
    calls_given: list[Any] = field(default_factory=list)
    calls_made: list[Any] = field(default_factory=list)
    finish_given: str | None = None
    finish_made: str | None = None
    #: Whether a step of the rules was seen for it (an event always gives one).
    made_seen: bool = False

    def field(self, key: str) -> _Field:
        found = self.fields.get(key)
        if found is None:
            found = self.fields[key] = _Field()
        return found


class _Compare:
    """What a client rebuilds from the held events against what it rebuilds from the rules'
    steps for them, kept as both grow (linear in what is held: nothing is compared twice)."""

    def __init__(self) -> None:
        self.choices: dict[int, _Choice] = {}

    def _choice(self, index: int) -> _Choice:
        found = self.choices.get(index)
        if found is None:
            found = self.choices[index] = _Choice()
        return found

    def given(self, index: int, step: Step) -> None:
        choice = self._choice(index)
        for key, value in step.delta.items():
            if key == "tool_calls":
                choice.calls_given.append(value)
            elif key != "content" or isinstance(value, str):
                choice.field(key).given(value)
        choice.finish_given = step.finish or choice.finish_given

    def made(self, index: int, step: Step) -> None:
        choice = self._choice(index)
        choice.made_seen = True
        for key, value in step.delta.items():
            if key == "tool_calls":
                choice.calls_made.append(value)
            elif key != "content" or isinstance(value, str):
                choice.field(key).made(value)
        choice.finish_made = step.finish or choice.finish_made

    def same(self) -> bool:
        """The steps rebuild what the events rebuild: the events may go out as they came."""
        return all(
            choice.made_seen
            and choice.calls_made == choice.calls_given
            and choice.finish_made == choice.finish_given
            and all(f.ok and not f.ahead for f in choice.fields.values())
            for choice in self.choices.values()
        )

    def holding(self) -> bool:
        """The steps are the events' with text still held at the end of some choice's content
        (nothing else changed): more events may show it was only text."""
        for choice in self.choices.values():
            if choice.calls_made or choice.calls_given:
                return False
            if choice.finish_made not in (None, choice.finish_given):
                return False
            for key, found in choice.fields.items():
                if not found.ok or (found.ahead and key != "content"):
                    return False
        return True


def whole_reply(run: ReplyRun, body: bytes) -> tuple[bytes, list[Change]] | None:
    """A whole chat completion through the rules: the new body and the changes, or ``None``
    when nothing changed (or it is not a completion the rules read)."""
    if len(body) > MAX_WHOLE:
        return None
    try:
        completion = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    choices = completion.get("choices") if isinstance(completion, dict) else None
    if not isinstance(choices, list):
        return None
    fixed: list[Any] = []
    changes: list[Change] = []
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict) or not isinstance(choice.get("index"), int):
            fixed.append(choice)
            continue
        pipe = run.choice(choice["index"], stream=False)
        new, finish = fix_message(pipe, message, choice.get("finish_reason"))
        changes += pipe.state.changes
        same = new == message and finish == choice.get("finish_reason")
        fixed.append(choice if same else {**choice, "message": new, "finish_reason": finish})
    if all(a is b for a, b in zip(fixed, choices, strict=True)):
        return None
    return orjson.dumps({**completion, "choices": fixed}), changes


def _frame(chunk: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def events(buffer: bytearray) -> Iterator[tuple[bytes, int]]:
    """Each complete SSE event at the start of ``buffer``, taken out of it as it is read: its
    bytes (its blank line included) and where its lines end."""
    while True:
        end, sep = _event_end(buffer)
        if end == -1:
            return
        event = bytes(buffer[: end + sep])
        del buffer[: end + sep]
        yield event, end


def _event_end(buffer: bytearray) -> tuple[int, int]:
    """Where the first complete event of ``buffer`` ends (before its blank line) and how long
    that blank line is; ``(-1, 0)`` if none is complete."""
    if b"\r" not in buffer:  # the common case: LF lines only
        at = buffer.find(b"\n\n")
        return (at, 2) if at != -1 else (-1, 0)
    best, size = -1, 0
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        at = buffer.find(sep)
        if at != -1 and (best == -1 or at < best):
            best, size = at, len(sep)
    return best, size


def data_of(event: bytes) -> bytes | None:
    """The event's ``data`` (its ``data:`` lines joined), or ``None`` if it has none."""
    if event.startswith(b"data: ") and b"\n" not in event:  # the common case: one line
        return event[6:]
    lines = [
        line[5:].removeprefix(b" ")
        for line in event.replace(b"\r\n", b"\n").split(b"\n")
        if line.startswith(b"data:")
    ]
    return b"\n".join(lines) if lines else None
