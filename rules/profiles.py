"""Provider profiles: which repairs a provider needs, and what it rejects, in its own words.

A profile is data: the rules it switches on or off (with options) over each rule's default, its
contract (the checks its provider applies, with that provider's error text where the wording
differs from the check's default), and variants (model patterns that get a stricter sibling).
Every text is quoted from ``provider-errors.md`` (row cited). The rules run in the one order of
``rules.RULES`` whatever the profile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rules import RULES
from rules.contract import DEFAULT_CONTRACT, Contract

Settings = Mapping[str, bool | Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    #: The provider and endpoint it describes.
    summary: str
    #: Rule settings over each rule's default (``True``/``False`` or ``{"enabled": ..., **opts}``).
    rules: Settings = field(default_factory=dict)
    contract: Contract = field(default_factory=dict)
    #: (model glob, profile name): a request whose model matches runs under that profile.
    variants: tuple[tuple[str, str], ...] = ()
    #: The error envelope ``chatmend emulate`` answers with: ``openai`` or ``mistral``.
    envelope: str = "openai"


def _contract(base: Contract, **overrides: Mapping[str, Any]) -> Contract:
    """``base`` with per-check overrides (``text``, ``status``, options) and added checks."""
    merged = {code: dict(opts) for code, opts in base.items()}
    for code, opts in overrides.items():
        merged.setdefault(code, {}).update(opts)
    return merged


def _without(base: Contract, *codes: str) -> Contract:
    return {code: opts for code, opts in base.items() if code not in codes}


# --- The pairing core: every strict provider applies it, in its own words (1.A) -------------------

#: The DeepSeek-style core (the default contract) without deepseek-reasoner's alternation check.
PAIRING: Contract = _without(DEFAULT_CONTRACT, "successive_assistant")

_OPENAI_PAIRING = _contract(
    PAIRING,
    # 1.A, OpenAI (aliasrobotics/cai#111)
    unanswered_tool_call={
        "text": "An assistant message with 'tool_calls' must be followed by tool messages "
        "responding to each 'tool_call_id'. The following tool_call_ids did not have response "
        "messages: {ids}"
    },
    # 1.A, OpenAI (agno-agi/agno#5116)
    duplicate_tool_result={
        "text": "Invalid parameter: Duplicate value for 'tool_call_id' of '{id}', in "
        "messages[{first}] and messages[{index}]."
    },
    # 1.A, OpenAI (openai/openai-node#1341)
    empty_tool_calls={
        "text": "Invalid 'messages[{index}].tool_calls': empty array. Expected an array with "
        "minimum length 1, but got an empty array instead."
    },
)

DEEPSEEK = Profile(
    "deepseek",
    "DeepSeek (api.deepseek.com, deepseek-chat and V3.2/V4 models); the default",
    rules={
        "empty-tools": True,
        "thinking-tool-choice": True,
    },
    contract=_contract(
        DEFAULT_CONTRACT,
        empty_tools={},
        thinking_tool_choice={},
    ),
    variants=(("deepseek-reasoner*", "deepseek-reasoner"),),
)

DEEPSEEK_REASONER = Profile(
    "deepseek-reasoner",
    "DeepSeek's deepseek-reasoner alias: DeepSeek's rules plus alternation and position rules",
    rules={**DEEPSEEK.rules},
    contract=DEEPSEEK.contract,
)

KIMI = Profile(
    "kimi",
    "Moonshot / Kimi (api.moonshot.ai, api.moonshot.cn, kimi-code); tool ids are preserved",
    rules={},
    contract=_contract(
        PAIRING,
        # 1.A, Moonshot / Kimi (MoonshotAI/kimi-cli#1977)
        unanswered_tool_call={
            "text": "an assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            "response messages: {ids}"
        },
        # 1.C, Moonshot (CherryHQ/cherry-studio#1313)
        empty_assistant={
            "text": "Invalid request: the message at position {index} with role 'assistant' "
            "must not be empty"
        },
    ),
)

MISTRAL = Profile(
    "mistral",
    "Mistral (api.mistral.ai; vLLM --tokenizer-mode mistral, NVIDIA NIM)",
    rules={"empty-tools": True},
    contract=_contract(
        PAIRING,
        # 1.A, mistral-common validator.py
        unanswered_tool_call={"text": "Not the same number of function calls and responses"},
        orphan_tool_result={"text": "Unexpected tool call id {id} in tool results"},
        duplicate_tool_result={"text": "Duplicate tool call id {id} in tool results"},
        duplicate_tool_call_id={"text": "Duplicate tool call id {id} in assistant message"},
        missing_tool_call_id={"text": "Tool call id has to be defined."},
        # 1.C, Mistral (solbrowse/extension#16)
        empty_assistant={
            "text": "Assistant message must have either content or tool_calls, but not none."
        },
        # 1.A, Mistral 422 extra_forbidden at ["body","tools"] (partITech/php-mistral#76)
        empty_tools={"text": "Extra inputs are not permitted", "status": 422},
    ),
    envelope="mistral",
)

GROQ = Profile(
    "groq",
    "Groq (api.groq.com/openai): strict per-role field allowlist",
    rules={},
    contract=_contract(
        PAIRING,
        # 1.A, Groq (hackclub/ai#22)
        missing_tool_call_id={
            "text": "'messages.{index}' : for 'role:tool' the following must be satisfied"
            "[('messages.{index}.tool_call_id' : property 'tool_call_id' is missing)]"
        },
    ),
)

CEREBRAS = Profile(
    "cerebras",
    "Cerebras (api.cerebras.ai): strict fields, strict JSON",
    rules={},
    contract=PAIRING,
)

QWEN = Profile(
    "qwen",
    "Qwen / DashScope (Bailian, Qwen Portal) and Qwen3.5+ chat templates",
    rules={"empty-tools": True},
    contract=_contract(
        PAIRING,
        # 1.A, Qwen DashScope (QwenLM/qwen-code#315)
        unanswered_tool_call={
            "text": "<400> InternalError.Algo.InvalidParameter: An assistant message with "
            '"tool_calls" must be followed by tool messages responding to each "tool_call_id". '
            "The following tool_call_ids did not have response messages: message[{index}].role"
        },
        # 1.A, Qwen DashScope (philschmid/mcp-openai-gemini-llama-example#5)
        orphan_tool_result={
            "text": '<400> InternalError.Algo.InvalidParameter: messages with role "tool" must '
            'be a response to a preceeding message with "tool_calls".'
        },
        # 1.A, Qwen DashScope (smallmain/vscode-unify-chat-provider#65)
        empty_tool_calls={"text": "Empty tool_calls is not supported in message"},
    ),
)

GLM = Profile(
    "glm",
    "Zhipu GLM (open.bigmodel.cn, api.z.ai): one generic 1214 error for many causes",
    rules={},
    contract=_contract(
        PAIRING,
        # 1.A, Zhipu GLM (MetaGLM/zhipuai-sdk-python-v4#14): the generic 1214
        duplicate_tool_call_id={
            "text": "The messages parameter is illegal. Please check the documentation."
        },
    ),
)

MINIMAX = Profile(
    "minimax",
    "MiniMax (api.minimax.io): error code 2013",
    rules={},
    contract=_contract(
        PAIRING,
        # 1.A, MiniMax (Kilo-Org/kilocode#3967)
        unanswered_tool_call={"text": "invalid params, tool call and result not match (2013)"},
        # 1.A, MiniMax (MiniMax-AI/MiniMax-M2#76)
        orphan_tool_result={"text": "invalid params, tool result's tool id({id}) not found (2013)"},
    ),
)

GEMINI_OPENAI = Profile(
    "gemini-openai",
    "Google Gemini's OpenAI-compatible endpoint (generativelanguage.googleapis.com/v1beta/openai)",
    rules={},
    contract=_contract(
        PAIRING,
        # 1.A, Gemini (google-gemini/gemini-cli#4217)
        unanswered_tool_call={
            "text": "Please ensure that the number of function response parts is equal to the "
            "number of function call parts of the function call turn."
        },
        # 1.A, Gemini (langchain-ai/langchain#27799)
        orphan_tool_result={
            "text": "Please ensure that function response turn comes immediately after a "
            "function call turn"
        },
    ),
)

XAI = Profile(
    "xai",
    "xAI Grok (api.x.ai): every message needs a content element",
    rules={},
    contract=PAIRING,
)

OPENAI = Profile(
    "openai",
    "OpenAI (api.openai.com) Chat Completions: `developer` is kept, images only in user messages",
    rules={"empty-tools": True},
    contract=_contract(_OPENAI_PAIRING, empty_tools={}),
)

AZURE = Profile(
    "azure",
    "Azure OpenAI / Azure AI Inference: OpenAI's rules plus a strict field allowlist",
    rules={**OPENAI.rules},
    contract=OPENAI.contract,
)

CHAT_TEMPLATE = Profile(
    "chat-template",
    "Self-hosted servers rendering HF chat templates (vLLM, SGLang, TGI, llama.cpp, LM Studio)",
    rules={},
    contract=PAIRING,
)

PASSTHROUGH = Profile(
    "passthrough",
    "No repair and no contract: chatmend only relays (and logs)",
    rules=dict.fromkeys((rule.name for rule in RULES), False),
    contract={},
)

#: Every profile, by name, in the order the README lists them.
PROFILES: Mapping[str, Profile] = {
    profile.name: profile
    for profile in (
        DEEPSEEK,
        DEEPSEEK_REASONER,
        KIMI,
        MISTRAL,
        GROQ,
        CEREBRAS,
        QWEN,
        GLM,
        MINIMAX,
        GEMINI_OPENAI,
        XAI,
        OPENAI,
        AZURE,
        CHAT_TEMPLATE,
        PASSTHROUGH,
    )
}
DEFAULT_PROFILE = DEEPSEEK.name
