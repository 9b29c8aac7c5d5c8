"""How a Messages list reads for the id and pairing rules' horizon (``rules.engine.apart``): the
ids its blocks name, and the user messages that answer the assistant turn before them (a
``tool_result`` stands in the user message after its call).

``messages-blank-tool-use-ids``, ``messages-tool-use-id-charset``,
``messages-duplicate-tool-use-ids`` and ``messages-tool-result-pairing`` resume with
``TURNS.apart(apply)``: a new turn (Claude Code's is the assistant's calls and the user message
of their results) that names no id the history holds, does not start with a user message, and
that the rule leaves alone.
"""

from __future__ import annotations

from typing import Any

from rules.engine.apart import Turns, key
from rules.engine.memo import per_run


@per_run  # the rules woken together ask it of the same new turn
def ids_of(messages: list[Any]) -> set[Any]:
    """Every id ``messages`` name: each ``tool_use`` block's ``id`` and each ``tool_result``
    block's ``tool_use_id``, whatever the message's role and the value's type (the rules read
    none but these)."""
    found: set[Any] = set()
    for message in messages:
        content = message.get("content") if type(message) is dict else None
        if type(content) is not list:
            continue
        for block in content:
            if type(block) is not dict:
                continue
            kind = block.get("type")
            if kind == "tool_use" and "id" in block:
                found.add(key(block["id"]))
            elif kind == "tool_result" and "tool_use_id" in block:
                found.add(key(block["tool_use_id"]))
    return found


TURNS = Turns(ids_of, "user")
