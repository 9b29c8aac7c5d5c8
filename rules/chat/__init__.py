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
from rules.engine.order import EVERY, Before, before
from rules.engine.pipeline import PipelineResult, default_steps, run_rules

#: The one ordered tuple of rules. Order is behaviour: each position is justified by the reasons
#: in ``ORDER`` below (tests/rules/test_order.py holds the tuple to every one of them).
RULES: tuple[Rule, ...] = (
    # Text, and what the client's own history says before anything reads it.
    lone_surrogates.RULE,
    replayed_history.RULE,
    codex_call_ids.RULE,
    blank_tool_call_ids.RULE,
    # Roles, parts and keys in the upstream's schema.
    developer_role.RULE,
    unknown_roles.RULE,
    thinking_parts.RULE,
    unsupported_part_types.RULE,
    unknown_message_fields.RULE,
    unsupported_message_keys.RULE,
    bookkeeping_keys.RULE,
    reasoning_content.RULE,
    # 1-8. Calls merged, repaired, unique, paired, shaped.
    consecutive_assistant_messages.RULE,
    invalid_tool_arguments.RULE,
    duplicate_tool_call_ids.RULE,
    displaced_tool_results.RULE,
    missing_tool_call_ids.RULE,
    orphan_tool_results.RULE,
    unanswered_tool_calls.RULE,
    tool_call_type.RULE,
    # Identifiers and names in the upstream's format.
    tool_call_ids.RULE,
    function_names.RULE,
    tool_message_name.RULE,
    # Content shape.
    image_parts.RULE,
    empty_text_parts.RULE,
    text_part_arrays.RULE,
    null_content.RULE,
    tool_call_content.RULE,
    # 9. No empty tool_calls, no empty assistant.
    empty_tool_calls.RULE,
    # Role sequence.
    system_messages.RULE,
    consecutive_user_messages.RULE,
    leading_user_message.RULE,
    tool_user_bridge.RULE,
    trailing_assistant.RULE,
    missing_thought_signatures.RULE,
    # Request-level fields.
    empty_tools.RULE,
    duplicate_tool_names.RULE,
    empty_tool_parameters.RULE,
    anyof_parent_types.RULE,
    thinking_tool_choice.RULE,
    thinking_sampling.RULE,
    request_values.RULE,
    unsupported_parameters.RULE,
    unsupported_tool_keys.RULE,
)

#: The calls' rules before which the pairing reads a final call: merged (1), repaired (2),
#: unique (3).
_CALLS = ("consecutive-assistant-messages", "invalid-tool-arguments", "duplicate-tool-call-ids")
#: The pairing, 4-7: each step lets the next one judge less (an explicit id beats a position,
#: and a drop or a stub is the last resort).
_PAIRING = (
    "displaced-tool-results",
    "missing-tool-call-ids",
    "orphan-tool-results",
    "unanswered-tool-calls",
)
#: Every rule that writes a tool call or an assistant's content.
_CALL_WRITERS = (
    *_CALLS,
    *_PAIRING,
    "tool-call-type",
    "tool-call-ids",
    "function-names",
    "thinking-parts",
    "reasoning-content",
    "image-parts",
    "empty-text-parts",
    "text-part-arrays",
    "null-content",
    "tool-call-content",
)
#: The rules that move, merge or insert whole messages (the role sequence).
_SEQUENCE = (
    "system-messages",
    "consecutive-user-messages",
    "leading-user-message",
    "tool-user-bridge",
    "trailing-assistant",
)
#: The request-level rules over the tools.
_TOOLS = ("empty-tools", "duplicate-tool-names", "empty-tool-parameters", "anyof-parent-types")

#: What a refusal named of the request's own fields.
_NAMED = ("request-values", "unsupported-parameters", "unsupported-tool-keys")

#: Why ``RULES`` is in the order it is (``rules.engine.order``).
ORDER: tuple[Before, ...] = (
    before(
        "lone-surrogates",
        EVERY,
        "Text first: every later rule compares and copies strings, and a lone surrogate cannot "
        "even be serialized back to UTF-8 (the proxy reads such bodies specially, "
        "rules/providers/sanitize.py, and skips this step for bodies orjson could read).",
    ),
    before(
        "replayed-history",
        ("codex-call-ids", "blank-tool-call-ids", *_CALLS, "tool-call-ids"),
        "Replayed history before anything merges or renames: a doubled transcript is recognized "
        "as the agent stored it (a merge across its seam would hide the replay), and the replay "
        "repeats every tool-call id, which the id rules would otherwise rename and keep; each "
        "Codex alias is then declared by the one copy that stays.",
    ),
    before(
        "codex-call-ids",
        ("blank-tool-call-ids", *_CALLS, *_PAIRING, "tool-call-ids", "bookkeeping-keys"),
        "Codex call ids before every rule that pairs a result with its call by `id` (the merge, "
        "the id renames, displaced/missing/orphan/unanswered), and before the key rules strip "
        "`call_id` from the calls.",
    ),
    before(
        "blank-tool-call-ids",
        (*_CALLS, *_PAIRING),
        "A call and its result naming the same empty id get one id before any rule pairs by id, "
        "which would take the result for an orphan (an alias codex-call-ids read is the call's id "
        "by then).",
    ),
    before(
        "developer-role",
        ("unknown-roles", "unknown-message-fields", "system-messages", *_CALLS),
        "Roles in the upstream's schema before any rule reads them: `developer` is a system "
        "message to the system rules, and where only `system` is known it is no unknown role.",
    ),
    before(
        "unknown-roles",
        (*_CALLS, *_PAIRING, *_SEQUENCE),
        "Messages with a role the provider does not know go before any rule reads roles (the "
        "merges, the pairing blocks, the sequence rules): an assistant pair or a tool block the "
        "removed record stood between is then adjacent for them to merge or pair.",
    ),
    before(
        "thinking-parts",
        (
            "unsupported-part-types",
            "unknown-message-fields",
            "reasoning-content",
            "text-part-arrays",
            "empty-tool-calls",
        ),
        "Anthropic thinking parts out of assistant content before the key allowlist (which then "
        "judges the `reasoning_content` they may become, so no later rule adds a key the upstream "
        "refuses), before reasoning-content (a moved text is that turn's reasoning, not a "
        "placeholder's place), and before text-part-arrays and empty-tool-calls, which collapse "
        "the text parts left behind and remove a turn left with nothing.",
    ),
    before(
        "unsupported-part-types",
        "text-part-arrays",
        "Part types the provider named as refused, as text where one reads as text, before "
        "text-part-arrays collapses the text parts it leaves.",
    ),
    before(
        ("unknown-message-fields", "unsupported-message-keys"),
        ("bookkeeping-keys", *_CALLS, "consecutive-user-messages"),
        "The message keys the upstream refuses (its allowlist, the keys a refusal named) go "
        "before any merge carries one, and before the bookkeeping keys (where the allowlist is "
        "on, it already dropped most).",
    ),
    before(
        "bookkeeping-keys",
        (*_CALLS, "consecutive-user-messages"),
        "An agent's bookkeeping keys (`timestamp`, `_...`, `call_id` on calls) go before any rule "
        "copies or merges a message that carries one (hermes E16).",
    ),
    before(
        "reasoning-content",
        (*_CALLS, "tool-call-ids"),
        "Reasoning back on the tool-call turns as the client sent them, before any rule merges "
        "turns, renames ids or repairs arguments: the stash's keys are the calls the model "
        "produced (a merge then keeps the first non-empty reasoning, hermes R9).",
    ),
    before(
        "consecutive-assistant-messages",
        ("duplicate-tool-call-ids", *_PAIRING),
        "1. Merge split assistant turns first: the union of their tool calls must be known "
        "before ids are checked, or the second half's results look orphaned (hermes E1).",
    ),
    before(
        "invalid-tool-arguments",
        "duplicate-tool-call-ids",
        "2. Repair arguments before ids: duplicate detection compares canonical arguments, which "
        "only exist once malformed JSON has been repaired.",
    ),
    before(
        "duplicate-tool-call-ids",
        _PAIRING,
        "3. Make ids unique on the merged, repaired calls (drop exact replays inside a turn, "
        "rename ids reused by a later turn in the call and its result alike): the pairing pairs "
        "on unique ids.",
    ),
    before(
        "displaced-tool-results",
        ("missing-tool-call-ids", "orphan-tool-results", "unanswered-tool-calls"),
        "4. Bring results displaced past another message back to their call first: an id naming "
        "one earlier call is the strongest evidence, and it settles which calls are unanswered.",
    ),
    before(
        "missing-tool-call-ids",
        ("orphan-tool-results", "unanswered-tool-calls"),
        "5. Only then recover missing tool_call_ids by position: the calls counted as unanswered "
        "are the really unanswered ones, so 'the one call left' is not a displaced one's.",
    ),
    before(
        "orphan-tool-results",
        "unanswered-tool-calls",
        "6. Drop what still answers no call of its block, now that 4 and 5 placed what they "
        "could; 7. stub every call still unanswered last, so a stub stands only where no result "
        "exists, right after the results that stayed (hermes E27).",
    ),
    before(
        (*_CALLS, *_PAIRING),
        ("tool-call-type", "tool-call-ids", "function-names", "image-parts"),
        "8. The shape of each call, its id and its function's name, and a relocated image's "
        "place, are judged on the final calls: merged, repaired, unique and paired (none of "
        "1-7 reads or writes `type`).",
    ),
    before(
        "tool-call-type",
        ("tool-call-ids", "function-names", "tool-message-name"),
        "Identifiers in the upstream's format once calls are merged, unique, paired and shaped "
        "(1-8).",
    ),
    before(
        "tool-call-ids",
        ("function-names", "tool-message-name"),
        "Identifiers first: one id map reaches a call and its result alike; then function names "
        "(tools, history and tool_choice, one map), then each tool message's name from its "
        "call's (renamed) name.",
    ),
    before(
        "function-names",
        ("tool-message-name", *_TOOLS),
        "Function names in the upstream's pattern (tools, history and tool_choice, one map) "
        "before each tool message takes its call's (renamed) name, and before the rules that "
        "judge the tools by name.",
    ),
    before(
        ("tool-call-type", "tool-call-ids", "function-names", "tool-message-name"),
        ("image-parts", "empty-text-parts", "text-part-arrays", "null-content"),
        "Images and content shape once every call is final (merged, repaired, unique, paired, "
        "shaped, renamed: 1-8): a relocated image adds a user message after its whole tool "
        "block, and the content rules judge the final calls.",
    ),
    before(
        "image-parts",
        ("text-part-arrays", *_SEQUENCE),
        "Images before content shape: a stripped image leaves a text-only part list for "
        "text-part-arrays to collapse; a relocated one adds a user message after its whole tool "
        "block, before the sequence rules place and merge users.",
    ),
    before(
        "empty-text-parts",
        "text-part-arrays",
        "Empty text parts beside others go first, so a list left with one text part collapses.",
    ),
    before(
        "text-part-arrays",
        ("null-content", "tool-call-content"),
        "Text-only part lists become strings first; then null or absent content becomes a "
        "string except next to tool calls, then those calls' empty content takes the "
        "provider's shape.",
    ),
    before(
        "null-content",
        "tool-call-content",
        "Null or absent content becomes a string except next to tool calls; then those calls' "
        "empty content takes the provider's shape.",
    ),
    before(
        _CALL_WRITERS,
        "empty-tool-calls",
        "9. After every rule that writes tool calls or an assistant's content, so that none can "
        "leave `tool_calls: []` or an empty assistant behind (hermes #74101): the final payload "
        "satisfies every invariant.",
    ),
    before(
        "empty-tool-calls",
        _SEQUENCE,
        "The role sequence works on the final assistants: its rules move, merge or insert whole "
        "messages and never write a tool call, so 9 still holds after them.",
    ),
    before(
        "system-messages",
        ("consecutive-user-messages", "leading-user-message", "tool-user-bridge"),
        "System messages first: hoisting one can leave two users adjacent, and `later: user` "
        "adds users; the next rule merges them, and a user opens the conversation once hoisted "
        "systems are out of the way.",
    ),
    before(
        ("consecutive-user-messages", "leading-user-message"),
        "tool-user-bridge",
        "Bridge tool -> user once users are merged and placed: the bridge goes right before the "
        "final user and never makes two users adjacent.",
    ),
    before(
        ("consecutive-user-messages", "leading-user-message", "tool-user-bridge"),
        "trailing-assistant",
        "The end of the conversation last among the message rules: no later rule moves or adds "
        "one, and a user appended after the trailing assistant follows an assistant.",
    ),
    before(
        (*_SEQUENCE, "empty-tool-calls"),
        "missing-thought-signatures",
        "Gemini's thought signatures once the sequence is final: the rule reads which steps form "
        "the current turn (after the last user message), which the sequence rules may move.",
    ),
    before(
        ("missing-thought-signatures", "trailing-assistant"),
        (*_TOOLS, "thinking-tool-choice", "thinking-sampling", *_NAMED),
        "Request-level fields after the message rules: they read no message and no message rule "
        "reads them (the tools' names are final once function-names ran), so the tuple reads "
        "as the request does, its messages first.",
    ),
    before(
        "empty-tools",
        ("duplicate-tool-names", "empty-tool-parameters", "anyof-parent-types"),
        "An empty `tools` goes first, so the rules after it judge only a real list.",
    ),
    before(
        "duplicate-tool-names",
        "empty-tool-parameters",
        "Duplicates go before the parameter schema is added, so the definition kept is the one "
        "completed.",
    ),
    before(
        "empty-tool-parameters",
        "anyof-parent-types",
        "A completed schema can then have its anyOf types moved.",
    ),
    before(
        ("thinking-tool-choice", "thinking-sampling"),
        _NAMED,
        "What a refusal named of the request's own fields last: the thinking-mode rules read "
        "thinking mode as the client set it, before a value is replaced or a parameter dropped.",
    ),
)
RULES_BY_NAME: Mapping[str, Rule] = {rule.name: rule for rule in RULES}


def sanitize_messages(
    messages: list[Any],
    settings: Mapping[str, Mapping[str, Any] | bool] | None = None,
) -> PipelineResult:
    """Library entry point: repair ``messages`` without touching the caller's objects."""
    return run_rules(messages, default_steps(RULES, settings), private=False)


__all__ = ["ORDER", "RULES", "RULES_BY_NAME", "sanitize_messages"]
