"""responses-item-ids: an ``input`` item's ``id`` the endpoint refuses is not sent.

What: an item's ``id`` is optional (``call_id`` pairs a call with its output; a message or reasoning
item is read by its content). It is removed where the endpoint refuses it: an item of a type named
in option ``prefixes`` whose ``id`` does not begin with the prefix given for it (``{"function_call":
"fc", "reasoning": "rs"}``), any ``id`` longer than option ``max_length`` (0: no limit), an ``id``
listed in option ``ids``, and with option ``unpaired``, the ``id`` of each message and function
call replayed after a reasoning item of its own turn that has no id. Empty and off by default:
recovery fills them from the refusal (the prefix, the length, the item it names and its shape,
rules/providers/named_repairs.py). An item reference (``item_reference``, or an object of an
``id`` alone) keeps its id: it is all the reference is. The change names the item's type and the
reason, never the id.
Why: OpenAI's and Copilot's Responses API check the ids a client carries over from another source:
"Invalid 'input[1].id': 'item_A9v…'. Expected an ID that begins with 'fc'." (Wei-Shaw/sub2api#3785),
"… Expected an ID that begins with 'rs'." for a ``thinking_0``
(github/copilot-language-server-release#46), "Invalid 'input[2].id': string too long. Expected a
string with maximum length 64, but got a string with length 416 instead." (can1357/oh-my-pi#284);
and a message item's id asks for the reasoning item of its response: "Item 'msg_…' of type
'message' was provided without its required 'reasoning' item: 'rs_…'." when that reasoning item is
replayed without its id (NousResearch/hermes-agent#97442, #97427; the client's fix, #97445, drops
the message's id too; docs/providers.md#openai-responses). Safety: unsafe: the item goes without
its id (what it says is kept; a stored item it named is no longer referred to).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.named import names, renames
from rules.responses.items import is_reference, item_type

NAME = "responses-item-ids"

PREFIXES: Option[dict[str, str]] = Option(
    "prefixes", {}, "Item type -> the prefix its id must begin with: `{function_call: fc}`."
)
MAX_LENGTH = Option("max_length", 0, "The longest id kept (0: no limit).")
IDS: Option[list[str]] = Option(
    "ids", [], "Item ids dropped wherever they stand: `[msg_…]` (recovery names them)."
)
UNPAIRED = Option(
    "unpaired",
    False,
    "Drop the id of each message and function call replayed after a reasoning item of its own "
    "turn (since the client's last message or a tool's output) that has no id.",
)


#: The items OpenAI refuses with an id beside a reasoning item without its own: "Item 'msg_…' of
#: type 'message' was provided without its required 'reasoning' item: 'rs_…'"
#: (NousResearch/hermes-agent#97442), "… of type 'function_call' …" (cline/cline#12242,
#: continuedev/continue#10018, mastra-ai/mastra#8738). A built-in tool's call (``web_search_call``,
#: ``mcp_approval_request``, …) requires its id: never dropped here.
UNPAIRED_TYPES = frozenset({"message", "function_call"})


def unpaired(items: list[Any]) -> set[int]:
    """The positions of the messages and function calls replayed after a reasoning item of
    their own turn (since the last user, system or developer message or tool output) that
    carries no id, which hold an id (``UNPAIRED_TYPES``). Never an item reference."""
    found: set[int] = set()
    reasoning: Any = None
    for index, item in enumerate(items):
        kind = item_type(item) or ""
        if kind == "reasoning":
            reasoning = item
        elif kind.endswith("_output") or (
            isinstance(item, dict) and item.get("role") in ("user", "system", "developer")
        ):
            reasoning = None  # a tool's output or the client's turn: the next response's items
        elif (
            kind in UNPAIRED_TYPES
            and reasoning is not None
            and not isinstance(reasoning.get("id"), str)
            and isinstance(item, dict)
            and isinstance(item.get("id"), str)
            and not is_reference(item)
        ):
            found.add(index)
    return found


def _each_alone(options: Mapping[str, Any]) -> bool:
    """Whether each item is decided by itself: not with ``unpaired``."""
    return options.get("unpaired") is not True


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    prefixes = renames(PREFIXES.of(ctx))
    limit = MAX_LENGTH.of(ctx)
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else 0
    named = frozenset(names(IDS.of(ctx)))
    shaped = unpaired(items) if UNPAIRED.of(ctx) is True else set()
    if not prefixes and not limit and not named and not shaped:
        return Outcome(items)
    out: list[Any] | None = None
    changes: list[Change] = []
    for index, item in enumerate(items):
        value = item.get("id") if isinstance(item, dict) else None
        if not isinstance(value, str) or is_reference(item):
            continue  # a reference is its id: without it, what it refers to is lost
        kind = item_type(item)
        prefix = prefixes.get(kind or "")
        reason = None
        if value in named:
            reason = "named"
        elif index in shaped:
            reason = "unpaired"
        elif prefix is not None and not value.startswith(prefix):
            reason = "prefix"
        elif limit and len(value) > limit:
            reason = "too_long"
        if reason is None:
            continue
        out = list(items) if out is None else out
        out[index] = {key: inner for key, inner in item.items() if key != "id"}
        detail = {"type": kind, "reason": reason, "length": len(value)}
        changes.append(Change(NAME, index, "dropped_id", detail))
    return Outcome(items) if out is None else Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Drop an `input` item's id the endpoint refuses (a foreign prefix, too long, named).",
    defect="an item id the endpoint refuses: \"Invalid 'input[1].id': 'item_…'. Expected an ID "
    "that begins with 'fc'.\" (Wei-Shaw/sub2api#3785), \"Invalid 'input[2].id': string too long. "
    'Expected a string with maximum length 64" (can1357/oh-my-pi#284), "Item '
    "'msg_…' of type 'message' was provided without its required 'reasoning' item: 'rs_…'.\" "
    "for a reasoning item replayed without its id (NousResearch/hermes-agent#97442; "
    "docs/providers.md#openai-responses)",
    repair="remove the id of an item of a type in option `prefixes` that does not begin with its "
    "prefix, longer than option `max_length`, listed in option `ids`, or (option `unpaired`) a "
    "message's or a function call's replayed after a reasoning item of its own turn that has no "
    "id; recovery fills them from "
    "the refusal. The item is kept; an item reference (its id is all it is) is never touched",
    safety="unsafe",
    default=False,
    apply=apply,
    # each item is decided by itself; with ``unpaired``, by its turn's reasoning item: whole
    horizon=per_message(apply, holds=_each_alone),
    options=(PREFIXES, MAX_LENGTH, IDS, UNPAIRED),
)
