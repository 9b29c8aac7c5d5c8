"""Which rules repair each catalogued rejection: the one table recovery (proxy/recover.py) and
``chatmend check --error`` read.

A ``Repair`` names the rules that, switched on with its options over the request's plan, make
the check of that error class pass (tests/rules/test_repairs.py runs each on the check's own
example). The options are the strict ones the provider's refusal calls for: the upstream has
already said no, so a repair may do more than the profile's minimal setting would (the whole
field allowlist, every empty content shape, any model). Several rules stand in one repair where
one refusal has several causes: an unanswered call may be a split turn, a displaced result or a
dangling call, and the pairing rules only ever act where their own defect is.

What a repair may change is its rules' fix safety (``Rule.safety``): recovery runs its ``safe``
and ``unsafe`` changes (the refusal named the class) and its ``lossy`` ones only where the route
opts in (``recover.lossy``). Where a rule can keep the client's data or drop it, the table asks
for the keeping form: an orphan result kept as text, a refused role renamed, thinking parts moved
to ``reasoning_content``.

A class no rule can repair is not here (``UNREPAIRABLE`` says why).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rules.vocabulary import CHAT_ROLES as ROLES
from rules.vocabulary import EMPTY_KINDS as KINDS

#: Rule name -> options (over the plan's own for that rule, else the rule's defaults).
Settings = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Repair:
    """The rules that repair one error class of one API (``chat``, ``responses`` or
    ``messages``)."""

    code: str
    api: str
    rules: Settings


#: The pairing rules, in registry order: an unanswered call, an orphan result, a result without
#: its id or two results for one call may each come from a split turn (docs/providers.md#pairing,
#: hermes E1), a result displaced past a message, or a call never answered.
_PAIRING: Settings = {
    "consecutive-assistant-messages": {},
    "blank-tool-call-ids": {},
    "displaced-tool-results": {},
    "missing-tool-call-ids": {},
    "orphan-tool-results": {"action": "text"},
    "unanswered-tool-calls": {},
}
#: Every empty content shape next to tool calls, in the shape Kimi asks for
#: (docs/providers.md#kimi-content, kimi-cli#2621): every kind, over a profile that reshapes only
#: some (deepseek: lists).
_CALL_CONTENT_OMIT = {"shape": "omit", "kinds": list(KINDS)}
#: Every role, over a profile that collapses or fills only some (groq: system).
_ALL_ROLES = {"roles": list(ROLES)}

_CHAT: dict[str, Settings] = {
    # pairing and ids (docs/providers.md#pairing)
    "missing_tool_call_id": _PAIRING,
    "unanswered_tool_call": _PAIRING,
    "orphan_tool_result": _PAIRING,
    "duplicate_tool_result": {"duplicate-tool-call-ids": {}, **_PAIRING},
    "duplicate_tool_call_id": {"duplicate-tool-call-ids": {}},
    "arguments_not_string": {"invalid-tool-arguments": {}},
    "invalid_arguments": {"invalid-tool-arguments": {}},
    "missing_tool_call_type": {"tool-call-type": {}},
    "empty_tool_calls": {"empty-tool-calls": {}},
    "empty_assistant": {"empty-tool-calls": {}},
    "empty_tools": {"empty-tools": {"refused": "empty_tools"}},
    "thinking_tool_choice": {"thinking-tool-choice": {"models": ["*"]}},
    # request-level fields (docs/providers.md#request)
    "tool_choice_without_tools": {"empty-tools": {"refused": "tool_choice"}},
    "tool_parameters_empty": {"empty-tool-parameters": {}},
    "duplicate_tool_names": {"duplicate-tool-names": {}},
    "thinking_temperature": {"thinking-sampling": {"fixed": {"temperature": 1.0}, "models": ["*"]}},
    "thought_signature_missing": {"missing-thought-signatures": {"models": ["*"]}},
    "tool_schema_anyof_type": {"anyof-parent-types": {}},
    # the JSON mode goes, the tools stay: the request's own instructions still ask for JSON
    # (Simpleyyt/ai-manus#101)
    "json_mode_with_tools": {"unsupported-parameters": {"drop": ["response_format"]}},
    # the one value MiniMax-M3 refuses, with the one nearest in meaning it takes
    "thinking_type": {
        "request-values": {"replace": {"thinking.type": {"enabled": "adaptive"}}, "models": ["*"]}
    },
    # Mistral's nine characters also satisfy OpenAI's forty.
    "tool_call_id_format": {"tool-call-ids": {"format": "mistral9"}},
    "function_name_invalid": {"function-names": {"pattern": "strict"}},
    "tool_message_name": {"tool-message-name": {"add_missing": True}},
    # role sequence (docs/providers.md#roles)
    "successive_assistant": {"consecutive-assistant-messages": {}},
    "successive_user": {"consecutive-user-messages": {}},
    # two system messages break a template's alternation too (suitenumerique/conversations#197)
    "roles_not_alternating": {
        "consecutive-assistant-messages": {},
        "consecutive-user-messages": {},
        "system-messages": {"later": "hoist"},
    },
    "system_not_first": {"system-messages": {"later": "hoist"}},
    "multiple_system": {"system-messages": {"later": "hoist"}},
    "first_not_user": {"leading-user-message": {}},
    "conversation_start": {"leading-user-message": {}},
    "no_user_message": {"leading-user-message": {}},
    "trailing_assistant": {"trailing-assistant": {"action": "continue", "prefix_allowed": False}},
    "unexpected_role_order": {"tool-user-bridge": {}},
    "unknown_role": {"developer-role": {}, "unknown-roles": {"action": "rename"}},
    # content shape (docs/providers.md#content)
    "content_missing": {"null-content": _ALL_ROLES},
    "content_null": {"null-content": _ALL_ROLES},
    "content_not_string": {
        "thinking-parts": {"action": "reasoning_content"},
        "text-part-arrays": {**_ALL_ROLES, "lists": True, "min_parts": 1},
    },
    "content_object": {"text-part-arrays": _ALL_ROLES},
    "multiple_text_elements": {"text-part-arrays": {**_ALL_ROLES, "lists": True}},
    "empty_text_part": {"empty-text-parts": {}},
    "thinking_part": {"thinking-parts": {"action": "reasoning_content"}},
    "tool_call_content_empty": {"tool-call-content": _CALL_CONTENT_OMIT},
    # xAI wants "" where other providers want nothing (docs/providers.md#xai-content,
    # langchain-ai/langchain#34140).
    "no_content_element": {
        "null-content": _ALL_ROLES,
        "tool-call-content": {"shape": "empty", "kinds": list(KINDS)},
    },
    "image_unsupported": {"image-parts": {"action": "strip"}},
    "image_not_user": {"image-parts": {"action": "relocate"}},
    # fields (docs/providers.md#reasoning, docs/providers.md#fields)
    "bookkeeping_field": {"bookkeeping-keys": {}},
    "unknown_field": {"unknown-message-fields": {}},
    # any model, and the plain turns of a tool loop too (DeepSeek, docs/providers.md)
    "reasoning_content_missing": {"reasoning-content": {"models": ["*"], "plain_turns": True}},
}

_RESPONSES: dict[str, Settings] = {
    "responses_orphan_output": {
        "responses-blank-call-ids": {},
        "responses-displaced-messages": {},
        "responses-orphan-outputs": {"action": "text"},
        "responses-early-outputs": {},
    },
    "responses_interrupted_output": {"responses-displaced-messages": {}},
    # DeepSeek (deepseek-ai/awesome-deepseek-integration#740): any item between a call and its
    # output, an output before its call included
    "responses_nonadjacent_output": {
        "responses-early-outputs": {},
        "responses-displaced-messages": {"adjacency": "strict"},
    },
    "responses_unanswered_call": {"responses-blank-call-ids": {}, "responses-unanswered-calls": {}},
    "responses_invalid_arguments": {"responses-invalid-arguments": {}},
    "responses_duplicate_item": {"responses-duplicate-items": {}},
    "responses_call_id_too_long": {"responses-call-ids": {}},
    "responses_context_management": {"responses-context-management": {}},
    "responses_reasoning_order": {"responses-reasoning-order": {}},
    "responses_unpersisted_item": {"responses-unpersisted-items": {}},
}

#: Anthropic Messages (docs/anthropic.md): a missing result or an orphan may come from a split
#: turn too, so the merge stands beside the pairing; a provider that has refused says thinking
#: mode is on, or the model refuses a prefill, whatever the profile's model patterns say.
_MESSAGES_PAIRING: Settings = {
    "messages-consecutive-roles": {},
    "messages-blank-tool-use-ids": {},
    "messages-tool-result-pairing": {"orphans": "text"},
}
_MESSAGES: dict[str, Settings] = {
    "messages_unanswered_tool_use": _MESSAGES_PAIRING,
    "messages_orphan_tool_result": _MESSAGES_PAIRING,
    "messages_duplicate_tool_use_id": {"messages-duplicate-tool-use-ids": {}},
    "messages_tool_use_id_pattern": {"messages-tool-use-id-charset": {}},
    "messages_tool_use_input": {"messages-tool-input": {}},
    "messages_empty_text_block": {"messages-empty-text-blocks": {}},
    "messages_empty_message": {"messages-empty-text-blocks": {}, "messages-empty-messages": {}},
    "messages_roles_alternate": {"messages-consecutive-roles": {}},
    "messages_first_not_user": {"messages-leading-user": {}},
    "messages_thinking_not_first": {"messages-thinking-order": {}},
    "messages_tool_loop_thinking": {"messages-tool-loop-thinking": {}},
    "messages_thinking_disabled": {"messages-thinking-disabled": {}},
    "messages_thinking_missing": {"messages-missing-thinking": {"models": ["*"]}},
    "messages_user_id_pattern": {"messages-metadata-user-id": {}},
    "messages_thinking_tool_choice": {"messages-thinking-tool-choice": {"models": ["*"]}},
    "messages_prefill": {"messages-trailing-prefill": {"models": ["*"]}},
    "messages_server_tool": {"messages-server-tools": {}},
    "messages_duplicate_tool_names": {"messages-duplicate-tool-names": {}},
    # a tool loop whose last turn held only unsigned thinking is refused next for that
    "messages_thinking_signature": {
        # a refusal of the signature: another issuer's signature is refused alike
        "messages-unsigned-thinking": {"signatures": "anthropic"},
        "messages-tool-loop-thinking": {},
    },
    "messages_tool_result_cache_control": {"messages-tool-result-cache-control": {}},
    "messages_context_management": {"messages-context-management": {}},
    "messages_thinking_type": {"messages-thinking-type": {"models": ["*"]}},
    "messages_system_role": {"messages-system-messages": {}},
    "messages_cache_markers": {"messages-cache-control": {"max_markers": 4}},
}

#: Error class -> its repair, per API.
REPAIRS: Mapping[str, Mapping[str, Repair]] = {
    "chat": {code: Repair(code, "chat", rules) for code, rules in _CHAT.items()},
    "responses": {code: Repair(code, "responses", rules) for code, rules in _RESPONSES.items()},
    "messages": {code: Repair(code, "messages", rules) for code, rules in _MESSAGES.items()},
}

#: Catalogued classes no rule repairs, and why (none today: every check has its rule).
UNREPAIRABLE: Mapping[str, str] = {}


def repair_for(api: str, code: str) -> Repair | None:
    """The repair of error class ``code`` for a request of ``api``, if a rule has one."""
    return REPAIRS.get(api, {}).get(code)
