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
from rules.engine.pipeline import PipelineResult, default_steps, run_rules
from rules.messages import (
    blank_tool_use_ids,
    cache_control,
    consecutive_roles,
    context_management,
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

#: The one ordered tuple of Messages rules. Order is behaviour; each position is justified:
MESSAGES_RULES: tuple[Rule, ...] = (
    # 0. Text first, as for chat: every later rule compares and copies strings.
    lone_surrogates.RULE,
    # The keys and block types a refusal named, before any rule judges a block or a message
    #    (a block rendered as text is then judged as the text it is).
    unsupported_keys.RULE,
    unsupported_blocks.RULE,
    # A `system` message out of `messages` before any rule judges roles or merges turns.
    system_messages.RULE,
    # 1-3. Blocks refused wherever they stand go before anything judges a message empty: blank
    #    text blocks, then thinking no signature covers (before the thinking rules below, so
    #    that they never move or weigh a block that is going; before the tool loop's check,
    #    which then sees the turn as it will be sent). Then empty messages (an empty assistant
    #    removed, an empty user filled; a turn that held only unsigned thinking is one) before
    #    the merge below, which a removed assistant between two users makes necessary.
    empty_text_blocks.RULE,
    unsigned_thinking.RULE,
    empty_messages.RULE,
    # 4. Alternation before pairing: an assistant turn split in two (tool_use, then text)
    #    would otherwise look unanswered and get stubs while its real results became orphans.
    consecutive_roles.RULE,
    # 5-6. Block-local repairs: inputs before the ids, so a renamed call is also a well-formed
    #    one; cache_control lifted onto its tool_result before pairing moves results (it only
    #    edits the block, which pairing then carries as it is).
    tool_input.RULE,
    tool_result_cache_control.RULE,
    # 7-8. Ids before pairing: a blank id given (a call and its result naming ""), then the
    #    charset (one original id, one new id), then reuse (one id, one call), so that pairing
    #    reads one call per id and renames nothing.
    blank_tool_use_ids.RULE,
    tool_use_id_charset.RULE,
    duplicate_tool_use_ids.RULE,
    # 9. Pairing on final ids; it may remove a user message that held only orphans.
    tool_result_pairing.RULE,
    # 10. The first message after pairing: a leading orphan-only user message it removed (a
    #    history cut mid tool loop) leaves an assistant in front.
    leading_user.RULE,
    # 11. Thinking inside a message: a misplaced block is moved, not given up on.
    thinking_order.RULE,
    # 12. The end of the conversation: it may append a user turn or remove an empty prefill
    #    (which can make a tool loop's last turn the final one).
    trailing_prefill.RULE,
    # 13. No thinking in the final assistant when thinking is off, judged on the end as it will
    #    be sent (after the prefill rule above; it only removes a thinking-only final assistant,
    #    whose predecessor is then a user turn: nothing becomes a prefill).
    thinking_disabled.RULE,
    # 14-15. On the conversation as it will be sent: a tool loop whose last assistant turn lost
    #    its thinking (or had only unsigned thinking, removed above) turns thinking off (before
    #    the rules that read `thinking`: a removed prefill may have made the loop the end); a
    #    placeholder on tool-use turns when a provider needs one (never in a plan with
    #    unsigned-thinking, which removes exactly such blocks). They only read `thinking` or
    #    add a block at a message's front.
    tool_loop_thinking.RULE,
    missing_thinking.RULE,
    # 16-21. Request-level fields: they read no message, and no message rule reads them
    #    (thinking-tool-choice reads `thinking`, after tool-loop-thinking may have removed it).
    #    thinking-type last of those reading `thinking`: it only trades one "on" type for
    #    another (or removes a refused `disabled`, "off" either way), so no rule before it
    #    would have judged differently; context-management reads the field alone.
    metadata_user_id.RULE,
    thinking_tool_choice.RULE,
    server_tools.RULE,
    thinking_type.RULE,
    context_management.RULE,
    # 21. Tool definitions: after server-tools, which may remove some (a server tool and a
    #    custom one can share a name); it reads no message and no rule after it reads `tools`.
    duplicate_tool_names.RULE,
    # What a refusal named of the request's own fields last: a value replaced, a parameter
    #    dropped (the thinking rules above read `thinking` as the client set it).
    cache_control.RULE,
    request_values.RULE,
    unsupported_parameters.RULE,
    unsupported_tool_keys.RULE,
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


__all__ = ["MESSAGES_RULES", "MESSAGES_RULES_BY_NAME", "sanitize_anthropic"]
