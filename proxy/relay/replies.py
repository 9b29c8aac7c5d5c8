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

from collections.abc import Callable
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
#: The biggest whole JSON body the rules read.
MAX_WHOLE: Final = 8 * 1024 * 1024

_DONE: Final = b"[DONE]"


class ReplyStream:
    """One streamed response's rewriting: ``feed`` each chunk as it comes and write what it
    returns; ``finish`` at the end of the body. ``changes`` lists what the rules did."""

    def __init__(self, run: ReplyRun, *, on_error: Callable[[str], None] | None = None) -> None:
        self.run = run
        self.on_error = on_error
        self.pipes: dict[int, ChoicePipe] = {}
        self._buffer = bytearray()
        self._template: dict[str, Any] | None = None
        self._off = False
        self.events = 0
        self.rewritten = 0

    @property
    def changes(self) -> list[Change]:
        return [change for pipe in self.pipes.values() for change in pipe.state.changes]

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to write for ``chunk``: its complete events, each as it came or rewritten."""
        if self._off:
            return chunk
        self._buffer += chunk
        out = bytearray()
        try:
            while True:
                end, sep = _event_end(self._buffer)
                if end == -1:
                    break
                event = bytes(self._buffer[: end + sep])
                del self._buffer[: end + sep]
                out += self._event(event, end)
        except Exception as exc:  # the rewriting stops; the relay goes on
            return bytes(out) + self._fail(exc)
        if len(self._buffer) > MAX_EVENT:
            return bytes(out) + self._fail(None)
        return bytes(out)

    def finish(self) -> bytes:
        """The end of the body: what is left, then what the rules still hold."""
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
        held = bytes(self._buffer)
        self._buffer.clear()
        log.warning("reply_rewrite_failed", error=type(exc).__name__ if exc else "event_too_big")
        if self.on_error is not None:
            self.on_error("reply_rewrite")
        return held

    def _event(self, event: bytes, end: int) -> bytes:
        self.events += 1
        data = _data(event[:end])
        if data is None:
            return event
        if data.strip() == _DONE:
            return self._release() + event
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return event
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        if not isinstance(choices, list) or not choices:
            return event
        self._template = chunk
        outs: list[tuple[dict[str, Any], list[Step]]] = []
        changed = False
        for choice in choices:
            if not isinstance(choice, dict) or not isinstance(choice.get("index"), int):
                return event
            delta = choice.get("delta")
            step = Step(delta if isinstance(delta, dict) else {}, choice.get("finish_reason"))
            steps = self._pipe(choice["index"]).feed(step)
            changed = changed or len(steps) != 1 or steps[0] is not step
            outs.append((choice, steps))
        if not changed:
            return event
        self.rewritten += 1
        frames = [
            {**chunk, "choices": [{**choice, "delta": s.delta, "finish_reason": s.finish}]}
            for choice, steps in outs
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
        """What every choice's rules still hold, as events after the last one seen."""
        template = self._template
        if template is None:
            return b""
        out = bytearray()
        for index, pipe in self.pipes.items():
            for step in pipe.end():
                choice = {"index": index, "delta": step.delta, "finish_reason": step.finish}
                out += _frame({**template, "choices": [choice]})
        return bytes(out)


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
        same = new is message and finish == choice.get("finish_reason")
        fixed.append(choice if same else {**choice, "message": new, "finish_reason": finish})
    if all(a is b for a, b in zip(fixed, choices, strict=True)):
        return None
    return orjson.dumps({**completion, "choices": fixed}), changes


def _frame(chunk: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _event_end(buffer: bytearray) -> tuple[int, int]:
    """Where the first complete event of ``buffer`` ends (before its blank line) and how long
    that blank line is; ``(-1, 0)`` if none is complete."""
    best, size = -1, 0
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        at = buffer.find(sep)
        if at != -1 and (best == -1 or at < best):
            best, size = at, len(sep)
    return best, size


def _data(event: bytes) -> bytes | None:
    """The event's ``data`` (its ``data:`` lines joined), or ``None`` if it has none."""
    lines = [
        line[5:].removeprefix(b" ")
        for line in event.replace(b"\r\n", b"\n").split(b"\n")
        if line.startswith(b"data:")
    ]
    return b"\n".join(lines) if lines else None
