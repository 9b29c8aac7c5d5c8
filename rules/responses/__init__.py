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
    unanswered_calls,
    unpersisted_items,
    unsupported_item_keys,
    unsupported_parameters,
    unsupported_parts,
    unsupported_tool_keys,
)

#: The one ordered tuple of Responses rules. Order is behaviour; each position is justified:
RESPONSES_RULES: tuple[Rule, ...] = (
    # 0. Text first, as for chat: later rules compare and copy strings.
    lone_surrogates.RULE,
    # 1. The input as the server reads it, before any repair: items a checkpoint replaces are
    #    not repaired for nothing, and outputs whose call it left out are dropped below (4).
    compaction.RULE,
    # 2. A doubled history before anything dedupes or renames: the replay repeats every item id
    #    and call_id, which 3 and 4 would otherwise drop piecemeal or rename and keep.
    replayed_history.RULE,
    # The item keys and part types a refusal named, before any rule compares or moves items
    #    (a dropped `id` is then no duplicate to remove).
    unsupported_item_keys.RULE,
    item_ids.RULE,
    unsupported_parts.RULE,
    # With `store: false`, items that only point to a stored one go before any rule pairs or
    #    moves items (a reasoning reference is no item a message needs after it then).
    unpersisted_items.RULE,
    # 3. Unique item ids (a duplicated `id` field removed, the item kept), before pairing: no
    #    call or output is dropped here, so every output still has the call it answers.
    duplicate_items.RULE,
    # 4-8. Pairing, by the one law (rules.engine.pairing: the k-th output naming X answers the
    #    k-th call naming X, wherever each stands): ids (unique, short) so that one call_id
    #    means one call, renamed in the call and its output alike; then drop what answers no
    #    call (a name no call carries, a second answer); then move an output placed before its
    #    call after it (kept, not dropped as an orphan); then move what stands between a call
    #    and its (now single, later) output; stubs last, right after their call, where nothing
    #    can come between.
    blank_call_ids.RULE,
    call_ids.RULE,
    orphan_outputs.RULE,
    early_outputs.RULE,
    # A message item of a reasoning response back after its reasoning item, before the
    #    displaced messages move what stands between a call and its output after the output.
    reasoning_order.RULE,
    displaced_messages.RULE,
    unanswered_calls.RULE,
    # 9. Inside a call item: its arguments (no rule above reads them but replayed-history,
    #    which compares them canonically, and a call it drops needs no repair).
    invalid_arguments.RULE,
    # 10. Request level: reads no item, and no item rule reads it.
    context_management.RULE,
    # What a refusal named of the request's own fields: a value replaced, then a parameter
    #    dropped (`instructions` moved into `input`, so after every item rule).
    request_values.RULE,
    unsupported_parameters.RULE,
    unsupported_tool_keys.RULE,
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


__all__ = ["RESPONSES_RULES", "RESPONSES_RULES_BY_NAME", "sanitize_input"]
