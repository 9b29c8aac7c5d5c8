"""chatmend's Anthropic Messages rules: pure functions over a ``/v1/messages`` ``messages`` list.

The same ``Rule`` type, logging, toggles (the config's ``rules:`` section; names, all prefixed
``messages-``, are unique across chat, Responses and Messages rules) and fail-open pipeline as
the chat rules in ``rules.chat.RULES``. Request-level rules read and rewrite the body's other
fields (``metadata``, ``tool_choice``, ``tools``, ``thinking``, ``context_management``). Each
profile has a Messages plan (``rules.providers.profiles``: ``Profile.messages``); the checks
they are held to are in ``rules.providers.contract.messages``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.engine.base import Rule
from rules.engine.order import EVERY, Before, before
from rules.engine.pipeline import PipelineResult, default_steps, run_rules
from rules.messages import (
    blank_tool_use_ids,
    cache_control,
    consecutive_roles,
    context_management,
    custom_tool_type,
    duplicate_tool_names,
    duplicate_tool_use_ids,
    empty_messages,
    empty_text_blocks,
    leading_user,
    lone_surrogates,
    metadata_user_id,
    missing_thinking,
    request_values,
    server_tools,
    system_messages,
    thinking_disabled,
    thinking_order,
    thinking_tool_choice,
    thinking_type,
    tool_input,
    tool_loop_thinking,
    tool_result_cache_control,
    tool_result_pairing,
    tool_use_id_charset,
    trailing_prefill,
    unsigned_thinking,
    unsupported_blocks,
    unsupported_keys,
    unsupported_parameters,
    unsupported_tool_keys,
)

#: The one ordered tuple of Messages rules. Order is behaviour: each position is justified by the
#: reasons in ``ORDER`` below (tests/rules/test_order.py holds the tuple to every one of them).
MESSAGES_RULES: tuple[Rule, ...] = (
    # 0. Text; the keys and blocks a refusal named; `system` out of `messages`.
    lone_surrogates.RULE,
    unsupported_keys.RULE,
    unsupported_blocks.RULE,
    system_messages.RULE,
    # 1-3. Refused blocks, then empty messages.
    empty_text_blocks.RULE,
    unsigned_thinking.RULE,
    empty_messages.RULE,
    # 4. Alternation.
    consecutive_roles.RULE,
    # 5-6. Block-local repairs.
    tool_input.RULE,
    tool_result_cache_control.RULE,
    # 7-9. Ids, then pairing.
    blank_tool_use_ids.RULE,
    tool_use_id_charset.RULE,
    duplicate_tool_use_ids.RULE,
    tool_result_pairing.RULE,
    # 10-15. The first message, thinking, the end of the conversation.
    leading_user.RULE,
    thinking_order.RULE,
    trailing_prefill.RULE,
    thinking_disabled.RULE,
    tool_loop_thinking.RULE,
    missing_thinking.RULE,
    # 16-22. Request-level fields.
    metadata_user_id.RULE,
    thinking_tool_choice.RULE,
    custom_tool_type.RULE,
    server_tools.RULE,
    thinking_type.RULE,
    context_management.RULE,
    duplicate_tool_names.RULE,
    # What a refusal named of the request's own fields.
    cache_control.RULE,
    request_values.RULE,
    unsupported_parameters.RULE,
    unsupported_tool_keys.RULE,
)

#: The rules that judge or rewrite blocks and messages, after the text and the refused keys.
_MESSAGE_RULES = (
    "messages-system-messages",
    "messages-empty-text-blocks",
    "messages-unsigned-thinking",
    "messages-empty-messages",
    "messages-consecutive-roles",
    "messages-tool-input",
    "messages-tool-result-cache-control",
    "messages-blank-tool-use-ids",
    "messages-tool-use-id-charset",
    "messages-duplicate-tool-use-ids",
    "messages-tool-result-pairing",
    "messages-leading-user",
    "messages-thinking-order",
    "messages-trailing-prefill",
    "messages-thinking-disabled",
    "messages-tool-loop-thinking",
    "messages-missing-thinking",
)
#: The rules that move, merge, remove or add whole messages.
_SEQUENCE = (
    "messages-empty-messages",
    "messages-consecutive-roles",
    "messages-tool-result-pairing",
    "messages-leading-user",
    "messages-trailing-prefill",
    "messages-thinking-disabled",
)
#: The thinking rules over the messages.
_THINKING = (
    "messages-thinking-order",
    "messages-thinking-disabled",
    "messages-tool-loop-thinking",
    "messages-missing-thinking",
)
#: The request-level rules.
_REQUEST = (
    "messages-metadata-user-id",
    "messages-thinking-tool-choice",
    "messages-custom-tool-type",
    "messages-server-tools",
    "messages-thinking-type",
    "messages-context-management",
    "messages-duplicate-tool-names",
)
#: What a refusal named of the request's own fields.
_NAMED = (
    "messages-cache-control",
    "messages-request-values",
    "messages-unsupported-parameters",
    "messages-unsupported-tool-keys",
)

#: Why ``MESSAGES_RULES`` is in the order it is (``rules.engine.order``).
ORDER: tuple[Before, ...] = (
    before(
        "messages-lone-surrogates",
        EVERY,
        "0. Text first, as for chat: every later rule compares and copies strings.",
    ),
    before(
        ("messages-unsupported-keys", "messages-unsupported-blocks"),
        _MESSAGE_RULES,
        "The keys and block types a refusal named, before any rule judges a block or a message "
        "(a block rendered as text is then judged as the text it is).",
    ),
    before(
        "messages-system-messages",
        _SEQUENCE,
        "A `system` message out of `messages` before any rule judges roles or merges turns.",
    ),
    before(
        ("messages-empty-text-blocks", "messages-unsigned-thinking"),
        "messages-empty-messages",
        "1-3. Blocks refused wherever they stand (blank text blocks, then thinking no signature "
        "covers) go before anything judges a message empty: a turn that held only unsigned "
        "thinking is one.",
    ),
    before(
        "messages-empty-text-blocks",
        "messages-unsigned-thinking",
        "1-2. Blank text blocks, then thinking no signature covers.",
    ),
    before(
        "messages-unsigned-thinking",
        _THINKING,
        "2. Thinking no signature covers goes before the thinking rules, so that they never move "
        "or weigh a block that is going, and before the tool loop's check, which then sees the "
        "turn as it will be sent.",
    ),
    before(
        "messages-empty-messages",
        "messages-consecutive-roles",
        "3. Empty messages (an empty assistant removed, an empty user filled) before the merge, "
        "which a removed assistant between two users makes necessary.",
    ),
    before(
        "messages-consecutive-roles",
        (
            "messages-blank-tool-use-ids",
            "messages-duplicate-tool-use-ids",
            "messages-tool-result-pairing",
        ),
        "4. Alternation before pairing: an assistant turn split in two (tool_use, then text) "
        "would otherwise look unanswered and get stubs while its real results became orphans.",
    ),
    before(
        "messages-tool-input",
        ("messages-tool-use-id-charset", "messages-duplicate-tool-use-ids"),
        "5. Inputs before the ids, so a renamed call is also a well-formed one.",
    ),
    before(
        "messages-tool-result-cache-control",
        "messages-tool-result-pairing",
        "6. cache_control lifted onto its tool_result before pairing moves results: it only "
        "edits the block, which pairing then carries as it is.",
    ),
    before(
        "messages-blank-tool-use-ids",
        ("messages-tool-use-id-charset", "messages-duplicate-tool-use-ids"),
        '7. A blank id given first (a call and its result naming "" get one id), then the '
        "charset (one original id, one new id), then reuse (one id, one call).",
    ),
    before(
        "messages-tool-use-id-charset",
        "messages-duplicate-tool-use-ids",
        "8. The charset before reuse: one original id becomes one new id, then one id names one "
        "call.",
    ),
    before(
        (
            "messages-blank-tool-use-ids",
            "messages-tool-use-id-charset",
            "messages-duplicate-tool-use-ids",
        ),
        "messages-tool-result-pairing",
        "7-8. Ids before pairing, so that pairing reads one call per id and renames nothing.",
    ),
    before(
        "messages-tool-result-pairing",
        "messages-leading-user",
        "9-10. Pairing on final ids may remove a user message that held only orphans: a leading "
        "one removed (a history cut mid tool loop) leaves an assistant in front, which the "
        "first-message rule then judges.",
    ),
    before(
        "messages-thinking-order",
        ("messages-thinking-disabled", "messages-tool-loop-thinking", "messages-missing-thinking"),
        "11. Thinking inside a message: a misplaced block is moved, not given up on, before the "
        "rules that judge a turn's thinking.",
    ),
    before(
        ("messages-leading-user", "messages-tool-result-pairing"),
        "messages-trailing-prefill",
        "12. The end of the conversation once pairing and the first message are settled: it may "
        "append a user turn or remove an empty prefill (which can make a tool loop's last turn "
        "the final one).",
    ),
    before(
        "messages-trailing-prefill",
        "messages-thinking-disabled",
        "13. No thinking in the final assistant when thinking is off, judged on the end as it "
        "will be sent (after the prefill rule; it only removes a thinking-only final assistant, "
        "whose predecessor is then a user turn: nothing becomes a prefill).",
    ),
    before(
        _SEQUENCE,
        ("messages-tool-loop-thinking", "messages-missing-thinking"),
        "14-15. On the conversation as it will be sent: a tool loop whose last assistant turn "
        "lost its thinking (or had only unsigned thinking, removed above) turns thinking off (a "
        "removed prefill may have made the loop the end); a placeholder on tool-use turns when "
        "a provider needs one (never in a plan with unsigned-thinking, which removes exactly "
        "such blocks). They only read `thinking` or add a block at a message's front.",
    ),
    before(
        _MESSAGE_RULES,
        (*_REQUEST, *_NAMED),
        "16-22. Request-level fields after the messages: they read no message, and no message "
        "rule reads them.",
    ),
    before(
        "messages-tool-loop-thinking",
        ("messages-thinking-tool-choice", "messages-thinking-type"),
        "tool-loop-thinking may remove `thinking`: the rules that read it come after.",
    ),
    before(
        (
            "messages-thinking-tool-choice",
            "messages-thinking-disabled",
            "messages-missing-thinking",
        ),
        "messages-thinking-type",
        "thinking-type last of those reading `thinking`: it only trades one 'on' type for "
        "another (or removes a refused `disabled`, 'off' either way), so no rule before it would "
        "have judged differently; context-management reads its field alone.",
    ),
    before(
        "messages-custom-tool-type",
        ("messages-server-tools", "messages-duplicate-tool-names"),
        "The optional `custom` tag off a client tool before the rules that read tool "
        "definitions: server-tools then sees a client tool as untagged (which it keeps either "
        "way), and duplicate-tool-names compares a tagged and an untagged definition as the one "
        "definition they are.",
    ),
    before(
        "messages-server-tools",
        "messages-duplicate-tool-names",
        "21. Tool definitions after server-tools, which may remove some (a server tool and a "
        "custom one can share a name); it reads no message and no rule after it reads `tools`.",
    ),
    before(
        (*_THINKING, "messages-thinking-tool-choice", "messages-thinking-type"),
        _NAMED,
        "What a refusal named of the request's own fields last (a value replaced, a parameter "
        "dropped): the thinking rules read `thinking` as the client set it.",
    ),
)

MESSAGES_RULES_BY_NAME: Mapping[str, Rule] = {rule.name: rule for rule in MESSAGES_RULES}


def sanitize_anthropic(
    messages: list[Any],
    settings: Mapping[str, Mapping[str, Any] | bool] | None = None,
    *,
    request: Mapping[str, Any] | None = None,
) -> PipelineResult:
    """Library entry point: repair a Messages ``messages`` list without touching the caller's
    objects (``request``: the other top-level fields, for the request-level rules)."""
    return run_rules(messages, default_steps(MESSAGES_RULES, settings), request=request)


__all__ = ["MESSAGES_RULES", "MESSAGES_RULES_BY_NAME", "ORDER", "sanitize_anthropic"]
