"""chatmend's Responses API rules: pure functions over a ``/v1/responses`` ``input`` list.

The same ``Rule`` type, logging, toggles (the config's ``rules:`` section; names are unique across
chat and Responses rules) and fail-open pipeline as the chat rules in ``rules.RULES``; their
``messages`` argument is the request's ``input`` list. A Responses request runs under its
profile's Responses plan (``Profile.responses``: most profiles keep the rules' defaults;
``rules.providers.planner``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.engine.base import Rule
from rules.engine.order import EVERY, Before, before
from rules.engine.pipeline import PipelineResult, default_steps, run_rules
from rules.responses import (
    blank_call_ids,
    call_ids,
    compaction,
    context_management,
    displaced_messages,
    duplicate_items,
    early_outputs,
    invalid_arguments,
    item_ids,
    lone_surrogates,
    orphan_outputs,
    reasoning_order,
    replayed_history,
    request_values,
    server_tools,
    unanswered_calls,
    unpersisted_items,
    unsupported_item_keys,
    unsupported_parameters,
    unsupported_parts,
    unsupported_tool_keys,
)

#: The one ordered tuple of Responses rules. Order is behaviour: each position is justified by
#: the reasons in ``ORDER`` below (tests/rules/test_order.py holds the tuple to every one of them).
RESPONSES_RULES: tuple[Rule, ...] = (
    # Text, the input as the server reads it, a doubled history.
    lone_surrogates.RULE,
    compaction.RULE,
    replayed_history.RULE,
    # Keys, ids and parts the endpoint refuses; items that only point to a stored one.
    unsupported_item_keys.RULE,
    item_ids.RULE,
    unsupported_parts.RULE,
    unpersisted_items.RULE,
    # 3. Unique item ids; 4-8. the pairing.
    duplicate_items.RULE,
    blank_call_ids.RULE,
    call_ids.RULE,
    orphan_outputs.RULE,
    early_outputs.RULE,
    reasoning_order.RULE,
    displaced_messages.RULE,
    unanswered_calls.RULE,
    # 9. Inside a call item.
    invalid_arguments.RULE,
    # 10. Request level.
    context_management.RULE,
    request_values.RULE,
    unsupported_parameters.RULE,
    server_tools.RULE,
    unsupported_tool_keys.RULE,
)

#: The pairing, 4-8, by the one law (rules.engine.pairing: the k-th output naming X answers the
#: k-th call naming X, wherever each stands).
_PAIRING = (
    "responses-blank-call-ids",
    "responses-call-ids",
    "responses-orphan-outputs",
    "responses-early-outputs",
    "responses-reasoning-order",
    "responses-displaced-messages",
    "responses-unanswered-calls",
)
#: The rules that read, move or drop items.
_ITEMS = (
    "responses-replayed-history",
    "responses-unsupported-item-keys",
    "responses-item-ids",
    "responses-unsupported-parts",
    "responses-unpersisted-items",
    "responses-duplicate-items",
    *_PAIRING,
    "responses-invalid-arguments",
)
#: The request-level rules.
_REQUEST = (
    "responses-context-management",
    "responses-request-values",
    "responses-unsupported-parameters",
    "responses-server-tools",
    "responses-unsupported-tool-keys",
)

#: Why ``RESPONSES_RULES`` is in the order it is (``rules.engine.order``).
ORDER: tuple[Before, ...] = (
    before(
        "responses-lone-surrogates",
        EVERY,
        "0. Text first, as for chat: later rules compare and copy strings.",
    ),
    before(
        "responses-compaction",
        _ITEMS,
        "1. The input as the server reads it, before any repair: items a checkpoint replaces are "
        "not repaired for nothing, and outputs whose call it left out are dropped by "
        "orphan-outputs (4).",
    ),
    before(
        "responses-replayed-history",
        (
            "responses-unsupported-item-keys",
            "responses-item-ids",
            "responses-duplicate-items",
            *_PAIRING,
        ),
        "2. A doubled history before anything dedupes, renames or drops ids: the replay repeats "
        "every item id and call_id, which 3 and 4 would otherwise drop piecemeal or rename and "
        "keep.",
    ),
    before(
        ("responses-unsupported-item-keys", "responses-item-ids", "responses-unsupported-parts"),
        ("responses-duplicate-items", *_PAIRING),
        "The item keys and part types a refusal named (and ids the endpoint refuses), before any "
        "rule compares or moves items: a dropped `id` is then no duplicate to remove.",
    ),
    before(
        "responses-unpersisted-items",
        ("responses-duplicate-items", *_PAIRING),
        "With `store: false`, items that only point to a stored one go before any rule pairs or "
        "moves items (a reasoning reference is no item a message needs after it then).",
    ),
    before(
        "responses-duplicate-items",
        _PAIRING,
        "3. Unique item ids (a duplicated `id` field removed, the item kept), before pairing: no "
        "call or output is dropped here, so every output still has the call it answers.",
    ),
    before(
        "responses-blank-call-ids",
        "responses-call-ids",
        "4. A call and its output naming the same blank call_id get one id before the ids are "
        "made unique and short.",
    ),
    before(
        "responses-call-ids",
        _PAIRING[2:],
        "4. Ids unique and short, so that one call_id means one call, renamed in the call and its "
        "output alike, before anything pairs by call_id.",
    ),
    before(
        "responses-orphan-outputs",
        ("responses-early-outputs", "responses-displaced-messages", "responses-unanswered-calls"),
        "5. Drop what answers no call (a name no call carries, a second answer) before anything "
        "moves an output: what is moved is an answer.",
    ),
    before(
        "responses-early-outputs",
        ("responses-displaced-messages", "responses-unanswered-calls"),
        "6. An output placed before its call moves after it (kept, not dropped as an orphan), "
        "before the messages between a call and its (now single, later) output are moved.",
    ),
    before(
        "responses-reasoning-order",
        "responses-displaced-messages",
        "A message item of a reasoning response back after its reasoning item, before the "
        "displaced messages move what stands between a call and its output after the output.",
    ),
    before(
        "responses-displaced-messages",
        "responses-unanswered-calls",
        "7-8. Move what stands between a call and its output; stubs last, right after their "
        "call, where nothing can come between.",
    ),
    before(
        "responses-replayed-history",
        "responses-invalid-arguments",
        "9. Arguments inside a call item: no rule before it reads them but replayed-history, "
        "which compares them canonically, and a call it drops needs no repair.",
    ),
    before(
        _ITEMS,
        _REQUEST,
        "10. Request level after the items: these read no item, and no item rule reads them; "
        "unsupported-parameters may move `instructions` into `input`, so it runs after every "
        "item rule.",
    ),
    before(
        "responses-server-tools",
        "responses-unsupported-tool-keys",
        "The tool declarations the endpoint does not take go before a key is dropped from the "
        "tools that stay: a removed tool's keys need no repair, and the change names only the "
        "tools sent.",
    ),
    before(
        "responses-request-values",
        "responses-unsupported-parameters",
        "What a refusal named of the request's own fields: a value replaced, then a parameter "
        "dropped.",
    ),
)

RESPONSES_RULES_BY_NAME: Mapping[str, Rule] = {rule.name: rule for rule in RESPONSES_RULES}


def sanitize_input(
    items: list[Any],
    settings: Mapping[str, Mapping[str, Any] | bool] | None = None,
    *,
    request: Mapping[str, Any] | None = None,
) -> PipelineResult:
    """Library entry point: repair a Responses ``input`` list without touching the caller's
    objects (``request``: the other top-level fields, for the request-level rule)."""
    return run_rules(items, default_steps(RESPONSES_RULES, settings), request=request)


__all__ = ["ORDER", "RESPONSES_RULES", "RESPONSES_RULES_BY_NAME", "sanitize_input"]
