"""The Responses API contract (docs/providers.md#responses, docs/providers.md#request): what a
strict ``/v1/responses`` endpoint rejects about an ``input`` list, in the provider's words.

The checks use the chat contract's ``Check`` type; their ``messages`` argument is the request's
``input`` list, and their indices are ``input`` indices. ``violations(payload)`` runs them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Any

from rules.engine.request import CLIENT_TOOL_TYPES, foreign_tool, tool_list
from rules.providers.contract.base import Check, Example, Found, Violation
from rules.providers.contract.examples import ITEM_CALL, ITEM_OUTPUT, ITEM_USER
from rules.vocabulary import COMPACTION_MODELS as ELIGIBLE_MODELS

#: The request field OpenAI refuses for models without server-side compaction.
CONTEXT_MANAGEMENT = "context_management"


# The contract's own reading of Responses items, from OpenAI's error texts ("No tool call found
# for function call output with call_id ..."): not the rules' helpers (rules/responses/items.py).


def _typed(item: Any, kind: str) -> bool:
    return type(item) is dict and item.get("type") == kind


def is_message(item: Any) -> bool:
    """A message item: typed ``message``, or an easy message (a ``role`` and no ``type``)."""
    return _typed(item, "message") or (
        type(item) is dict and "role" in item and item.get("type") is None
    )


def is_call(item: Any) -> bool:
    return _typed(item, "function_call")


def is_output(item: Any) -> bool:
    return _typed(item, "function_call_output")


def call_id(item: Any) -> str | None:
    """The non-empty string ``call_id`` of a function call or its output, else ``None``."""
    if not (is_call(item) or is_output(item)):
        return None
    value = item.get("call_id")
    return value if type(value) is str and value else None


def item_id(item: Any) -> str | None:
    """The item's non-empty string ``id``, else ``None``."""
    value = item.get("id") if type(item) is dict else None
    return value if type(value) is str and value else None


def pair_calls(items: list[Any]) -> tuple[set[int], list[int]]:
    """How OpenAI pairs them: an output answers the first earlier call of its ``call_id`` that
    no output answered yet. The answered calls' indices, and the unanswered ones in order."""
    waiting: dict[str, list[int]] = {}
    answered: set[int] = set()
    calls: list[int] = []
    for index, item in enumerate(items):
        cid = call_id(item)
        if cid is not None and is_call(item):
            waiting.setdefault(cid, []).append(index)
            calls.append(index)
        elif cid is not None and waiting.get(cid):
            answered.add(waiting[cid].pop(0))
    return answered, [index for index in calls if index not in answered]


def _orphan_outputs(items: list[Any], request: Mapping[str, Any], options: Any) -> Iterator[Found]:
    """An output whose call_id no earlier function_call carries."""
    calls: set[str] = set()
    for index, item in enumerate(items):
        if is_call(item) and call_id(item) is not None:
            calls.add(item["call_id"])
        elif is_output(item) and item.get("call_id") not in calls:
            yield Found(index, {"id": item.get("call_id")})


def _unanswered_calls(
    items: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    """A function_call no later output answers."""
    _, unanswered = pair_calls(items)
    for index in unanswered:
        yield Found(index, {"id": call_id(items[index])})


def _duplicate_items(items: list[Any], request: Mapping[str, Any], options: Any) -> Iterator[Found]:
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        key = item_id(item)
        if key is None:
            continue
        if key in seen:
            yield Found(index, {"id": key, "first": seen[key]})
        else:
            seen[key] = index


def _long_call_ids(items: list[Any], request: Mapping[str, Any], options: Any) -> Iterator[Found]:
    limit = options.get("max_length", 64)
    for index, item in enumerate(items):
        cid = call_id(item)
        if cid is not None and len(cid) > limit:
            yield Found(index, {"length": len(cid), "max_length": limit})


def _interrupted_outputs(
    items: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    """An output whose call comes before it with a message item in between (DeepSeek pairs a
    call with its output only across calls, outputs and reasoning items)."""
    open_calls: set[str] = set()
    for index, item in enumerate(items):
        if is_message(item):
            open_calls = set()
        elif is_call(item) and call_id(item) is not None:
            open_calls.add(item["call_id"])
        elif is_output(item):
            cid = call_id(item)
            if (
                cid is not None
                and cid not in open_calls
                and any(is_call(earlier) and call_id(earlier) == cid for earlier in items[:index])
            ):
                yield Found(index, {"id": cid})


def _nonadjacent_outputs(
    items: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    """A call whose output (the first later output with its call_id) does not stand right after
    it (DeepSeek pairs a call only with the item right after it)."""
    for index, item in enumerate(items):
        cid = call_id(item) if is_call(item) else None
        if cid is None:
            continue
        following = items[index + 1] if index + 1 < len(items) else None
        if is_output(following) and call_id(following) == cid:
            continue
        if any(is_output(later) and call_id(later) == cid for later in items[index + 1 :]):
            yield Found(index, {"id": cid})


def _invalid_arguments(
    items: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    """A function_call whose arguments string Python's json module cannot read (vLLM's 400
    carries the JSONDecodeError's own text)."""
    for index, item in enumerate(items):
        arguments = item.get("arguments") if is_call(item) else None
        if not isinstance(arguments, str):
            continue
        try:
            json.loads(arguments)
        except json.JSONDecodeError as error:
            yield Found(
                index,
                {"reason": error.msg, "line": error.lineno, "column": error.colno, "at": error.pos},
            )
        except (ValueError, RecursionError):
            continue


def _context_management(
    items: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    if CONTEXT_MANAGEMENT not in request:
        return
    model = request.get("model")
    eligible = (
        options.get("direct_openai") is True
        and isinstance(model, str)
        and any(fnmatchcase(model.lower(), str(p).lower()) for p in options.get("models", ()))
    )
    if not eligible:
        yield Found(None)


def _reasoning_order(items: list[Any], request: Mapping[str, Any], options: Any) -> Iterator[Found]:
    """An assistant message item with an id that stands between a call and that call's output
    while a reasoning item opened its response's items: OpenAI wants it right after that
    reasoning item, as the response gave them."""
    reasoning: str | None = None
    waiting: set[str] = set()
    for index, item in enumerate(items):
        if _typed(item, "reasoning"):
            reasoning, waiting = item_id(item) or "", set()
        elif is_call(item):
            waiting.add(call_id(item) or "")
        elif is_output(item):
            waiting.discard(call_id(item) or "")
            if not waiting:
                reasoning = None
        elif is_message(item) and item.get("role") == "assistant" and item_id(item):
            if reasoning is not None and waiting:
                yield Found(index, {"id": item["id"], "reasoning": reasoning})
        else:
            reasoning, waiting = None, set()


def _unpersisted(items: list[Any], request: Mapping[str, Any], options: Any) -> Iterator[Found]:
    """With ``store: false``, an item that only points to a stored one (OpenAI)."""
    if request.get("store") is not False:
        return
    for index, item in enumerate(items):
        reference = _typed(item, "item_reference")
        bare = _typed(item, "reasoning") and item_id(item) and not item.get("encrypted_content")
        if reference or bare:
            yield Found(index, {"id": item_id(item) or ""})
            return


def _server_tools(items: list[Any], request: Mapping[str, Any], options: Any) -> Iterator[Found]:
    """A ``tools`` entry that is no function tool (a built-in tool, a freeform ``custom`` one):
    not an object, or its ``type`` a string other than ``function`` (what
    ``responses-server-tools`` removes; an entry without a type is the endpoint's to judge)."""
    for position, tool in enumerate(tool_list(request)):
        if foreign_tool(tool, CLIENT_TOOL_TYPES["responses"]):
            yield Found(None, {"position": position})
            return


CHECKS: tuple[Check, ...] = (
    Check(
        "responses_orphan_output",
        "A function_call_output whose call_id no earlier function_call carries.",
        _orphan_outputs,
        # docs/providers.md#openai-responses, OpenAI Responses (continuedev/continue#10092,
        # microsoft/vscode#320060)
        "No tool call found for function call output with call_id {id}.",
        examples=(Example({"input": [ITEM_USER, {**ITEM_OUTPUT, "call_id": "call_9"}]}),),
        repair={
            "responses-blank-call-ids": {},
            "responses-displaced-messages": {},
            "responses-orphan-outputs": {"action": "text"},
            "responses-early-outputs": {},
        },
    ),
    Check(
        "responses_interrupted_output",
        "A message item between a function_call and its output (DeepSeek's Responses endpoint).",
        _interrupted_outputs,
        # docs/providers.md#deepseek-responses, DeepSeek /v1/responses
        # (deepseek-ai/DeepSeek-V3#1611, #1588); the quoted text ends at "call_id": the id is
        # appended as OpenAI's wording does.
        "No tool call found for tool output with call_id {id}",
        examples=(Example({"input": [ITEM_USER, ITEM_CALL, ITEM_USER, ITEM_OUTPUT]}),),
        repair={"responses-displaced-messages": {}},
    ),
    Check(
        "responses_nonadjacent_output",
        "A function_call whose output does not come right after it (DeepSeek's Responses "
        "endpoint: any item between, a reasoning item or a parallel call too).",
        _nonadjacent_outputs,
        # docs/providers.md#deepseek-responses, DeepSeek /v1/responses
        # (deepseek-ai/awesome-deepseek-integration#740)
        "No tool output found for tool call {id}",
        examples=(
            Example(
                {"input": [ITEM_USER, ITEM_CALL, {"type": "reasoning", "summary": []}, ITEM_OUTPUT]}
            ),
        ),
        repair={
            "responses-early-outputs": {},
            "responses-displaced-messages": {"adjacency": "strict"},
        },
    ),
    Check(
        "responses_invalid_arguments",
        "A function_call whose arguments string is not valid JSON (vLLM).",
        _invalid_arguments,
        # docs/providers.md#chat-templates-pairing, vLLM, chat and Responses
        # (OpenHands/software-agent-sdk#2887: "Unterminated string starting at: line 1 column
        # 1121 (char 1120)", the JSONDecodeError's own text)
        "{reason}: line {line} column {column} (char {at})",
        examples=(
            Example({"input": [ITEM_USER, {**ITEM_CALL, "arguments": "{'a': 1}"}, ITEM_OUTPUT]}),
        ),
        repair={"responses-invalid-arguments": {}},
    ),
    Check(
        "responses_unanswered_call",
        "A function_call that no later function_call_output answers.",
        _unanswered_calls,
        # docs/providers.md#openai-responses, OpenAI Responses (tjardoo/openai-client#124)
        "No tool output found for function call {id}.",
        examples=(Example({"input": [ITEM_USER, ITEM_CALL, ITEM_USER]}),),
        repair={"responses-blank-call-ids": {}, "responses-unanswered-calls": {}},
    ),
    Check(
        "responses_duplicate_item",
        "Two input items with one id.",
        _duplicate_items,
        # docs/providers.md#openai-responses, OpenAI Responses (continuedev/continue#10723,
        # OpenRouterTeam/ai-sdk-provider#254)
        "Duplicate item found with id {id}. Remove duplicate items from your input and try again.",
        examples=(
            Example(
                {
                    "input": [
                        ITEM_USER,
                        {**ITEM_CALL, "id": "fc_1"},
                        ITEM_OUTPUT,
                        {**ITEM_CALL, "id": "fc_1"},
                        ITEM_OUTPUT,
                    ]
                }
            ),
        ),
        repair={"responses-duplicate-items": {}},
    ),
    Check(
        "responses_call_id_too_long",
        "A call_id longer than 64 characters.",
        _long_call_ids,
        # docs/providers.md#openai-pairing, OpenAI Responses, Codex backend (AnswerDotAI/fastllm#45)
        "Invalid 'input[{index}].call_id': string too long. Expected a string with maximum "
        "length {max_length}, but got a string with length {length} instead.",
        options={"max_length": 64},
        examples=(
            Example(
                {
                    "input": [
                        ITEM_USER,
                        {**ITEM_CALL, "call_id": "c" * 80},
                        {**ITEM_OUTPUT, "call_id": "c" * 80},
                    ]
                }
            ),
        ),
        repair={"responses-call-ids": {}},
    ),
    Check(
        "responses_context_management",
        "context_management sent to a route or model that does not understand it.",
        _context_management,
        # docs/providers.md#anthropic-request, Anthropic native / Copilot
        # (ericc-ch/copilot-api#217); elsewhere a 500 or a stalled stream
        "context_management: Extra inputs are not permitted",
        options={"direct_openai": False, "models": list(ELIGIBLE_MODELS)},
        examples=(
            Example(
                {
                    "input": [ITEM_USER],
                    "context_management": [{"type": "compaction", "compact_threshold": 1000}],
                }
            ),
        ),
        repair={"responses-context-management": {}},
    ),
    Check(
        "responses_reasoning_order",
        "A message item of a reasoning response replayed after its call instead of right after "
        "its reasoning item (OpenAI).",
        _reasoning_order,
        # docs/providers.md#openai-responses, OpenAI Responses (continuedev/continue#11994)
        "Item '{id}' was provided without its required 'reasoning' item: '{reasoning}'.",
        examples=(
            Example(
                {
                    "input": [
                        ITEM_USER,
                        {"type": "reasoning", "id": "rs_1", "summary": []},
                        ITEM_CALL,
                        {
                            "type": "message",
                            "id": "msg_1",
                            "role": "assistant",
                            "content": "Reading.",
                        },
                        ITEM_OUTPUT,
                    ]
                }
            ),
        ),
        repair={"responses-reasoning-order": {}},
    ),
    Check(
        "responses_unpersisted_item",
        "With store false, an item that only points to a stored one (OpenAI).",
        _unpersisted,
        # docs/providers.md#openai-responses, OpenAI Responses (anomalyco/opencode#4445)
        "Item with id '{id}' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input.",
        examples=(
            Example(
                {
                    "store": False,
                    "input": [
                        ITEM_USER,
                        {"type": "reasoning", "id": "rs_1", "summary": []},
                        ITEM_USER,
                    ],
                }
            ),
        ),
        repair={"responses-unpersisted-items": {}},
    ),
    Check(
        "responses_server_tool",
        "Only function tools: no built-in (web_search, file_search, mcp, ...) or custom tool.",
        _server_tools,
        # docs/providers.md#others-responses, Command Code's /provider/v1/responses
        # (CommandCodeAI/command-code#885): param tools.{position}.type
        'Only `type:"function"` tools are supported on this endpoint. Built-in tools '
        "(web_search, file_search, code_interpreter, computer_use, mcp) are not executed here.",
        examples=(Example({"input": [ITEM_USER], "tools": [{"type": "web_search"}]}),),
        repair={"responses-server-tools": {}},
    ),
)
CHECKS_BY_CODE: Mapping[str, Check] = {check.code: check for check in CHECKS}

#: Checks only some providers apply: a profile adds them (``Profile.responses_contract``).
PROFILE_ONLY = frozenset(
    {
        "responses_nonadjacent_output",
        "responses_invalid_arguments",
        "responses_reasoning_order",
        "responses_unpersisted_item",
        "responses_server_tool",
    }
)

#: The strict Responses contract every profile applies: every check but ``PROFILE_ONLY``, in its
#: default words.
RESPONSES_CONTRACT: Mapping[str, Mapping[str, Any]] = {
    check.code: {} for check in CHECKS if check.code not in PROFILE_ONLY
}

NOT_RESPONSES = "Missing required parameter: 'input'."


def violations(
    payload: Any, contract: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Violation]:
    """Every rejection ``contract`` (default: all checks) gives this Responses payload (empty:
    accepted). A string ``input`` holds no item to check; the request-level check still runs."""
    if not isinstance(payload, dict) or not isinstance(payload.get("input"), list | str):
        return [Violation("not_responses", None, NOT_RESPONSES)]
    items = payload["input"] if isinstance(payload["input"], list) else []
    found: list[Violation] = []
    for code, overrides in (RESPONSES_CONTRACT if contract is None else contract).items():
        found.extend(CHECKS_BY_CODE[code].run(items, payload, overrides))
    return found


__all__ = [
    "CHECKS",
    "CHECKS_BY_CODE",
    "NOT_RESPONSES",
    "PROFILE_ONLY",
    "RESPONSES_CONTRACT",
    "violations",
]
