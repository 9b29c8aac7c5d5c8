"""Watch a chat-completions response go by and keep each tool-call turn's reasoning.

The relay hands every chunk it has written to ``feed`` and calls ``finish`` at the end; the
observer never holds the relay back and never raises into it. An SSE stream is parsed
incrementally (lines across chunk boundaries, ``data:`` fields only, ``[DONE]`` skipped, each
event's JSON parsed once); per choice it accumulates ``delta.reasoning_content`` (or
``delta.reasoning``, as some routes name it) and the tool calls' ids, names and arguments by
their ``index``. A JSON body is parsed once at the end. A choice is complete at its
``finish_reason`` (or at the end of the body): if it made tool calls and reasoned, ``on_turn``
gets the turn's key and the text at once, before the client can send its next turn.

``BodyObserver`` holds what does not depend on the API (inflating, SSE framing, the size
bounds, never raising); ``ResponseObserver`` reads chat completions, and
``proxy.stash.messages_observer.MessagesObserver`` Anthropic Messages responses.

Everything an observer keeps for one response is bounded, whatever the upstream
sends: the characters it holds (reasoning, thinking, arguments, tool inputs, ids, names) plus
``PIECE_COST`` per piece, together at most ``MAX_OBSERVED``; the choices (``MAX_CHOICES``), the
tool calls of a choice (``MAX_CALLS``), the blocks of a turn (``MAX_BLOCKS``), one event's data
and one line (``MAX_LINE``). Past any of them the observer stops observing that response (what
it held is dropped, nothing is stored, the relay goes on untouched) and reports it through
``on_limit`` (the proxy counts ``chatmend_limits_total{limit="observed_response"}``). So no
string handed to orjson or zlib at the end is bigger than ``MAX_OBSERVED``.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.observe.log import get_logger
from rules.chat.reasoning_content import turn_key

log = get_logger()

#: The most one response's observer keeps: characters of reasoning, thinking, arguments, tool
#: inputs, ids and names (plus ``PIECE_COST`` per piece), or bytes of a JSON body. Past it the
#: observer gives up on that response (nothing is stored, the relay is unaffected).
MAX_OBSERVED = 8 * 1024 * 1024
#: What one kept piece costs beyond its characters (its str object and its list slot): an
#: endless stream of one-character pieces reaches the bound as surely as one long string.
PIECE_COST = 64
#: A line (or one event's data lines together) of an event stream longer than this is not one
#: chatmend can use.
MAX_LINE = MAX_OBSERVED
#: Choices per response (OpenAI's ``n`` allows at most 128), tool calls per choice, blocks per
#: Messages turn: past them the response is not observed.
MAX_CHOICES = 128
MAX_CALLS = 128
MAX_BLOCKS = 256

#: The Content-Encodings the observer reads: zlib's (zstd and br are not in Python 3.11's
#: standard library, and chatmend adds no dependency to read them).
READABLE_ENCODINGS = frozenset({"", "identity", "gzip", "x-gzip", "deflate"})

#: ``on_turn(key, text)``: store a completed turn; it may return the write still in flight.
OnTurn = Callable[[str, str], "asyncio.Task[None] | None"]
#: ``on_limit(bound)``: the observer met one of its bounds and stopped observing the response.
OnLimit = Callable[[str], None]


@dataclass(slots=True)
class _Choice:
    reasoning: list[str] = field(default_factory=list)
    #: tool-call index -> [id, name, argument pieces]
    calls: dict[int, list[Any]] = field(default_factory=dict)
    done: bool = False


class BodyObserver:
    """What every observer shares: the bytes of one response (``gzip``/``deflate`` inflated,
    anything else is refused by ``observer_for``), framed into SSE events (``stream``) or kept
    whole to parse at the end; the API's own parse is in a subclass (``_event``, ``_end``,
    ``_body``), and a completed turn goes to ``on_turn`` through ``_remember``."""

    __slots__ = (
        "_buffer",
        "_data",
        "_data_size",
        "_inflate",
        "_kept",
        "_off",
        "_size",
        "_tail",
        "_tail_size",
        "on_limit",
        "on_turn",
        "pending",
        "scope",
        "stream",
    )

    def __init__(
        self,
        on_turn: OnTurn,
        scope: str,
        *,
        stream: bool,
        encoding: str = "",
        on_limit: OnLimit | None = None,
    ) -> None:
        self.on_turn = on_turn
        self.on_limit = on_limit
        self.scope = scope
        self.stream = stream
        #: The writes ``on_turn`` left in flight, for the proxy to await before it answers.
        self.pending: list[asyncio.Task[None]] = []
        self._off = False
        #: The unfinished last line, in the pieces it came in (joined once, at its newline).
        self._tail: list[bytes] = []
        self._tail_size = 0
        self._data: list[bytes] = []
        self._data_size = 0
        self._buffer: list[bytes] = []
        self._size = 0
        #: What the subclass holds for this response (``keep``): at most ``MAX_OBSERVED``.
        self._kept = 0
        self._inflate = (
            zlib.decompressobj(47) if encoding in READABLE_ENCODINGS - {"", "identity"} else None
        )

    def feed(self, chunk: bytes) -> None:
        """Take the next relayed chunk; never raises."""
        if self._off:
            return
        try:
            if self._inflate is not None:
                chunk = self._inflate.decompress(chunk, MAX_LINE)
                if self._inflate.unconsumed_tail:
                    self.give_up("inflated_chunk")
                    return
            if self.stream:
                self._feed_stream(chunk)
            else:
                self._buffer.append(chunk)
                self._size += len(chunk)
                if self._size > MAX_OBSERVED:
                    self.give_up("body_bytes")  # too big to parse at the end
        except Exception as exc:  # an observer must never break the relay
            self._fail(exc)

    def finish(self) -> None:
        """The body ended cleanly: complete what is still open; never raises."""
        if self._off:
            return
        try:
            if self.stream:
                if self._tail:
                    self._feed_stream(b"\n\n")  # the last line, then the end of its event
                if self._data:
                    self._dispatch()
                if not self._off:
                    self._end()
            else:
                self._whole(b"".join(self._buffer))
        except Exception as exc:
            self._fail(exc)
        finally:
            self._off = True
            self._buffer = []

    def _fail(self, exc: Exception) -> None:
        self._stop()
        log.warning("reasoning_observer_failed", error=type(exc).__name__)

    def _stop(self) -> None:
        """Observe no more of this response, and let go of everything held for it."""
        self._off = True
        self._buffer = []
        self._tail = []
        self._data = []
        self._clear()

    def give_up(self, bound: str) -> None:
        """A bound was met: stop observing the response (the relay goes on) and say which."""
        self._stop()
        if self.on_limit is not None:
            self.on_limit(bound)

    def keep(self, size: int) -> bool:
        """Count one more piece of ``size`` characters kept for this response; past
        ``MAX_OBSERVED`` give up on it (``False``: the caller must not keep the piece)."""
        self._kept += size + PIECE_COST
        if self._kept > MAX_OBSERVED:
            self.give_up("observed_bytes")
            return False
        return True

    # --- SSE ------------------------------------------------------------------------------------

    def _feed_stream(self, chunk: bytes) -> None:
        # One tight loop per chunk (this runs for every event of every observed stream): split
        # into lines, keep the unfinished last one, collect ``data:`` fields, and at each blank
        # line parse the event's data once. Other fields (``event:``, ``id:``, comments) are
        # not ours.
        if b"\n" not in chunk:
            if chunk:
                self._tail.append(chunk)
                self._tail_size += len(chunk)
                if self._tail_size > MAX_LINE:
                    self.give_up("line")
            return
        if self._tail:
            self._tail.append(chunk)
            chunk = b"".join(self._tail)
        lines = chunk.split(b"\n")
        last = lines.pop()
        self._tail = [last] if last else []
        self._tail_size = len(last)
        data = self._data
        for line in lines:
            if line[:5] == b"data:":
                value = line[:-1] if line[-1:] == b"\r" else line
                data.append(value[6:] if value[5:6] == b" " else value[5:])
                self._data_size += len(value)
                if self._data_size > MAX_LINE:
                    self.give_up("line")
                    return
            elif data and (not line or line == b"\r"):
                self._dispatch()
                data = self._data
                if self._off:
                    return
        if self._tail_size > MAX_LINE:
            self.give_up("line")

    def _dispatch(self) -> None:
        """The end of an event (a blank line): its data lines, joined, are one JSON object."""
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        self._data = []
        self._data_size = 0
        if data == b"[DONE]":
            return
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._broken()  # a comment-like or broken event: not ours
            return
        if type(event) is dict:
            self._event(event)

    def _whole(self, body: bytes) -> None:
        if self._inflate is not None:
            body += self._inflate.flush()
        data = orjson.loads(body)
        if type(data) is dict:
            self._body(data)

    def _remember(self, key: str | None, text: str) -> None:
        if key is not None:
            task = self.on_turn(key, text)
            if task is not None:
                self.pending.append(task)

    # --- what a subclass reads ------------------------------------------------------------------

    def _clear(self) -> None:
        """Let go of what the subclass holds for the response (it will not be stored)."""
        raise NotImplementedError

    def _broken(self) -> None:
        """An event's data is not JSON (by default it is skipped)."""

    def _event(self, event: dict[str, Any]) -> None:
        """One SSE event's data, a JSON object."""
        raise NotImplementedError

    def _end(self) -> None:
        """The stream ended cleanly (whether or not its last event said so)."""
        raise NotImplementedError

    def _body(self, data: dict[str, Any]) -> None:
        """The whole JSON body, an object."""
        raise NotImplementedError


class ResponseObserver(BodyObserver):
    """A chat-completions response's observer: ``reasoning_content`` and tool calls per
    choice."""

    __slots__ = ("_choices", "_open")

    def __init__(
        self,
        on_turn: OnTurn,
        scope: str,
        *,
        stream: bool,
        encoding: str = "",
        on_limit: OnLimit | None = None,
    ) -> None:
        super().__init__(on_turn, scope, stream=stream, encoding=encoding, on_limit=on_limit)
        #: Choices seen and not yet settled.
        self._open = 0
        self._choices: dict[int, _Choice] = {}

    def _clear(self) -> None:
        self._choices = {}
        self._open = 0

    def _event(self, event: dict[str, Any]) -> None:
        choices = event.get("choices")
        if type(choices) is not list:
            return
        for choice in choices:
            if type(choice) is dict:
                self._delta(choice)
                if self._off:
                    return
        if not self._open and self._choices:
            self._off = True  # every choice settled: the rest of the stream is not read

    def _end(self) -> None:
        for index in list(self._choices):
            self._complete(index)

    def _delta(self, choice: dict[str, Any]) -> None:
        index = choice.get("index", 0)
        if type(index) is not int:
            return
        state = self._choices.get(index)
        if state is None:
            if len(self._choices) >= MAX_CHOICES:
                self.give_up("choices")
                return
            state = self._choices[index] = _Choice()
            self._open += 1
        elif state.done:
            return
        delta = choice.get("delta")
        if type(delta) is dict:
            text = delta.get("reasoning_content")
            if text is None:
                text = delta.get("reasoning")
            calls = delta.get("tool_calls")
            if type(text) is str and text:
                if not self.keep(len(text)):
                    return  # too much to keep: this response goes unremembered
                state.reasoning.append(text)
            elif not state.reasoning and (calls or delta.get("content")):
                # A thinking model reasons before it answers: a choice that answers first has
                # nothing to remember, and a stream of such choices is not read further.
                self._settle(state)
                return
            if type(calls) is list:
                for position, call in enumerate(calls):
                    if type(call) is dict and not self._call_delta(state, position, call):
                        return
        if choice.get("finish_reason"):
            self._complete(index)

    def _call_delta(self, state: _Choice, position: int, call: dict[str, Any]) -> bool:
        """Add one tool-call delta to its call (``False``: a bound was met, stop reading)."""
        index = call.get("index", position)
        if type(index) is not int:
            return True
        entry = state.calls.get(index)
        if entry is None:
            if len(state.calls) >= MAX_CALLS:
                self.give_up("calls")
                return False
            if not self.keep(0):
                return False
            entry = state.calls[index] = [None, "", []]
        cid = call.get("id")
        if type(cid) is str and cid and entry[0] is None:
            if not self.keep(len(cid)):
                return False
            entry[0] = cid
        function = call.get("function")
        if type(function) is dict:
            name = function.get("name")
            if type(name) is str and name and not entry[1]:
                if not self.keep(len(name)):
                    return False
                entry[1] = name
            arguments = function.get("arguments")
            if type(arguments) is str and arguments:
                if not self.keep(len(arguments)):
                    return False
                entry[2].append(arguments)
        return True

    def _complete(self, index: int) -> None:
        state = self._choices[index]
        if state.done:
            return
        if state.calls and state.reasoning:
            calls = [
                {"id": cid, "function": {"name": name, "arguments": "".join(pieces)}}
                for cid, name, pieces in (state.calls[i] for i in sorted(state.calls))
            ]
            self._remember_calls(calls, "".join(state.reasoning))
        self._settle(state)

    def _settle(self, state: _Choice) -> None:
        state.done = True
        state.reasoning = []
        state.calls = {}
        self._open -= 1

    # --- a JSON body ----------------------------------------------------------------------------

    def _body(self, data: dict[str, Any]) -> None:
        choices = data.get("choices")
        if type(choices) is not list:
            return
        for choice in choices:
            message = choice.get("message") if type(choice) is dict else None
            if type(message) is not dict:
                continue
            text = message.get("reasoning_content")
            if text is None:
                text = message.get("reasoning")
            calls = message.get("tool_calls")
            if type(text) is str and type(calls) is list and calls:
                self._remember_calls(calls, text)

    def _remember_calls(self, calls: list[Any], text: str) -> None:
        if text.strip():
            self._remember(turn_key(self.scope, calls), text)


def readable_accept_encoding(value: str) -> str:
    """A request's ``Accept-Encoding`` narrowed to what the observer reads: ``gzip, deflate,
    zstd, br`` becomes ``gzip, deflate``; with nothing readable left, ``identity``."""
    kept = []
    for item in value.split(","):
        coding, _, params = item.strip().partition(";")
        coding = coding.strip().lower()
        if (
            coding
            and coding in READABLE_ENCODINGS
            and params.replace(" ", "") not in ("q=0", "q=0.0")
        ):
            kept.append(item.strip())
    return ", ".join(kept) or "identity"
