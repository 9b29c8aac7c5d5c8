"""The reply rules on an Anthropic Messages response: a tool call the model wrote as text in a
``text`` block (MiniMax's ``<minimax:tool_call>`` on its Anthropic-format API,
MiniMax-AI/MiniMax-M2.5#10; DeepSeek's DSML on its ``/anthropic`` endpoint,
deepseek-ai/awesome-deepseek-agent#13) becomes a ``tool_use`` block, streamed or whole.

``response-text-tool-calls`` reads each text block as ``proxy.relay.replies`` reads a chat choice's
content (``rules.replies.scanner``, the same formats, bounds and refusals); a block that parses
becomes ``tool_use`` blocks (``toolu_`` ids, ``input`` the arguments object) between the text
before and after it; ``response-finish-reason`` then turns ``end_turn`` into ``tool_use`` when
chatmend made a call. In a stream, the blocks after an inserted one are renumbered; a text
block's ``content_block_start`` is held until its first text passes (a block that begins with a
call never shows an empty text block, which the API would refuse when the agent sends the turn
back). Events no rule changed are written as the very bytes that came.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from proxy.observe.log import get_logger
from proxy.relay.replies import MAX_WHOLE, EventRewriter, data_of
from rules.engine.base import Change, RuleContext
from rules.replies import finish_reason, text_tool_calls
from rules.replies.formats import FORMATS
from rules.replies.scanner import Calls, Piece, Text, TextCalls

log = get_logger()


def new_tool_use_id() -> str:
    """An id in Anthropic's shape (``toolu_`` and 24 base62 characters)."""
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    return "toolu_" + "".join(secrets.choice(alphabet) for _ in range(24))


class MessagesReply:
    """What the rules need for one Messages response: the scanner's settings and the ids."""

    def __init__(
        self,
        request: Mapping[str, Any],
        ctx: RuleContext,
        *,
        new_id: Callable[[], str] = new_tool_use_id,
    ) -> None:
        names = text_tool_calls.FORMATS_OPTION.of(ctx)
        self.formats = [FORMATS[name] for name in FORMATS if name in names]
        self.declared = messages_tools(request)
        self.window = text_tool_calls.WINDOW.of(ctx)
        self.max_block = text_tool_calls.MAX_BLOCK_OPTION.of(ctx)
        self.new_id = new_id
        self.changes: list[Change] = []
        self.made = 0
        #: ``response-finish-reason`` is on: ``end_turn`` becomes ``tool_use`` after a made call.
        self.fix_stop = True

    def __bool__(self) -> bool:
        return bool(self.formats) and bool(self.declared)

    def scanner(self) -> TextCalls:
        return TextCalls(
            self.formats, self.declared, confirm_window=self.window, max_block=self.max_block
        )

    def tool_use(self, piece: Calls, index: int) -> list[dict[str, Any]]:
        """The ``tool_use`` blocks of a block read as calls (their change recorded)."""
        self.made += len(piece.calls)
        self.changes.append(
            Change(
                text_tool_calls.NAME,
                index,
                "converted",
                {
                    "format": piece.format,
                    "calls": len(piece.calls),
                    "names": [call.name for call in piece.calls],
                    "held_chars": piece.chars,
                },
            )
        )
        return [
            {
                "type": "tool_use",
                "id": self.new_id(),
                "name": call.name,
                "input": orjson.loads(call.arguments),
            }
            for call in piece.calls
        ]

    def stop_reason(self, given: Any) -> Any:
        if given != "end_turn" or not self.made or not self.fix_stop:
            return given
        self.changes.append(
            Change(finish_reason.NAME, 0, "set_stop_reason", {"from": "end_turn", "to": "tool_use"})
        )
        return "tool_use"


def messages_tools(request: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The client tools a Messages request declared (``name`` and ``input_schema``; server tools
    such as web search are the API's own), or none under ``tool_choice: {"type": "none"}``."""
    choice = request.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "none":
        return {}
    declared: dict[str, Mapping[str, Any]] = {}
    for tool in request.get("tools") or ():
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        if tool.get("type") not in (None, "custom"):
            continue
        schema = tool.get("input_schema")
        declared[tool["name"]] = schema if isinstance(schema, dict) else {}
    if isinstance(choice, dict) and choice.get("type") == "tool":
        name = choice.get("name")
        return {name: declared[name]} if name in declared else {}
    return declared


def declares_messages_tools(request: Mapping[str, Any]) -> bool:
    """``bool(messages_tools(request))``, read up to the first client tool (arming asks only
    this; the rules read the whole list when an answer comes that they may change)."""
    choice = request.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("none", "tool"):
        return bool(messages_tools(request))
    for tool in request.get("tools") or ():
        if (
            isinstance(tool, dict)
            and isinstance(tool.get("name"), str)
            and tool.get("type") in (None, "custom")
        ):
            return True
    return False


def whole_messages_reply(reply: MessagesReply, body: bytes) -> bytes | None:
    """A whole Messages response through the rules: the new body, or ``None`` if unchanged."""
    if len(body) > MAX_WHOLE:
        return None
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return None
    blocks: list[Any] = []
    changed = False
    for block in content:
        if (
            not isinstance(block, dict)
            or block.get("type") != "text"
            or not isinstance(block.get("text"), str)
        ):
            blocks.append(block)
            continue
        scanner = reply.scanner()
        pieces = scanner.feed(block["text"]) + scanner.end()
        if not any(isinstance(p, Calls) for p in pieces):
            blocks.append(block)
            continue
        changed = True
        for piece in pieces:
            if isinstance(piece, Text):
                blocks.append({**block, "text": piece.text})
            else:
                blocks.extend(reply.tool_use(piece, len(blocks)))
    if not changed:
        return None
    stop = reply.stop_reason(message.get("stop_reason"))
    return orjson.dumps({**message, "content": blocks, "stop_reason": stop})


class MessagesStream(EventRewriter):
    """One streamed Messages response's rewriting: ``feed`` each chunk, ``finish`` at the end."""

    api = "messages"

    def __init__(
        self, reply: MessagesReply, *, on_error: Callable[[str], None] | None = None
    ) -> None:
        super().__init__(on_error)
        self.reply = reply
        self._shift = 0  # blocks inserted so far: an upstream block's index moves by this
        self._text: dict[int, _TextBlock] = {}  # upstream index -> its text block's state

    @property
    def changes(self) -> list[Change]:
        return self.reply.changes

    def _release(self) -> bytes:
        """The text blocks still open at the end of the body, closed."""
        out = bytearray()
        for index in list(self._text):
            out += self._close_text(index, stop_event=None)
        return bytes(out)

    def _let_go(self) -> bytes:
        """What the text blocks' scanners hold (best effort: the client's text before the rest
        passes as it came)."""
        released = bytearray()
        for index, block in list(self._text.items()):
            try:
                released += self._pieces(index, block.scanner.end())
            except Exception:  # the scanner is what failed: its text cannot be read back
                continue
        return bytes(released)

    def _event(self, event: bytes, end: int) -> bytes:
        data = data_of(event)
        if data is None:
            return event
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return event
        if not isinstance(payload, dict):
            return event
        kind = payload.get("type")
        index = payload.get("index")
        if kind == "content_block_start" and isinstance(index, int):
            block = payload.get("content_block")
            if isinstance(block, dict) and block.get("type") == "text":
                self._text[index] = _TextBlock(self.reply.scanner(), payload, event)
                if block.get("text"):
                    return self._pieces(index, self._text[index].scanner.feed(block["text"]))
                return b""  # held until its first text passes
            return self._moved(payload, event)
        if kind == "content_block_delta" and isinstance(index, int) and index in self._text:
            delta = payload.get("delta")
            if (
                isinstance(delta, dict)
                and delta.get("type") == "text_delta"
                and isinstance(delta.get("text"), str)
            ):
                return self._text_delta(index, delta["text"], event)
            return self._moved(payload, event)
        if kind == "content_block_stop" and isinstance(index, int) and index in self._text:
            return self._close_text(index, stop_event=payload)
        if kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and "stop_reason" in delta:
                stop = self.reply.stop_reason(delta.get("stop_reason"))
                if stop != delta.get("stop_reason"):
                    return _frame({**payload, "delta": {**delta, "stop_reason": stop}})
            return event
        return self._moved(payload, event)

    def _moved(self, payload: dict[str, Any], event: bytes) -> bytes:
        """An event of a block other than text: as it came, or with its index moved."""
        index = payload.get("index")
        if not self._shift or not isinstance(index, int):
            return event
        return _frame({**payload, "index": index + self._shift})

    def _text_delta(self, index: int, text: str, event: bytes) -> bytes:
        """A text delta: the event as it came when the block is shown, nothing moved and the
        scanner passed the text at once; else the pieces."""
        block = self._text[index]
        pieces = block.scanner.feed(text)
        unchanged = len(pieces) == 1 and isinstance(pieces[0], Text) and pieces[0].text == text
        if unchanged and not self._shift:
            start = b"" if block.started else block.raw
            block.started = True
            return start + event
        return self._pieces(index, pieces)

    def _pieces(self, index: int, pieces: list[Piece]) -> bytes:
        """Text pieces as text deltas of the current text block (started first if it is not);
        calls as tool_use blocks after the current text block, which they close."""
        block = self._text[index]
        out = bytearray()
        for piece in pieces:
            if isinstance(piece, Text):
                if not block.started:
                    moved = {**block.start, "index": index + self._shift}
                    out += block.raw if not self._shift else _frame(moved)
                    block.started = True
                out += _frame(
                    {
                        "type": "content_block_delta",
                        "index": index + self._shift,
                        "delta": {"type": "text_delta", "text": piece.text},
                    }
                )
                continue
            if block.started:  # the text before the call ends here
                out += _frame({"type": "content_block_stop", "index": index + self._shift})
                self._shift += 1
                block.started = False
            for tool in self.reply.tool_use(piece, index + self._shift):
                at = index + self._shift
                started = {**tool, "input": {}}
                out += _frame(
                    {"type": "content_block_start", "index": at, "content_block": started}
                )
                out += _frame(
                    {
                        "type": "content_block_delta",
                        "index": at,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": orjson.dumps(tool["input"]).decode(),
                        },
                    }
                )
                out += _frame({"type": "content_block_stop", "index": at})
                self._shift += 1
        return bytes(out)

    def _close_text(self, index: int, stop_event: dict[str, Any] | None) -> bytes:
        """The end of a text block: what its scanner holds, then its stop (or, for a block
        that showed nothing, the blocks after it move up by one)."""
        block = self._text[index]
        out = bytearray(self._pieces(index, block.scanner.end()))
        del self._text[index]
        if block.started:
            stop = stop_event or {"type": "content_block_stop"}
            out += _frame({**stop, "index": index + self._shift})
        else:
            self._shift -= 1
        return bytes(out)


class _TextBlock:
    """A text block being read: its scanner, its start event (as parsed and as it came), and
    whether that start was passed on yet."""

    __slots__ = ("raw", "scanner", "start", "started")

    def __init__(self, scanner: TextCalls, start: dict[str, Any], raw: bytes) -> None:
        self.scanner = scanner
        self.start = start
        self.raw = raw
        self.started = False


def _frame(payload: dict[str, Any]) -> bytes:
    kind = payload.get("type", "")
    return b"event: " + str(kind).encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"
