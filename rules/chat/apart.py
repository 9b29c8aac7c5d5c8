"""How a chat list reads for the id and pairing rules' horizon (``rules.engine.apart``): the
ids its messages name, and the tool messages that answer the assistant turn before them.

``codex-call-ids``, ``blank-tool-call-ids``, ``duplicate-tool-call-ids``,
``displaced-tool-results``, ``missing-tool-call-ids``, ``orphan-tool-results`` and
``unanswered-tool-calls`` resume with ``TURNS.apart(apply)``: a new turn that names no id the
history holds, does not start with a tool message, and that the rule leaves alone.
"""

from __future__ import annotations

from typing import Any

from rules.engine.apart import Turns, key
from rules.engine.memo import per_run


@per_run  # the rules woken together ask it of the same new turn
def ids_of(messages: list[Any]) -> set[Any]:
    """Every id ``messages`` name: each entry's ``tool_call_id`` and its ``tool_calls``' ``id``,
    ``call_id`` and ``response_item_id``, whatever the role (the rules read none but these)."""
    found: set[Any] = set()
    for message in messages:
        if type(message) is not dict:
            continue
        if "tool_call_id" in message:
            found.add(key(message["tool_call_id"]))
        calls = message.get("tool_calls")
        if type(calls) is not list:
            continue
        for call in calls:
            if type(call) is dict:
                if "id" in call:
                    found.add(key(call["id"]))
                for alias in ("call_id", "response_item_id"):  # Codex's aliases
                    if alias in call:
                        found.add(key(call[alias]))
    return found


TURNS = Turns(ids_of, "tool")
