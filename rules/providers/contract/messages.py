"""The Anthropic Messages contract (docs/providers.md, Anthropic Messages): what a strict
``/v1/messages`` endpoint rejects about a request, in the provider's words.

The checks use the chat contract's ``Check`` type; their ``messages`` argument is the request's
``messages`` list and their indices are ``messages`` indices. A profile's Messages contract
(``Profile.messages_contract``) names the checks its provider applies, with its own wording
where it differs; ``violations(payload, contract)`` runs them. The rules in ``rules.messages``
are built to leave nothing here (tests/rules/test_messages_properties.py), and the tests'
strict fake Anthropic endpoint answers with it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Any

from rules.engine.request import CLIENT_TOOL_TYPES, foreign_tool, tool_list
from rules.engine.thinking import THINKING_MODELS
from rules.providers.contract.base import Check, Example, Found, Settings, Violation
from rules.providers.contract.examples import (
    GO,
    THINKING,
    THINKING_ON,
    TOOL_RESULT,
    TOOL_USE,
    assistant_turn,
    user_turn,
)
from rules.providers.contract.messages_shapes import (
    CONTEXT_MANAGEMENT,
    PREFILL_REFUSED_MODELS,
    THINKING_TYPE_REFUSING,
    THINKING_TYPES,
    block_type,
    cached_inside_result,
    content_list,
    context_management_allowed,
    final_assistant,
    fits_user_id,
    forced_tool_choice,
    in_thinking_mode,
    is_blank_text,
    is_empty,
    is_foreign_thinking,
    is_tool_result,
    is_unsigned_thinking,
    refused_thinking_type,
    role,
    thinking_on,
    tool_result_id,
    tool_use_ids,
    unthinking_loop,
    valid_id,
)

Contract = Mapping[str, Mapping[str, Any]]
Options = Mapping[str, Any]


def _leading_results(message: Any) -> list[str | None]:
    """The ids of the ``tool_result`` blocks a message opens with."""
    ids: list[str | None] = []
    for block in content_list(message) or ():
        if not is_tool_result(block):
            break
        ids.append(tool_result_id(block))
    return ids


def _unanswered(messages: list[Any], request: Any, options: Options) -> Iterator[Found]:
    for index, message in enumerate(messages):
        ids = tool_use_ids(message)
        if not ids:
            continue
        after = messages[index + 1] if index + 1 < len(messages) else None
        answered = Counter(_leading_results(after)) if role(after) == "user" else Counter()
        missing = [tid for tid in ids if not _take(answered, tid)]
        if missing:
            yield Found(index, {"ids": ", ".join(missing)})


def _take(counter: Counter[str | None], key: str | None) -> bool:
    if counter[key] > 0:
        counter[key] -= 1
        return True
    return False


def _orphans(messages: list[Any], request: Any, options: Options) -> Iterator[Found]:
    previous: Any = None
    for index, message in enumerate(messages):
        if role(message) == "user":
            calls: Counter[str | None] = Counter(tool_use_ids(previous))
            for position, block in enumerate(content_list(message) or ()):
                if is_tool_result(block) and not _take(calls, tool_result_id(block)):
                    yield Found(index, {"position": position, "id": tool_result_id(block)})
        previous = message


def _duplicate_ids(messages: list[Any], request: Any, options: Options) -> Iterator[Found]:
    seen: set[str] = set()
    for index, message in enumerate(messages):
        if role(message) != "assistant":
            continue
        for position, block in enumerate(content_list(message) or ()):
            if block_type(block) == "tool_use" and type(block.get("id")) is str:
                if block["id"] in seen:
                    yield Found(index, {"position": position, "id": block["id"]})
                seen.add(block["id"])


def _blocks_of_type(messages: list[Any], kind: str) -> Iterator[tuple[int, int, dict[str, Any]]]:
    for index, message in enumerate(messages):
        for position, block in enumerate(content_list(message) or ()):
            if block_type(block) == kind:
                yield index, position, block


def _id_pattern(messages: list[Any], request: Any, options: Options) -> Iterator[Found]:
    for index, position, block in _blocks_of_type(messages, "tool_use"):
        value = block.get("id")
        if type(value) is not str or not valid_id(value):
            yield Found(index, {"position": position})


def _input(messages: list[Any], request: Any, options: Options) -> Iterator[Found]:
    for index, position, block in _blocks_of_type(messages, "tool_use"):
        if type(block.get("input")) is not dict:
            yield Found(index, {"position": position})


def _empty_text(messages: list[Any], request: Any, options: Options) -> Iterator[Found]:
    for index, message in enumerate(messages):
        if any(map(is_blank_text, content_list(message) or ())):
            yield Found(index)
            return  # Anthropic names no index: one rejection per request


def _empty_message(messages: list[Any], request: Any, options: Options) -> Iterator[Found]:
    last = len(messages) - 1
    for index, message in enumerate(messages):
        if is_empty(message) and not (index == last and role(message) == "assistant"):
            yield Found(index)


def _alternation(messages: list[Any], request: Any, options: Options) -> Iterator[Found]:
    previous: str | None = None
    for index, message in enumerate(messages):
        current = role(message)
        if current in ("user", "assistant") and current == previous:
            yield Found(index, {"role": current})
            return
        previous = current


def _first_not_user(messages: list[Any], request: Any, options: Options) -> Iterator[Found]:
    if messages and role(messages[0]) != "user":
        yield Found(0)


def _thinking_not_first(messages: list[Any], request: Any, options: Options) -> Iterator[Found]:
    for index, message in enumerate(messages):
        blocks = content_list(message)
        if role(message) != "assistant" or not blocks:
            continue
        if block_type(blocks[0]) not in THINKING_TYPES and any(
            block_type(b) in THINKING_TYPES for b in blocks
        ):
            yield Found(index, {"found": block_type(blocks[0])})


def _tool_loop_thinking(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    index = unthinking_loop(messages) if thinking_on(request) else None
    if index is not None:
        blocks = content_list(messages[index]) or [None]
        yield Found(index, {"found": block_type(blocks[0])})


def _thinking_disabled(messages: list[Any], request: Any, options: Options) -> Iterator[Found]:
    index = None if thinking_on(request) else final_assistant(messages)
    if index is None:
        return
    for position, block in enumerate(content_list(messages[index]) or ()):
        if block_type(block) in THINKING_TYPES:
            yield Found(index, {"position": position})
            return


def _thinking_missing(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    if not in_thinking_mode(request, options["models"]):
        return
    for index, message in enumerate(messages):
        if tool_use_ids(message) and not any(
            block_type(b) in THINKING_TYPES for b in content_list(message) or ()
        ):
            yield Found(index)
            return  # DeepSeek names no index


def _user_id(messages: list[Any], request: Mapping[str, Any], options: Options) -> Iterator[Found]:
    metadata = request.get("metadata")
    value = metadata.get("user_id") if type(metadata) is dict else None
    if type(value) is str and not fits_user_id(value):
        yield Found(None)


def _tool_choice(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    if forced_tool_choice(request.get("tool_choice")) and in_thinking_mode(
        request, options["models"]
    ):
        yield Found(None)


def _prefill(messages: list[Any], request: Mapping[str, Any], options: Options) -> Iterator[Found]:
    model = request.get("model")
    if not messages or role(messages[-1]) != "assistant" or type(model) is not str:
        return
    if any(fnmatchcase(model.lower(), p.lower()) for p in options["models"]):
        yield Found(len(messages) - 1)


def _server_tools(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    for position, tool in enumerate(tool_list(request)):
        if foreign_tool(tool, CLIENT_TOOL_TYPES["messages"]):
            yield Found(None, {"position": position})


def _custom_tool_type(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    """A tool tagged ``type: "custom"`` (DeepSeek reads a typed tool as a server tool)."""
    tools = request.get("tools")
    for position, tool in enumerate(tools if type(tools) is list else ()):
        if type(tool) is dict and tool.get("type") == "custom":
            yield Found(None, {"position": position})
            return


def _unsigned_thinking(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    for index, message in enumerate(messages):
        if role(message) != "assistant":
            continue
        for position, block in enumerate(content_list(message) or ()):
            if block_type(block) == "thinking" and (
                is_unsigned_thinking(block)
                or (options.get("shape") == "anthropic" and is_foreign_thinking(block))
            ):
                yield Found(index, {"position": position})
                return  # the first one refuses the request


def _nested_cache_control(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    for index, message in enumerate(messages):
        for position, block in enumerate(content_list(message) or ()):
            for inner in cached_inside_result(block):
                yield Found(index, {"position": position, "inner": inner})


def _context_management(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    if CONTEXT_MANAGEMENT in request and not context_management_allowed(options["betas"]):
        yield Found(None)


def _thinking_type(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    if refused_thinking_type(request, options["models"]) is not None:
        yield Found(None)


#: Anthropic's own wording of a reused id (DeepSeek's adds backticks).
ANTHROPIC_DUPLICATE_TEXT = "messages.{index}.content.{position}: tool_use ids must be unique"
#: Anthropic's wording of a forced tool choice in thinking mode (mastra-ai/mastra#7507).
ANTHROPIC_TOOL_CHOICE_TEXT = "Thinking may not be enabled when tool_choice forces tool use."


def _duplicate_tool_names(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    tools = request.get("tools")
    names = [
        tool["name"]
        for tool in (tools if type(tools) is list else ())
        if type(tool) is dict and type(tool.get("name")) is str
    ]
    if len(set(names)) < len(names):  # DeepSeek: "Tool names must be unique."
        yield Found(None)


def _system_role(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    for index, message in enumerate(messages):
        if type(message) is dict and message.get("role") == "system":
            yield Found(index)
            return


def _cache_markers(
    messages: list[Any], request: Mapping[str, Any], options: Options
) -> Iterator[Found]:
    """More cache_control markers than the endpoint takes, counted over tools, system blocks,
    messages' blocks and tool results' own."""
    count = 0
    for field in ("tools", "system"):
        values = request.get(field)
        for value in values if type(values) is list else ():
            count += type(value) is dict and "cache_control" in value
    for message in messages:
        content = message.get("content") if type(message) is dict else None
        for block in content if type(content) is list else ():
            if type(block) is not dict:
                continue
            count += "cache_control" in block
            inner = block.get("content") if block.get("type") == "tool_result" else None
            for part in inner if type(inner) is list else ():
                count += type(part) is dict and "cache_control" in part
    if count > options["max"]:
        yield Found(None, {"max": options["max"], "count": count})


#: A missing result or an orphan may come from a split turn too, so the merge stands beside the
#: pairing (docs/anthropic.md).
MESSAGES_PAIRING_REPAIR: Settings = {
    "messages-consecutive-roles": {},
    "messages-blank-tool-use-ids": {},
    "messages-tool-result-pairing": {"orphans": "text"},
}


MESSAGES_CHECKS: tuple[Check, ...] = (
    Check(
        "messages_unanswered_tool_use",
        "every tool_use answered at the head of the next user message",
        _unanswered,
        # Anthropic (anthropics/claude-code#1237); DeepSeek's endpoint the same
        # (Hmbown/Codewhale#4329)
        "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
        "after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in "
        "the next message.",
        examples=(Example({"messages": [user_turn(GO), assistant_turn(TOOL_USE), user_turn(GO)]}),),
        repair=MESSAGES_PAIRING_REPAIR,
    ),
    Check(
        "messages_orphan_tool_result",
        "every tool_result answers one tool_use of the message before it",
        _orphans,
        # Anthropic (anthropics/claude-code#13460)
        "messages.{index}.content.{position}: unexpected `tool_use_id` found in `tool_result` "
        "blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in "
        "the previous message.",
        examples=(
            Example({"messages": [user_turn(GO), assistant_turn(GO), user_turn(TOOL_RESULT, GO)]}),
        ),
        repair=MESSAGES_PAIRING_REPAIR,
    ),
    Check(
        "messages_duplicate_tool_use_id",
        "tool_use ids unique in the request",
        _duplicate_ids,
        # DeepSeek's Anthropic endpoint (vastsa/PI-Desktop#718)
        "messages.{index}.content.{position}: `tool_use` ids must be unique",
        examples=(
            Example(
                {
                    "messages": [
                        user_turn(GO),
                        assistant_turn(TOOL_USE),
                        user_turn(TOOL_RESULT),
                        assistant_turn(TOOL_USE),
                        user_turn(TOOL_RESULT),
                    ]
                }
            ),
        ),
        repair={"messages-duplicate-tool-use-ids": {}},
    ),
    Check(
        "messages_tool_use_id_pattern",
        "tool_use ids match ^[a-zA-Z0-9_-]+$",
        _id_pattern,
        # Anthropic (BlockRunAI/ClawRouter#17)
        "messages.{index}.content.{position}.tool_use.id: String should match pattern "
        "'^[a-zA-Z0-9_-]+$'",
        examples=(
            Example(
                {
                    "messages": [
                        user_turn(GO),
                        assistant_turn({**TOOL_USE, "id": "a.b"}),
                        user_turn({**TOOL_RESULT, "tool_use_id": "a.b"}),
                    ]
                }
            ),
        ),
        repair={"messages-tool-use-id-charset": {}},
    ),
    Check(
        "messages_tool_use_input",
        "tool_use input is an object",
        _input,
        # Anthropic (anthropics/claude-code#6696)
        "messages.{index}.content.{position}.tool_use.input: Input should be a valid dictionary",
        examples=(
            Example(
                {
                    "messages": [
                        user_turn(GO),
                        assistant_turn({**TOOL_USE, "input": "[]"}),
                        user_turn(TOOL_RESULT),
                    ]
                }
            ),
        ),
        repair={"messages-tool-input": {}},
    ),
    Check(
        "messages_empty_text_block",
        "no text block without visible text",
        _empty_text,
        # Anthropic (anthropics/claude-code#59812)
        "messages: text content blocks must be non-empty",
        examples=(Example({"messages": [user_turn(GO, {"type": "text", "text": ""})]}),),
        repair={"messages-empty-text-blocks": {}},
    ),
    Check(
        "messages_empty_message",
        "every message but a final assistant has content",
        _empty_message,
        # Anthropic (anthropics/claude-code#3196)
        "messages.{index}: all messages must have non-empty content except for the optional "
        "final assistant message",
        examples=(Example({"messages": [user_turn(GO), assistant_turn(), user_turn(GO)]}),),
        repair={"messages-empty-text-blocks": {}, "messages-empty-messages": {}},
    ),
    Check(
        "messages_roles_alternate",
        "user and assistant turns alternate",
        _alternation,
        # Anthropic, 2024 (mattermost/mattermost-plugin-agents#180)
        'messages: roles must alternate between "user" and "assistant", but found multiple '
        '"{role}" roles in a row',
        examples=(Example({"messages": [user_turn(GO), user_turn(GO)]}),),
        repair={"messages-consecutive-roles": {}},
    ),
    Check(
        "messages_first_not_user",
        "the first message is a user message",
        _first_not_user,
        # Anthropic, 2024 (lobehub/lobehub#1601)
        'messages: first message must use the "user" role',
        examples=(Example({"messages": [assistant_turn(GO), user_turn(GO)]}),),
        repair={"messages-leading-user": {}},
    ),
    Check(
        "messages_thinking_not_first",
        "an assistant message with thinking starts with it",
        _thinking_not_first,
        # Anthropic (anthropics/claude-code#20698, #20705)
        "messages.{index}.content.0: If an assistant message contains any thinking blocks, the "
        "first block must be `thinking` or `redacted_thinking`. Found `{found}`.",
        examples=(
            Example({"messages": [user_turn(GO), assistant_turn(GO, THINKING), user_turn(GO)]}),
        ),
        repair={"messages-thinking-order": {}},
    ),
    Check(
        "messages_tool_loop_thinking",
        "thinking on: a tool loop's last assistant message opens with thinking",
        _tool_loop_thinking,
        # Anthropic (n8n-io/n8n#22550, anthropics/claude-code#20692)
        "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
        "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
        "We recommend you include thinking blocks from previous turns. To avoid this "
        "requirement, disable `thinking`. Please consult our documentation at "
        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking",
        examples=(
            Example(
                {
                    "messages": [user_turn(GO), assistant_turn(TOOL_USE), user_turn(TOOL_RESULT)],
                    **THINKING_ON,
                }
            ),
        ),
        repair={"messages-tool-loop-thinking": {}},
    ),
    Check(
        "messages_thinking_disabled",
        "no thinking in a final assistant message when thinking is off",
        _thinking_disabled,
        # Anthropic (tailcallhq/forgecode#1853)
        "messages.{index}.content.{position}: When thinking is disabled, an `assistant` message "
        "in the final position cannot contain `thinking`. To use thinking blocks, enable "
        "`thinking` in your request.",
        examples=(Example({"messages": [user_turn(GO), assistant_turn(THINKING, GO)]}),),
        repair={"messages-thinking-disabled": {}},
    ),
    Check(
        "messages_thinking_missing",
        "in thinking mode, every tool_use turn carries thinking",
        _thinking_missing,
        # DeepSeek's Anthropic endpoint (NousResearch/hermes-agent#22313)
        "The `content[].thinking` in the thinking mode must be passed back to the API.",
        options={"models": THINKING_MODELS},
        examples=(
            Example(
                {
                    "model": "deepseek-v4-pro",
                    "messages": [user_turn(GO), assistant_turn(TOOL_USE), user_turn(TOOL_RESULT)],
                    **THINKING_ON,
                },
            ),
        ),
        repair={"messages-missing-thinking": {"models": ["*"]}},
    ),
    Check(
        "messages_user_id_pattern",
        "metadata.user_id matches ^[a-zA-Z0-9_-]+$ (at most 256 characters)",
        _user_id,
        # DeepSeek's Anthropic endpoint and Anthropic (deepseek-ai/DeepSeek-V3#1277)
        "Invalid 'user_id': string does not match pattern. Expected a string that matches the "
        "pattern '^[a-zA-Z0-9_-]+$'.",
        examples=(Example({"messages": [user_turn(GO)], "metadata": {"user_id": "a@b"}}),),
        repair={"messages-metadata-user-id": {}},
    ),
    Check(
        "messages_thinking_tool_choice",
        "no forced tool_choice in thinking mode",
        _tool_choice,
        # DeepSeek's Anthropic endpoint (deepseek-ai/awesome-deepseek-integration#598)
        "deepseek-reasoner does not support this tool_choice",
        options={"models": THINKING_MODELS},
        examples=(
            Example(
                {
                    "model": "deepseek-v4-pro",
                    "messages": [user_turn(GO)],
                    "tool_choice": {"type": "any"},
                    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
                    **THINKING_ON,
                },
            ),
        ),
        repair={"messages-thinking-tool-choice": {"models": ["*"]}},
    ),
    Check(
        "messages_prefill",
        "no trailing assistant prefill for models that refuse it",
        _prefill,
        # Anthropic, Claude 4.6+ (smallmain/vscode-unify-chat-provider#249)
        "This model does not support assistant message prefill. The conversation must end with "
        "a user message.",
        options={"models": PREFILL_REFUSED_MODELS},
        examples=(
            Example({"model": "claude-opus-4-6", "messages": [user_turn(GO), assistant_turn(GO)]}),
        ),
        repair={"messages-trailing-prefill": {"models": ["*"]}},
    ),
    Check(
        "messages_thinking_signature",
        "every thinking block carries a signature",
        _unsigned_thinking,
        # Anthropic (anthropics/claude-code#10627, anthropics/anthropic-sdk-python#1598)
        "messages.{index}.content.{position}: Invalid `signature` in `thinking` block",
        # `anthropic`: a signature not in Anthropic's shape too (DeepSeek's UUID)
        options={"shape": "any"},
        examples=(
            Example(
                {
                    "messages": [
                        user_turn(GO),
                        assistant_turn({"type": "thinking", "thinking": "t"}, TOOL_USE),
                        user_turn(TOOL_RESULT),
                    ],
                    **THINKING_ON,
                }
            ),
        ),
        repair={
            # a refusal of the signature: another issuer's signature is refused alike
            "messages-unsigned-thinking": {"signatures": "anthropic"},
            "messages-tool-loop-thinking": {},
        },
    ),
    Check(
        "messages_tool_result_cache_control",
        "no cache_control inside tool_result.content",
        _nested_cache_control,
        # GitHub Copilot's Anthropic endpoint (caozhiyuan/copilot-api#241)
        "messages.{index}.content.{position}.tool_result.content.{inner}.cache_control: "
        "cache_control may not be specified within `tool_result.content`. Instead, place it "
        "directly on `tool_result`",
        examples=(
            Example(
                {
                    "messages": [
                        user_turn(GO),
                        assistant_turn(TOOL_USE),
                        user_turn(
                            {
                                **TOOL_RESULT,
                                "content": [{**GO, "cache_control": {"type": "ephemeral"}}],
                            }
                        ),
                    ]
                }
            ),
        ),
        repair={"messages-tool-result-cache-control": {}},
    ),
    Check(
        "messages_context_management",
        "context_management only with a context-management-* anthropic-beta",
        _context_management,
        # Anthropic without the beta header (ericc-ch/copilot-api#217)
        "context_management: Extra inputs are not permitted",
        # the request's anthropic-beta values: ``violations(..., betas=...)`` fills them
        options={"betas": frozenset()},
        examples=(Example({"messages": [user_turn(GO)], "context_management": {"edits": []}}),),
        repair={"messages-context-management": {}},
    ),
    Check(
        "messages_thinking_type",
        "thinking.type enabled for the models that accept no other",
        _thinking_type,
        # Kimi's Anthropic endpoint, Kimi K2.7 Code (MoonshotAI/Kimi-K2#141)
        "invalid thinking: only type=enabled is allowed for this model",
        options={"models": THINKING_TYPE_REFUSING},
        examples=(
            Example(
                {
                    "model": "kimi-k2.7-code",
                    "messages": [user_turn(GO)],
                    "thinking": {"type": "adaptive"},
                }
            ),
        ),
        repair={"messages-thinking-type": {"models": ["*"]}},
    ),
    Check(
        "messages_duplicate_tool_names",
        "no two tools with the same name",
        _duplicate_tool_names,
        # DeepSeek's Anthropic endpoint (decolua/9router PR#3333;
        # docs/providers.md#deepseek-request)
        "Tool names must be unique.",
        examples=(
            Example(
                {
                    "messages": [user_turn(GO)],
                    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}] * 2,
                }
            ),
        ),
        repair={"messages-duplicate-tool-names": {}},
    ),
    Check(
        "messages_server_tool",
        "only custom tools",
        _server_tools,
        # an Anthropic-format relay in front of DeepSeek (QuantumNous/new-api#5380)
        "Invalid type for 'tools.{position}', expected an json object.",
        examples=(
            Example({"messages": [user_turn(GO)], "tools": [{"type": "web_search_20250305"}]}),
        ),
        repair={"messages-server-tools": {}},
    ),
    Check(
        "messages_custom_tool_type",
        'no client tool tagged `type: "custom"`',
        _custom_tool_type,
        # docs/providers.md#deepseek-request, DeepSeek's Anthropic endpoint
        # (decolua/9router#3905, #3952)
        "Failed to deserialize the JSON body into the target type: tools[{position}]: unknown "
        "variant `custom`, expected `web_search_20250305` or `web_search_20260209`",
        examples=(
            Example(
                {
                    "messages": [user_turn(GO)],
                    "tools": [
                        {"type": "custom", "name": "Bash", "input_schema": {"type": "object"}}
                    ],
                }
            ),
        ),
        repair={"messages-custom-tool-type": {}},
    ),
    Check(
        "messages_system_role",
        "no message with role system inside messages",
        _system_role,
        # DeepSeek's Anthropic endpoint (deepseek-ai/awesome-deepseek-agent#167)
        "Failed to deserialize the JSON body into the target type: messages[{index}].role: "
        "unknown variant `system`, expected `user` or `assistant`",
        examples=(
            Example({"messages": [user_turn(GO), {"role": "system", "content": "Skills: pdf"}]}),
        ),
        repair={"messages-system-messages": {}},
    ),
    Check(
        "messages_cache_markers",
        "at most so many cache_control markers",
        _cache_markers,
        # Anthropic (griffinmartin/opencode-claude-auth#123)
        "A maximum of {max} blocks with cache_control may be provided. Found {count}.",
        options={"max": 4},
        examples=(
            Example(
                {
                    "messages": [user_turn(*[{**GO, "cache_control": {"type": "ephemeral"}}] * 5)],
                }
            ),
        ),
        repair={"messages-cache-control": {"max_markers": 4}},
    ),
)
MESSAGES_CHECKS_BY_CODE: Mapping[str, Check] = {check.code: check for check in MESSAGES_CHECKS}

#: What every Anthropic-compatible endpoint on record enforces: pairing, unique ids, object
#: inputs, no empty block or message (the Anthropic schema they copy).
MESSAGES_CORE: Contract = {
    "messages_unanswered_tool_use": {},
    "messages_orphan_tool_result": {},
    "messages_duplicate_tool_use_id": {},
    "messages_tool_use_input": {},
    "messages_empty_text_block": {},
    "messages_empty_message": {},
}

NOT_MESSAGES = "messages: Field required"


def violations(
    payload: Any, contract: Contract | None = None, *, betas: Collection[str] = ()
) -> list[Violation]:
    """Every rejection ``contract`` (default: ``MESSAGES_CORE``) gives this Messages payload,
    in contract order (empty: accepted). ``betas``: the request's ``anthropic-beta`` values
    (lower-case), for the checks that read them (a ``betas`` option); none by default, as
    for a body sent without the header."""
    if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
        return [Violation("not_messages", None, NOT_MESSAGES)]
    messages: list[Any] = payload["messages"]
    found: list[Violation] = []
    for code, overrides in (MESSAGES_CORE if contract is None else contract).items():
        check = MESSAGES_CHECKS_BY_CODE[code]
        given = {**overrides, "betas": frozenset(betas)} if "betas" in check.options else overrides
        found.extend(check.run(messages, payload, given))
    return found
