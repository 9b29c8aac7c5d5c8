"""The chat-completions rules: pure functions over a ``messages`` list, one module each, and
``RULES``, their one explicit order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.chat import (
    anyof_parent_types,
    blank_tool_call_ids,
    bookkeeping_keys,
    codex_call_ids,
    consecutive_assistant_messages,
    consecutive_user_messages,
    developer_role,
    displaced_tool_results,
    duplicate_tool_call_ids,
    duplicate_tool_names,
    empty_text_parts,
    empty_tool_calls,
    empty_tool_parameters,
    empty_tools,
    function_names,
    image_parts,
    invalid_tool_arguments,
    leading_user_message,
    lone_surrogates,
    missing_thought_signatures,
    missing_tool_call_ids,
    null_content,
    orphan_tool_results,
    reasoning_content,
    replayed_history,
    request_values,
    system_messages,
    text_part_arrays,
    thinking_parts,
    thinking_sampling,
    thinking_tool_choice,
    tool_call_content,
    tool_call_ids,
    tool_call_type,
    tool_message_name,
    tool_user_bridge,
    trailing_assistant,
    unanswered_tool_calls,
    unknown_message_fields,
    unknown_roles,
    unsupported_message_keys,
    unsupported_parameters,
    unsupported_part_types,
    unsupported_tool_keys,
)
from rules.engine.base import Rule
from rules.engine.pipeline import PipelineResult, default_steps, run_rules

#: The one ordered tuple of rules. Order is behaviour; each position is justified:
RULES: tuple[Rule, ...] = (
    # 0. Text first: every later rule compares and copies strings, and a lone surrogate cannot
    #    even be serialized back to UTF-8 (the proxy reads such bodies specially, see
    #    rules/providers/sanitize.py, and skips this step for bodies orjson could read).
    lone_surrogates.RULE,
    # Replayed history before anything merges or renames: a doubled transcript is recognized
    #    as the agent stored it (a merge across its seam would hide the replay), and the replay
    #    repeats every tool-call id, which the id rules below would otherwise rename and keep.
    replayed_history.RULE,
    # Codex call ids right after: every later rule pairs a result with its call by `id` (the
    #    merge, the id renames, displaced/missing/orphan/unanswered), and the aliases must be read
    #    before the key rules strip `call_id` from the calls; after replayed-history, so a doubled
    #    transcript is collapsed first and each alias is declared by the one copy that stays.
    codex_call_ids.RULE,
    # Blank call ids right after (an alias the previous rule read is the call's id by now):
    #    a call and its result naming the same empty id get one id before any rule pairs by id,
    #    which would take the result for an orphan.
    blank_tool_call_ids.RULE,
    # Roles and keys in the upstream's schema before any rule reads them: `developer` is a
    #    system message to the system rules below, and no merge carries a key the upstream
    #    refuses (`timestamp`, `reasoning_content`, hermes E16).
    developer_role.RULE,
    # Messages with a role the provider does not know go before any rule reads roles (the
    #    merges, the pairing blocks, the sequence rules) and after `developer` became `system`
    #    where only that is known; an assistant pair or a tool block the removed record stood
    #    between is then adjacent for the rules below to merge or pair.
    unknown_roles.RULE,
    # Anthropic thinking parts out of assistant content before the key allowlist (which then
    #    judges the `reasoning_content` they may become, so no later rule adds a key the upstream
    #    refuses), before reasoning-content (a moved text is that turn's reasoning, not a
    #    placeholder's place), and before text-part-arrays and empty-tool-calls, which collapse
    #    the text parts left behind and remove a turn left with nothing.
    thinking_parts.RULE,
    # Part types the provider named as refused, as text where one reads as text: after the
    #    thinking parts (left to the rule above) and before text-part-arrays collapses the text
    #    parts it leaves.
    unsupported_part_types.RULE,
    unknown_message_fields.RULE,
    # The message keys a refusal named, with the allowlist: before any merge carries one.
    unsupported_message_keys.RULE,
    # An agent's bookkeeping keys (`timestamp`, `_…`, `call_id` on calls) go with the other
    #    keys no provider reads; after the allowlist (which, where on, already dropped most) and
    #    before any rule copies or merges a message that carries one.
    bookkeeping_keys.RULE,
    # Reasoning back on the tool-call turns as the client sent them, before any rule merges
    #    turns, renames ids or repairs arguments: the stash's keys are the calls the model
    #    produced (a merge then keeps the first non-empty reasoning, hermes R9).
    reasoning_content.RULE,
    # 1. Merge split assistant turns first: the union of their tool calls must be known
    #    before ids are checked, or the second half's results look orphaned (hermes E1).
    consecutive_assistant_messages.RULE,
    # 2. Repair arguments before ids: duplicate detection compares canonical arguments, which
    #    only exist once malformed JSON has been repaired.
    invalid_tool_arguments.RULE,
    # 3. Make ids unique on the merged, repaired calls: drop exact replays inside a turn,
    #    rename ids reused by a later turn in the call and its result alike.
    duplicate_tool_call_ids.RULE,
    # 4-7. Pair results with calls, on unique ids (3) and merged turns (1, hermes E1). Each
    #    step lets the next one judge less: an explicit id beats a position, and a drop or a
    #    stub is the last resort.
    # 4. Bring results displaced past another message back to their call first: an id naming
    #    one earlier call is the strongest evidence, and it settles which calls are unanswered.
    displaced_tool_results.RULE,
    # 5. Only then recover missing tool_call_ids by position: the calls counted as unanswered
    #    are the really unanswered ones, so "the one call left" is not a displaced one's.
    missing_tool_call_ids.RULE,
    # 6. Drop what still answers no call of its block, now that 4 and 5 have placed what they
    #    could.
    orphan_tool_results.RULE,
    # 7. Stub every call still unanswered, last of the pairing rules, so a stub stands only
    #    where no result exists, right after the results that stayed (hermes E27).
    unanswered_tool_calls.RULE,
    # 8. The shape of each call, once calls are merged, repaired and paired (none of those
    #    reads or writes `type`): a call without one gets "function".
    tool_call_type.RULE,
    # Identifiers in the upstream's format, once calls are merged, unique and paired (1-8): one
    #    id map reaches a call and its result alike; then function names (tools, history and
    #    tool_choice, one map), then each tool message's name from its call's (renamed) name.
    tool_call_ids.RULE,
    function_names.RULE,
    tool_message_name.RULE,
    # Images before content shape: a stripped image leaves a text-only part list for the next
    #    rule to collapse; a relocated one adds a user message after its whole tool block (the
    #    calls are final by now, 1-8), before the sequence rules place and merge users.
    image_parts.RULE,
    # Content shape, once images have been handled (a list holding one is left as it is) and
    #    every call is final: text-only part lists become strings, then null/absent content
    #    becomes a string except next to tool calls, then those calls' empty content takes the
    #    provider's shape; before 9, which removes an assistant left with no content and no
    #    calls (`""` and `null` alike).
    # Empty text parts beside others go first, so a list left with one text part collapses.
    empty_text_parts.RULE,
    text_part_arrays.RULE,
    null_content.RULE,
    tool_call_content.RULE,
    # 9. After every rule that writes tool calls, so that none can leave `tool_calls: []` or an
    #    empty assistant behind (hermes #74101): the final payload satisfies every invariant.
    empty_tool_calls.RULE,
    # Role sequence, on the final assistants: these move, merge or insert whole messages and
    # never write a tool call, so 9 still holds after them.
    # System messages first: hoisting one can leave two users adjacent, and `later: user` adds
    # users; the next rule merges them.
    system_messages.RULE,
    # Merge adjacent users, those the system step put together included.
    consecutive_user_messages.RULE,
    # A user message opens the conversation: checked once hoisted systems are out of the way;
    # the placeholder goes before a non-user, so it never makes two users adjacent.
    leading_user_message.RULE,
    # Bridge tool -> user once users are merged and placed (system-messages' `later: user`
    # included): the bridge goes right before the final user and never makes two users adjacent.
    tool_user_bridge.RULE,
    # The end of the conversation last among message rules: no later rule moves or adds one,
    # and a user appended after the trailing assistant follows an assistant, as every table wants.
    trailing_assistant.RULE,
    # Gemini's thought signatures once the sequence is final: the rule reads which steps form
    #    the current turn (after the last user message), which the sequence rules above may move;
    #    the calls themselves are final since 1-9 (merged, unique, paired, renamed).
    missing_thought_signatures.RULE,
    # Request-level fields last: they read no message, and no message rule reads them (the
    # tools' names are final once function-names ran). An empty `tools` goes first, so the
    # rules after it judge only a real list; duplicates go before the parameter schema is
    # added, so the definition kept is the one completed; the thinking-mode rules last, each
    # reading thinking mode from the request as the client set it (no rule here changes it).
    empty_tools.RULE,
    duplicate_tool_names.RULE,
    empty_tool_parameters.RULE,
    # A completed schema (the rule above) can then have its anyOf types moved.
    anyof_parent_types.RULE,
    thinking_tool_choice.RULE,
    thinking_sampling.RULE,
    # What a refusal named of the request's own fields last: the thinking rules above read
    # thinking mode as the client set it, before a value is replaced or a parameter dropped.
    request_values.RULE,
    unsupported_parameters.RULE,
    unsupported_tool_keys.RULE,
)

RULES_BY_NAME: Mapping[str, Rule] = {rule.name: rule for rule in RULES}


def sanitize_messages(
    messages: list[Any],
    settings: Mapping[str, Mapping[str, Any] | bool] | None = None,
) -> PipelineResult:
    """Library entry point: repair ``messages`` without touching the caller's objects."""
    return run_rules(messages, default_steps(RULES, settings), private=False)


__all__ = ["RULES", "RULES_BY_NAME", "sanitize_messages"]
