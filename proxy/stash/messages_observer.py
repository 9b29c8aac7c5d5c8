"""Watch an Anthropic Messages response go by and keep each tool-use turn's thinking blocks.

The same relay contract as the chat observer (``proxy.stash.observer``): ``feed`` every chunk,
``finish`` at the end, never a delay or an exception for the relay. One response is one
assistant turn. A JSON body (``content`` blocks) is read once at the end. An SSE stream is read
event by event: ``content_block_start`` opens a block at its ``index`` (a ``thinking`` block with
its text and signature so far, a ``redacted_thinking`` block with its ``data``, a ``tool_use``
block with its id, name and input), ``content_block_delta`` adds a ``thinking_delta``,
``signature_delta`` or ``input_json_delta`` to it, and ``message_stop`` (or the end of the body)
completes the turn; an ``error`` event drops it. A turn with ``tool_use`` blocks and thinking
is stored at once, before the client can send its next one: its thinking blocks exactly as the
model produced them (``rules.messages.missing_thinking.stored_form``), under the key of its
``tool_use`` blocks (``turn_key``), which is what the rule looks up when a client sends the turn
back without them. Text is never logged.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.stash.observer import MAX_BLOCKS, BodyObserver, OnLimit, OnTurn
from rules.messages.blocks import THINKING_TYPES
from rules.messages.missing_thinking import stored_form, turn_key


class MessagesObserver(BodyObserver):
    """One Messages response's observer. ``stream`` says SSE (else one JSON body)."""

    __slots__ = ("_blocks", "_started")

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
        #: index -> the block being streamed: ``{"type": ...}`` and, for a thinking block, lists
        #: of ``thinking`` and ``signature`` pieces; for ``tool_use``, ``input`` pieces. What
        #: they hold counts toward the response's bound (``BodyObserver.keep``): past it the
        #: turn is not stored.
        self._blocks: dict[int, dict[str, Any]] = {}
        self._started = False

    def _clear(self) -> None:
        self._blocks = {}

    # --- SSE ------------------------------------------------------------------------------------

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "content_block_delta":
            self._delta(event)
        elif kind == "content_block_start":
            self._start(event)
        elif kind == "message_stop":
            self._end()
        elif kind == "error":
            self._drop()  # the turn did not complete: nothing of it is kept

    def _start(self, event: dict[str, Any]) -> None:
        index, block = event.get("index"), event.get("content_block")
        if type(index) is not int or type(block) is not dict:
            return
        kind = block.get("type")
        if index not in self._blocks and len(self._blocks) >= MAX_BLOCKS:
            self.give_up("blocks")
            return
        if not self._started:
            self._started = True
            if kind not in THINKING_TYPES:
                # A thinking model thinks before it answers: a turn that starts otherwise has
                # nothing to keep, and the rest of the stream is not read.
                self._drop()
                return
        if kind == "thinking":
            text, signature = block.get("thinking"), block.get("signature")
            if not self._count(text) or not self._count(signature):
                return
            self._blocks[index] = {
                "type": kind,
                "thinking": [text] if type(text) is str and text else [],
                "signature": [signature] if type(signature) is str else None,
            }
        elif kind == "redacted_thinking":
            data = block.get("data")
            if type(data) is str and self._count(data):
                self._blocks[index] = {"type": kind, "data": data}
        elif kind == "tool_use":
            given = block.get("input")
            if not self._count(block.get("id")) or not self._count(block.get("name")):
                return
            if given and not self.keep(len(orjson.dumps(given))):  # within one event's line
                return
            self._blocks[index] = {
                "type": kind,
                "id": block.get("id"),
                "name": block.get("name"),
                "input": block.get("input"),
                "pieces": [],
            }

    def _delta(self, event: dict[str, Any]) -> None:
        index, delta = event.get("index"), event.get("delta")
        if type(delta) is not dict:
            return
        block = self._blocks.get(index) if type(index) is int else None
        if block is None:
            return
        kind = delta.get("type")
        if kind == "thinking_delta" and block["type"] == "thinking":
            text = delta.get("thinking")
            if type(text) is not str:
                # A piece chatmend cannot read: the text it stored would not be the one the
                # signature signs, so the turn is not stored at all.
                self._drop()
            elif text and self._count(text):
                block["thinking"].append(text)
        elif kind == "signature_delta" and block["type"] == "thinking":
            signature = delta.get("signature")
            if type(signature) is str and self._count(signature):
                if block["signature"] is None:
                    block["signature"] = []
                block["signature"].append(signature)
        elif kind == "input_json_delta" and block["type"] == "tool_use":
            piece = delta.get("partial_json")
            if type(piece) is str and piece and self._count(piece):
                block["pieces"].append(piece)

    def _broken(self) -> None:
        """An event chatmend could not parse: it may have been a piece of a signed thinking
        block, and a block stored without it would not be what its signature signs."""
        self._drop()

    def _count(self, text: Any) -> bool:
        """Count a string about to be kept (``False``: past the bound, the response is no longer
        observed and nothing of it is kept)."""
        return self.keep(len(text)) if type(text) is str else True

    def _end(self) -> None:
        blocks = [self._built(self._blocks[index]) for index in sorted(self._blocks)]
        self._drop()
        self._keep(blocks)

    def _drop(self) -> None:
        self._blocks = {}
        self._off = True

    @staticmethod
    def _built(block: dict[str, Any]) -> dict[str, Any]:
        """A streamed block as the JSON body would have held it."""
        kind = block["type"]
        if kind == "thinking":
            built = {"type": kind, "thinking": "".join(block["thinking"])}
            if block["signature"] is not None:
                built["signature"] = "".join(block["signature"])
            return built
        if kind == "tool_use":
            # The input streams as JSON text; a tool without arguments may stream none (or
            # ``""``): its input is then the start's (``{}``).
            text = "".join(block["pieces"])
            given = text if text.strip() else block["input"]
            return {"type": kind, "id": block["id"], "name": block["name"], "input": given}
        return {"type": kind, "data": block["data"]}

    # --- a JSON body ----------------------------------------------------------------------------

    def _body(self, data: dict[str, Any]) -> None:
        content = data.get("content")
        if type(content) is list:
            self._keep([block for block in content if type(block) is dict])

    # --- both -----------------------------------------------------------------------------------

    def _keep(self, blocks: list[dict[str, Any]]) -> None:
        """Store the turn's thinking blocks under its ``tool_use`` key: only a turn that called
        a tool (the only turns the rule restores) and whose thinking says something (empty,
        unsigned blocks are what the placeholder gives anyway)."""
        thinking = [_exact(block) for block in blocks if block.get("type") in THINKING_TYPES]
        if not thinking or None in thinking:
            return  # no thinking, or a block chatmend could not give back exactly
        kept = [block for block in thinking if block is not None]
        if not any(
            block.get("thinking") or block.get("signature") or block.get("data") for block in kept
        ):
            return
        key = turn_key(self.scope, blocks)
        if key is not None:
            self._remember(key, stored_form(kept))


def _exact(block: dict[str, Any]) -> dict[str, Any] | None:
    """The fields of a thinking block a client sends back (``type``, ``thinking`` and
    ``signature`` if it has one; ``type``, ``data``), their values untouched; ``None`` for a
    malformed block."""
    if block.get("type") == "thinking":
        text, signature = block.get("thinking"), block.get("signature")
        if type(text) is not str:
            return None
        if signature is None:
            return {"type": "thinking", "thinking": text}
        if type(signature) is not str:
            return None
        return {"type": "thinking", "thinking": text, "signature": signature}
    data = block.get("data")
    return {"type": "redacted_thinking", "data": data} if type(data) is str else None
