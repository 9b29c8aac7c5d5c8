"""response-tool-call-shape: streamed tool-call deltas get the ``index`` and ``id`` a client
needs, and ``arguments`` a string.

What: some upstreams stream a tool call without ``index`` (Gemini's OpenAI endpoint,
openai/openai-python#2806; SGLang, vercel/ai#5885), without ``id`` on its first delta (Ollama's
gpt-oss, continuedev/continue#13225), with ``arguments`` as an object (Ollama,
NousResearch/hermes-agent#104708) or ``function.name: null`` in later deltas (SGLang,
mistralai/mistral-vibe#594).
Why: openai-python's stream helper raises ``TypeError`` on a missing index; clients merge calls
whose index is missing or drop a call without an id; typed clients refuse an object where a
string is due or ``name: null``.
Repair: a delta without ``index`` takes its call's index (by its ``id`` if seen, else the call
being streamed if it carries no new id or name, else the next one); a call's first delta
without ``id`` gets one (``call_`` and 24 hex characters), the same for all its deltas; object
``arguments`` are written as compact JSON; ``name: null`` is dropped. A whole message's calls
get an ``id`` and string ``arguments`` the same way. A delta already well formed passes as it
came.
Safety: safe: no value the upstream sent is lost or altered (an object's JSON text holds it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from rules.engine.base import Change, RuleContext
from rules.replies.base import (
    ChoiceFix,
    ChoiceState,
    Needles,
    ReplyRule,
    Step,
    as_key,
    declares_tools,
)

NAME = "response-tool-call-shape"


class _Fix(ChoiceFix):
    def __init__(self, state: ChoiceState) -> None:
        self.state = state
        self.by_id: dict[str, int] = {}
        self.ids: dict[int, str] = {}
        self.current = -1

    def feed(self, step: Step) -> list[Step]:
        calls = step.delta.get("tool_calls")
        if not isinstance(calls, list) or not calls:
            return [step]
        fixed = [self._call(call) if isinstance(call, dict) else call for call in calls]
        if all(a is b for a, b in zip(fixed, calls, strict=True)):
            return [step]
        return [Step({**step.delta, "tool_calls": fixed}, step.finish)]

    def _call(self, call: dict[str, Any]) -> dict[str, Any]:
        out = call
        given = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        index = call.get("index")
        function = call.get("function") if isinstance(call.get("function"), dict) else None
        if not self.state.stream:  # a whole message: its calls in order, no index
            index = len(self.ids)
        elif not isinstance(index, int) or isinstance(index, bool):
            index = self._index_for(given, function)
            out = {**out, "index": index}
            self._record("added_index", index)
        if given is not None:
            self.by_id.setdefault(given, index)
            self.ids.setdefault(index, given)
        elif index not in self.ids:
            self.ids[index] = self.state.new_id()
            out = {**out, "id": self.ids[index]}
            self._record("added_id", index)
        self.current = index
        self.state.upstream_calls.add(index)
        if function is not None:
            new = dict(function)
            if isinstance(new.get("arguments"), dict | list):
                new["arguments"] = orjson.dumps(new["arguments"]).decode()
                self._record("wrote_arguments", index)
            if "name" in new and new["name"] is None:
                del new["name"]
                self._record("dropped_null_name", index)
            if new != function:
                out = {**out, "function": new}
        return out

    def _index_for(self, given: str | None, function: dict[str, Any] | None) -> int:
        if given is not None and given in self.by_id:
            return self.by_id[given]
        starts = given is not None or bool(function and function.get("name"))
        if self.current == -1 or starts:
            return max(self.state.upstream_calls, default=-1) + 1
        return self.current

    def _record(self, action: str, index: int) -> None:
        self.state.changes.append(Change(NAME, self.state.index, action, {"call": index}))


def arms(request: Mapping[str, Any], ctx: RuleContext) -> bool:
    """Only a request that declared tools can get tool calls back."""
    return declares_tools(request)


def fix(request: Mapping[str, Any], ctx: RuleContext, state: ChoiceState) -> ChoiceFix | None:
    return _Fix(state) if arms(request, ctx) else None


def needles(ctx: RuleContext) -> Needles:
    """It reads only ``tool_calls``."""
    return (as_key("tool_calls"),)


RULE = ReplyRule(
    NAME,
    "streamed tool-call deltas get their index and id, and string arguments",
    "Streamed tool calls without index or id, with object arguments or name: null.",
    "The missing index (by id, else the call being streamed) and id are added, objects"
    " written as JSON text, name: null dropped; well-formed deltas pass as they came.",
    "safe",
    True,
    fix,
    arms,
    needles=needles,
)
