"""Provider profiles: which repairs a provider needs, and what it rejects, in its own words.

A profile is data: the rules it switches on or off (with options) over each rule's default, its
contract (the checks its provider applies, with that provider's error text where the wording
differs from the check's default), and variants (model patterns that get a stricter sibling).
Every text is quoted from ``docs/providers.md`` (the section cited next to each). The rules run in
the one order of ``rules.RULES`` whatever the profile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rules.chat import RULES
from rules.chat.unknown_roles import DEEPSEEK_ROLES, OPENAI_ROLES, QWEN_ROLES
from rules.messages import MESSAGES_RULES
from rules.providers.contract import DEFAULT_CONTRACT, Contract, content, fields, ids, reasoning
from rules.providers.contract import messages as anthropic
from rules.replies.formats import FORMATS
from rules.responses import RESPONSES_RULES

Settings = Mapping[str, bool | Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Host:
    """An upstream host that picks a profile when the config names none: its glob (compared in
    lower case; no two profiles' globs match one host, tests/proxy/test_provider_hosts.py) and a
    base URL the provider documents for it."""

    pattern: str
    example: str


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    #: The provider and endpoint it describes.
    summary: str
    #: The upstream hosts that select it (docs/profiles.md renders them).
    hosts: tuple[Host, ...] = ()
    #: Rule settings over each rule's default (``True``/``False`` or ``{"enabled": ..., **opts}``).
    rules: Settings = field(default_factory=dict)
    contract: Contract = field(default_factory=dict)
    #: (model glob, profile name): a request whose model matches runs under that profile.
    variants: tuple[tuple[str, str], ...] = ()
    #: The error envelope ``chatmend emulate`` answers with: ``openai`` or ``mistral``.
    envelope: str = "openai"
    #: Its Anthropic-format endpoint (``/v1/messages``): settings of the Messages rules
    #: (``rules.messages``) over their defaults, the checks it applies
    #: (``rules.providers.contract.messages``), and its error envelope (``anthropic``, or
    #: ``openai`` for an endpoint that answers in OpenAI's shape).
    messages: Settings = field(default_factory=dict)
    messages_contract: Contract = field(default_factory=lambda: dict(anthropic.MESSAGES_CORE))
    messages_envelope: str = "anthropic"
    #: Its ``/v1/responses`` endpoint: settings of the Responses rules (``rules.responses``)
    #: over their defaults, and the checks it applies beyond the strict Responses contract
    #: (``rules.providers.contract.responses``).
    responses: Settings = field(default_factory=dict)
    responses_contract: Contract = field(default_factory=dict)
    #: What its models send back: settings of the reply rules (``rules.replies``) over their
    #: defaults; above all the formats ``response-text-tool-calls`` reads as tool calls (the
    #: markups its models are reported to write in content, docs/replies.md).
    replies: Settings = field(default_factory=dict)


def _contract(base: Contract, **overrides: Mapping[str, Any]) -> Contract:
    """``base`` with per-check overrides (``text``, ``status``, options) and added checks."""
    merged = {code: dict(opts) for code, opts in base.items()}
    for code, opts in overrides.items():
        merged.setdefault(code, {}).update(opts)
    return merged


def _without(base: Contract, *codes: str) -> Contract:
    return {code: opts for code, opts in base.items() if code not in codes}


_GLM_1214 = "The messages parameter is illegal. Please check the documentation."
_DEEPSEEK_NULL = (
    "Failed to deserialize the JSON body into the target type: messages[{index}]: content "
    "should be a string or a list"
)

# --- The pairing core: every strict provider applies it, in its own words
# (docs/providers.md#pairing) -------------------

#: The DeepSeek-style core (the default contract) without deepseek-reasoner's alternation check,
#: plus OpenAI's role list (a provider that copies OpenAI's schema refuses any other role; a
#: profile whose provider knows fewer overrides ``roles`` and its rule option alike).
PAIRING: Contract = _contract(
    _without(DEFAULT_CONTRACT, "successive_assistant"),
    unknown_role={"text": fields.OPENAI_UNKNOWN_ROLE_TEXT, "roles": list(OPENAI_ROLES)},
)

_OPENAI_PAIRING = _contract(
    PAIRING,
    # docs/providers.md#openai-pairing, OpenAI (aliasrobotics/cai#111)
    unanswered_tool_call={
        "text": "An assistant message with 'tool_calls' must be followed by tool messages "
        "responding to each 'tool_call_id'. The following tool_call_ids did not have response "
        "messages: {ids}"
    },
    # docs/providers.md#openai-pairing, OpenAI (agno-agi/agno#5116)
    duplicate_tool_result={
        "text": "Invalid parameter: Duplicate value for 'tool_call_id' of '{id}', in "
        "messages[{first}] and messages[{index}]."
    },
    # docs/providers.md#openai-pairing, OpenAI (openai/openai-node#1341)
    empty_tool_calls={
        "text": "Invalid 'messages[{index}].tool_calls': empty array. Expected an array with "
        "minimum length 1, but got an empty array instead."
    },
)

#: Messages in DeepSeek's serde shape: roles it knows, no images, string contents
#: (docs/providers.md#deepseek-roles, docs/providers.md#deepseek-content). A tool-call assistant's
#: ``""`` and ``null`` are accepted (docs/providers.md#question-6, ranxianglei/billion-
#: context#719's live table): only a list there is refused, so only lists are reshaped.
_DEEPSEEK_SHAPE: Settings = {
    "developer-role": True,
    "unknown-roles": {"enabled": True, "roles": list(DEEPSEEK_ROLES)},
    # docs/providers.md#deepseek-content content as array and docs/providers.md#deepseek-reasoning:
    # DeepSeek reads the thinking as reasoning_content
    "thinking-parts": {"enabled": True, "action": "reasoning_content"},
    "image-parts": {"enabled": True, "action": "strip"},
    "text-part-arrays": True,
    "null-content": True,
    "tool-call-content": {
        "enabled": True,
        "shape": "null",
        "kinds": ["empty_list", "empty_parts"],
    },
}

DEEPSEEK = Profile(
    "deepseek",
    "DeepSeek (api.deepseek.com, deepseek-chat and V3.2/V4 models); the default",
    replies={
        "response-text-tool-calls": {"formats": ["deepseek-dsml", "deepseek-v3", "hermes-attr"]}
    },
    hosts=(Host("api.deepseek.com", "https://api.deepseek.com"),),
    rules={
        **_DEEPSEEK_SHAPE,
        "empty-tools": True,
        # docs/providers.md#deepseek-request: "Tool names must be unique." (decolua/9router
        # PR#3333)
        "duplicate-tool-names": True,
        "thinking-tool-choice": True,
        # docs/providers.md, DeepSeek: plain turns of a tool loop need the field too
        "reasoning-content": {"enabled": True, "plain_turns": True},
    },
    contract=_contract(
        DEFAULT_CONTRACT,
        empty_tools={},
        duplicate_tool_names={},  # docs/providers.md#deepseek-request (decolua/9router PR#3333)
        thinking_tool_choice={},
        unknown_role={},  # docs/providers.md#deepseek-roles, DeepSeek (earendil-works/pi#1048)
        # docs/providers.md#deepseek-content, DeepSeek (browser-use/web-ui#99)
        image_unsupported={},
        content_missing={},  # docs/providers.md#deepseek-content, DeepSeek (pig-mesh/deepseek4j#40)
        content_not_string={},  # docs/providers.md#deepseek-content, DeepSeek (moeru-ai/airi#1222)
        content_object={},  # docs/providers.md#qwen-content, DashScope-style (felinics/Memoh#744)
        # docs/providers.md#deepseek-content, DeepSeek V4: null content on a system, user or tool
        # message is a 400 (BigPizzaV3/CodexPlusPlus#1731's text, HKUDS/nanobot#3869)
        content_null={"roles": ["system", "developer", "user", "tool"], "text": _DEEPSEEK_NULL},
        # docs/providers.md#deepseek-reasoning, DeepSeek V4 (anomalyco/opencode#24083); plain turns
        # of a tool loop too (hermes-agent PR #14941, docs/providers.md)
        reasoning_content_missing={"plain_turns": True},
    ),
    variants=(("deepseek-reasoner*", "deepseek-reasoner"),),
    # docs/providers.md, DeepSeek Anthropic endpoint (api.deepseek.com/anthropic)
    messages={
        # deepseek-ai/DeepSeek-V3#1277: Claude Code's JSON `metadata.user_id`
        "messages-metadata-user-id": True,
        # deepseek-ai/awesome-deepseek-integration#598: a named tool on deepseek-v4-*
        "messages-thinking-tool-choice": True,
        # NousResearch/hermes-agent#22313: thinking must come back on tool-use turns
        "messages-missing-thinking": True,
        # docs/providers.md#deepseek-request: "Tool names must be unique." (decolua/9router
        # PR#3333: two `Bash` tools from Claude Code)
        "messages-duplicate-tool-names": True,
        # docs/providers.md#anthropic-roles: a `system` message Claude Code injects
        # (deepseek-ai/awesome-deepseek-agent#167)
        "messages-system-messages": True,
        # docs/providers.md#deepseek-request: a client tool tagged `type: "custom"`
        # (decolua/9router#3905)
        "messages-custom-tool-type": True,
    },
    messages_contract=_contract(
        anthropic.MESSAGES_CORE,
        messages_user_id_pattern={},
        messages_thinking_tool_choice={},
        messages_thinking_missing={},
        messages_duplicate_tool_names={},  # docs/providers.md#deepseek-request (9router PR#3333)
        messages_system_role={},  # deepseek-ai/awesome-deepseek-agent#167
        messages_custom_tool_type={},  # docs/providers.md#deepseek-request (9router#3905)
    ),
    # DeepSeek answers its Anthropic endpoint in OpenAI's shape (farion1231/cc-switch#2600)
    messages_envelope="openai",
    # docs/providers.md#deepseek-responses, DeepSeek /v1/responses: no item of any kind between a
    # call and its output (deepseek-ai/awesome-deepseek-integration#740)
    responses={"responses-displaced-messages": {"enabled": True, "adjacency": "strict"}},
    responses_contract={"responses_nonadjacent_output": {}},
)

DEEPSEEK_REASONER = Profile(
    "deepseek-reasoner",
    "DeepSeek's deepseek-reasoner alias: DeepSeek's rules plus alternation and position rules",
    replies={
        "response-text-tool-calls": {"formats": ["deepseek-dsml", "deepseek-v3", "hermes-attr"]}
    },
    rules={
        **DEEPSEEK.rules,
        "consecutive-user-messages": True,
        "leading-user-message": True,
        "trailing-assistant": {"enabled": True, "action": "continue"},
    },
    contract=_contract(
        DEEPSEEK.contract,
        # docs/providers.md#deepseek-roles, deepseek-reasoner (deepseek-ai/DeepSeek-R1#21)
        successive_user={},
        # docs/providers.md#deepseek-roles, deepseek-reasoner (ChatGPTNextWeb/NextChat#6343)
        first_not_user={},
        # docs/providers.md#deepseek-roles, deepseek-reasoner (BerriAI/litellm#8090)
        trailing_assistant={
            "text": "The last message of deepseek-reasoner must be a user message, or an "
            "assistant message with prefix mode on (refer to "
            "https://api-docs.deepseek.com/guides/chat_prefix_completion)."
        },
        # docs/providers.md#deepseek-reasoning, deepseek-reasoner / V3.2 with thinking
        # (hotovo/aider-desk#529)
        reasoning_content_missing={"text": reasoning.DEEPSEEK_TEXT},
    ),
    messages=DEEPSEEK.messages,
    messages_contract=DEEPSEEK.messages_contract,
    messages_envelope=DEEPSEEK.messages_envelope,
    responses=DEEPSEEK.responses,
    responses_contract=DEEPSEEK.responses_contract,
)

#: Kimi models that think (K2.5/K2.6 unless ``thinking.type: disabled``, K2-thinking), also
#: under a router's prefix (``moonshotai/kimi-k2.5``): docs/providers.md#kimi-reasoning. K3
#: always thinks: Moonshot's guide, quoted in MoonshotAI/Kimi-K3#45 ("kimi-k3 ... always
#: reasons", effort set by top-level ``reasoning_effort``), and its temperature refusals
#: (ExplosiveCoderflome/AI-Novel-Writing-Assistant#155, RakuenSoftware/aimee#2200).
KIMI_THINKING_MODELS = ["*kimi-k2.5*", "*kimi-k2.6*", "*kimi-k2-thinking*", "*kimi-k3*"]

KIMI = Profile(
    "kimi",
    "Moonshot / Kimi (api.moonshot.ai, api.moonshot.cn, kimi-code); tool ids are preserved",
    replies={"response-text-tool-calls": {"formats": ["kimi-k2"], "ids": "kimi"}},
    hosts=(
        Host("api.moonshot.ai", "https://api.moonshot.ai/v1"),
        Host("api.moonshot.cn", "https://api.moonshot.cn"),
        # Kimi Code (kimi-for-coding), MoonshotAI/kimi-code#269
        Host("api.kimi.com", "https://api.kimi.com/coding/v1"),
    ),
    rules={
        "developer-role": True,
        "unknown-roles": {"enabled": True, "roles": list(QWEN_ROLES)},
        # docs/providers.md#kimi-reasoning
        "thinking-parts": {"enabled": True, "action": "reasoning_content"},
        # Kimi takes part lists; only a bare part object is refused (docs/providers.md#kimi-content,
        # LnYo-Cly/ai4j#62).
        "text-part-arrays": {"enabled": True, "lists": False},
        # ``""`` and an empty text part are refused next to tool calls
        # (docs/providers.md#kimi-content, kimi-cli#2621, #2035); no report shows ``null`` refused,
        # so it is left.
        "tool-call-content": {
            "enabled": True,
            "shape": "omit",
            "kinds": ["empty_string", "empty_parts"],
        },
        # docs/providers.md#kimi-reasoning: "tool call" is the placeholder cc-switch sends Kimi
        # (farion1231/cc-switch#2365)
        "reasoning-content": {
            "enabled": True,
            "placeholder": "tool call",
            "models": KIMI_THINKING_MODELS,
        },
        # docs/providers.md#kimi-request: a forced choice in thinking mode (bestruirui/octopus#251,
        # can1357/oh-my-pi#827), and any temperature but 1 (lsdefine/GenericAgent#30)
        "thinking-tool-choice": {"enabled": True, "models": KIMI_THINKING_MODELS},
        "thinking-sampling": {
            "enabled": True,
            "fixed": {"temperature": 1.0},
            "models": KIMI_THINKING_MODELS,
        },
        # docs/providers.md#kimi-request: a tool schema's `type` beside `anyOf`
        # (openJiuwen-ai/jiuwenswarm#3942, openclaw/openclaw#113130)
        "anyof-parent-types": True,
    },
    contract=_contract(
        PAIRING,
        # docs/providers.md#kimi-request, Moonshot/Kimi (openJiuwen-ai/jiuwenswarm#3942)
        tool_schema_anyof_type={},
        # docs/providers.md#kimi-reasoning, Kimi K2.5/K2.6 thinking (iOfficeAI/AionUi#2746)
        reasoning_content_missing={"text": reasoning.KIMI_TEXT, "models": KIMI_THINKING_MODELS},
        # docs/providers.md#kimi-request, Kimi K2.5/K2.6 (bestruirui/octopus#251,
        # can1357/oh-my-pi#827)
        thinking_tool_choice={
            "text": "tool_choice '{choice}' is incompatible with thinking enabled",
            "models": KIMI_THINKING_MODELS,
        },
        # docs/providers.md#kimi-request, Kimi thinking models (lsdefine/GenericAgent#30)
        thinking_temperature={"models": KIMI_THINKING_MODELS, "temperature": 1},
        # docs/providers.md#kimi-pairing, Moonshot / Kimi (MoonshotAI/kimi-cli#1977)
        unanswered_tool_call={
            "text": "an assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            "response messages: {ids}"
        },
        # docs/providers.md#kimi-content, Moonshot (CherryHQ/cherry-studio#1313)
        empty_assistant={
            "text": "Invalid request: the message at position {index} with role 'assistant' "
            "must not be empty"
        },
        # docs/providers.md#kimi-content, Kimi (MoonshotAI/kimi-cli#2621, #2035)
        tool_call_content_empty={"kinds": ["empty_string", "empty_parts"]},
        # docs/providers.md#kimi-content, Moonshot (LnYo-Cly/ai4j#62)
        content_object={
            "text": "Invalid request: the `messages.content` field in the request (expected "
            "type []object) is illegal, and object is not acceptable"
        },
        # docs/providers.md#kimi-roles, Kimi and Qwen via OpenRouter (can1357/oh-my-pi#843)
        unknown_role={"text": fields.QWEN_ROLE_TEXT, "roles": list(QWEN_ROLES)},
    ),
    # Its Anthropic-format endpoint: the Messages core, and Kimi K2.7 Code's refusal of any
    # `thinking.type` but `enabled` (MoonshotAI/Kimi-K2#141, can1357/oh-my-pi#3852; the rule's
    # `models` name that family only: Kimi K3 wants `adaptive`).
    messages={"messages-thinking-type": True},
    messages_contract=_contract(anthropic.MESSAGES_CORE, messages_thinking_type={}),
)

MISTRAL = Profile(
    "mistral",
    "Mistral (api.mistral.ai; vLLM --tokenizer-mode mistral, NVIDIA NIM)",
    replies={"response-text-tool-calls": {"formats": ["mistral"]}},
    hosts=(Host("api.mistral.ai", "https://api.mistral.ai"),),
    rules={
        "developer-role": True,
        "unknown-roles": {"enabled": True, "roles": list(DEEPSEEK_ROLES)},
        "unknown-message-fields": {"enabled": True, "deny": ["name"]},
        "tool-call-ids": {"enabled": True, "format": "mistral9"},
        "function-names": {"enabled": True, "pattern": "strict"},
        "system-messages": {"enabled": True, "later": "hoist"},
        "tool-user-bridge": True,
        "trailing-assistant": {"enabled": True, "action": "continue"},
        "empty-tools": True,
    },
    contract=_contract(
        PAIRING,
        # docs/providers.md#mistral-pairing, mistral-common validator.py
        unanswered_tool_call={"text": "Not the same number of function calls and responses"},
        orphan_tool_result={"text": "Unexpected tool call id {id} in tool results"},
        duplicate_tool_result={"text": "Duplicate tool call id {id} in tool results"},
        duplicate_tool_call_id={"text": "Duplicate tool call id {id} in assistant message"},
        missing_tool_call_id={"text": "Tool call id has to be defined."},
        # docs/providers.md#mistral-content, Mistral (solbrowse/extension#16)
        empty_assistant={
            "text": "Assistant message must have either content or tool_calls, but not none."
        },
        # docs/providers.md#mistral-pairing, Mistral 422 extra_forbidden at ["body","tools"]
        # (partITech/php-mistral#76)
        empty_tools={"text": "Extra inputs are not permitted", "status": 422},
        # docs/providers.md#mistral-reasoning, Mistral 422 extra_forbidden
        # (charmbracelet/crush#1590, mistral-go#2)
        unknown_field={"text": fields.MISTRAL_FIELD_TEXT, "status": 422, "deny": ["name"]},
        # docs/providers.md#mistral-pairing, Mistral (langchain-ai/langchain#24668)
        tool_call_id_format={},
        function_name_invalid={},  # docs/providers.md#mistral-pairing, mistral-common
        # docs/providers.md#mistral-roles, Mistral (datapizza-labs/datapizza-ai#98)
        unexpected_role_order={},
        conversation_start={},  # docs/providers.md#mistral-roles, mistral-common validator.py
        trailing_assistant={},  # docs/providers.md#mistral-roles, Mistral (NEKOparapa/AiNiee#641)
        # mistral-common's four roles (inferred wording, see fields.MISTRAL_ROLE_TEXT)
        unknown_role={
            "text": fields.MISTRAL_ROLE_TEXT,
            "status": 422,
            "roles": list(DEEPSEEK_ROLES),
        },
    ),
    envelope="mistral",
)

GROQ = Profile(
    "groq",
    "Groq (api.groq.com/openai): strict per-role field allowlist",
    hosts=(Host("api.groq.com", "https://api.groq.com/openai"),),
    rules={
        "unknown-message-fields": True,
        "text-part-arrays": {"enabled": True, "roles": ["system"]},
    },
    contract=_contract(
        PAIRING,
        # docs/providers.md#groq-pairing, Groq (hackclub/ai#22)
        missing_tool_call_id={
            "text": "'messages.{index}' : for 'role:tool' the following must be satisfied"
            "[('messages.{index}.tool_call_id' : property 'tool_call_id' is missing)]"
        },
        unknown_field={},  # docs/providers.md#groq-fields, Groq (ServiceStack/llms#17)
        # docs/providers.md#groq-content, Groq (OpenHands/OpenHands#4643)
        content_not_string={
            "roles": ["system"],
            "text": "'messages.{index}' : for 'role:system' the following must be satisfied"
            "[('messages.{index}.content' : value must be a string)]",
        },
    ),
)

CEREBRAS = Profile(
    "cerebras",
    "Cerebras (api.cerebras.ai): strict fields, strict JSON",
    hosts=(Host("api.cerebras.ai", "https://api.cerebras.ai"),),
    rules={"unknown-message-fields": True},
    contract=_contract(
        PAIRING,
        # docs/providers.md#cerebras-reasoning (Kilo-Org/kilocode#10375)
        unknown_field={"text": fields.CEREBRAS_FIELD_TEXT},
    ),
)

QWEN = Profile(
    "qwen",
    "Qwen / DashScope (Bailian, Qwen Portal) and Qwen3.5+ chat templates",
    replies={"response-text-tool-calls": {"formats": ["hermes", "qwen3-coder"]}},
    hosts=(Host("dashscope*.aliyuncs.com", "https://dashscope-intl.aliyuncs.com/compatible-mode"),),
    rules={
        "developer-role": True,
        "unknown-roles": {"enabled": True, "roles": list(QWEN_ROLES)},
        # DashScope takes part lists; only a bare part object is refused
        # (docs/providers.md#qwen-content, Memoh#744).
        "text-part-arrays": {"enabled": True, "lists": False},
        "system-messages": {"enabled": True, "later": "hoist"},
        "leading-user-message": True,
        "empty-tools": True,
    },
    contract=_contract(
        PAIRING,
        # docs/providers.md#qwen-pairing, Qwen DashScope (QwenLM/qwen-code#315)
        unanswered_tool_call={
            "text": "<400> InternalError.Algo.InvalidParameter: An assistant message with "
            '"tool_calls" must be followed by tool messages responding to each "tool_call_id". '
            "The following tool_call_ids did not have response messages: message[{index}].role"
        },
        # docs/providers.md#qwen-pairing, Qwen DashScope
        # (philschmid/mcp-openai-gemini-llama-example#5)
        orphan_tool_result={
            "text": '<400> InternalError.Algo.InvalidParameter: messages with role "tool" must '
            'be a response to a preceeding message with "tool_calls".'
        },
        # docs/providers.md#qwen-pairing, Qwen DashScope (smallmain/vscode-unify-chat-provider#65)
        empty_tool_calls={"text": "Empty tool_calls is not supported in message"},
        # docs/providers.md#qwen-roles, Qwen3.5 template (vllm-project/vllm#41114)
        system_not_first={},
        # docs/providers.md#qwen-roles, DashScope (agentscope-ai/agentscope-java#613)
        no_user_message={},
        content_object={},  # docs/providers.md#qwen-content, DashScope (felinics/Memoh#744)
        # docs/providers.md#qwen-roles, Qwen (earendil-works/pi#5117)
        unknown_role={"text": fields.QWEN_ROLE_TEXT, "roles": list(QWEN_ROLES)},
        empty_tools={},
    ),
    # Its Anthropic-format endpoint: no refusal beyond the Messages core is on record
    # (docs/anthropic.md): the core rules and checks, nothing more.
    messages={},
    messages_contract=anthropic.MESSAGES_CORE,
)

GLM = Profile(
    "glm",
    "Zhipu GLM (open.bigmodel.cn, api.z.ai): one generic 1214 error for many causes",
    replies={"response-text-tool-calls": {"formats": ["glm"]}},
    hosts=(
        Host("open.bigmodel.cn", "https://open.bigmodel.cn/api/paas/v4"),
        Host("api.z.ai", "https://api.z.ai/api/paas/v4"),
    ),
    rules={
        "text-part-arrays": True,
        "leading-user-message": True,
        # docs/providers.md#glm-content: an empty text part beside an image
        # (justrach/codegraff#812)
        "empty-text-parts": True,
    },
    contract=_contract(
        PAIRING,
        # docs/providers.md#glm-content, GLM's generic 1210 (justrach/codegraff#812)
        empty_text_part={},
        # docs/providers.md#glm-content, GLM-5.1 via a platform (BigPizzaV3/CodexPlusPlus#329)
        content_not_string={
            "text": "request param validation error, Value error, "
            "message[{index}].content[{position}] has invalid field(s): text",
            "text_only": True,
        },
        # docs/providers.md#glm-pairing, Zhipu GLM (MetaGLM/zhipuai-sdk-python-v4#14): the generic
        # 1214
        duplicate_tool_call_id={"text": _GLM_1214},
        # docs/providers.md#glm-roles, GLM-4.5 (anomalyco/opencode#2557)
        no_user_message={"text": _GLM_1214},
    ),
    # Its Anthropic-format endpoint: no refusal beyond the Messages core is on record
    # (docs/anthropic.md): the core rules and checks, nothing more.
    messages={},
    messages_contract=anthropic.MESSAGES_CORE,
)

MINIMAX = Profile(
    "minimax",
    "MiniMax (api.minimax.io): error code 2013",
    replies={"response-text-tool-calls": {"formats": ["minimax"]}},
    hosts=(Host("api.minimax*", "https://api.minimax.io"),),
    rules={
        "system-messages": {"enabled": True, "later": "hoist"},
        # docs/providers.md#minimax-request (QwenLM/qwen-code#11834)
        "empty-tool-parameters": True,
        # docs/providers.md#minimax-request: MiniMax-M3 refuses `thinking.type: "enabled"`, the
        # value M1/M2 take; `adaptive` keeps thinking on (CherryHQ/cherry-studio#16247, fixed
        # the same way in #15991)
        "request-values": {
            "enabled": True,
            "replace": {"thinking.type": {"enabled": "adaptive"}},
            "models": ["minimax-m3*"],
        },
    },
    contract=_contract(
        PAIRING,
        # docs/providers.md#minimax-request, MiniMax (QwenLM/qwen-code#11834)
        tool_parameters_empty={},
        # docs/providers.md#minimax-request, MiniMax-M3 (CherryHQ/cherry-studio#16247)
        thinking_type={},
        # docs/providers.md#minimax-pairing, MiniMax (Kilo-Org/kilocode#3967)
        unanswered_tool_call={"text": "invalid params, tool call and result not match (2013)"},
        # docs/providers.md#minimax-pairing, MiniMax (MiniMax-AI/MiniMax-M2#76)
        orphan_tool_result={"text": "invalid params, tool result's tool id({id}) not found (2013)"},
        # docs/providers.md#minimax-roles, MiniMax (BigPizzaV3/CodexPlusPlus#267)
        multiple_system={},
    ),
    # Its Anthropic-format endpoint: no refusal beyond the Messages core is on record
    # (docs/anthropic.md): the core rules and checks, nothing more.
    messages={
        # MiniMax-AI/MiniMax-M2.7#43: a `system` message inside `messages`
        "messages-system-messages": True,
    },
    messages_contract=_contract(
        anthropic.MESSAGES_CORE,
        # docs/providers.md#minimax-roles, MiniMax's Anthropic endpoint (MiniMax-AI/MiniMax-M2.7#43)
        messages_system_role={
            "text": "invalid params, chat content has invalid message role: system (2013)"
        },
    ),
)

GEMINI_OPENAI = Profile(
    "gemini-openai",
    "Google Gemini's OpenAI-compatible endpoint (generativelanguage.googleapis.com/v1beta/openai)",
    hosts=(
        Host(
            "generativelanguage.googleapis.com",
            "https://generativelanguage.googleapis.com/v1beta/openai",
        ),
    ),
    rules={
        "leading-user-message": True,
        "function-names": {"enabled": True, "pattern": "gemini"},
        "tool-message-name": {"enabled": True, "add_missing": True},
        # Gemini 3 needs its thought signatures back on the calls
        # (docs/providers.md#gemini-reasoning, Gitlawb/openclaude#76)
        "bookkeeping-keys": {"keep": ["extra_content"]},
        # and, where a replayed call lost its signature, Google's documented validator skip
        # (docs/providers.md#gemini-reasoning, Gitlawb/openclaude#67)
        "missing-thought-signatures": True,
    },
    contract=_contract(
        PAIRING,
        # docs/providers.md#gemini-pairing, Gemini (google-gemini/gemini-cli#4217)
        unanswered_tool_call={
            "text": "Please ensure that the number of function response parts is equal to the "
            "number of function call parts of the function call turn."
        },
        # docs/providers.md#gemini-pairing, Gemini (langchain-ai/langchain#27799)
        orphan_tool_result={
            "text": "Please ensure that function response turn comes immediately after a "
            "function call turn"
        },
        # docs/providers.md#gemini-roles, Gemini (google-gemini/gemini-cli#11814)
        first_not_user={
            "text": "Please ensure that function call turn comes immediately after a user turn "
            "or after a function response turn.",
            "tool_calls_only": True,
        },
        # docs/providers.md#gemini-pairing, Gemini (google-gemini/gemini-cli#7878)
        function_name_invalid={"pattern": "gemini", "text": ids.GEMINI_NAME_TEXT},
        # docs/providers.md#gemini-pairing, Gemini (pydantic/pydantic-ai#1879)
        tool_message_name={},
        bookkeeping_field={"keep": ["extra_content"]},
        # docs/providers.md#gemini-reasoning, Gemini 3 (Gitlawb/openclaude#67)
        thought_signature_missing={},
    ),
)

XAI = Profile(
    "xai",
    "xAI Grok (api.x.ai): every message needs a content element",
    hosts=(Host("api.x.ai", "https://api.x.ai"),),
    rules={
        "thinking-parts": True,
        # more than one text element is refused, one is not (docs/providers.md#xai-content,
        # nocmt/LLMSearchPlus#2)
        "text-part-arrays": {"enabled": True, "min_parts": 2},
        "null-content": True,
        # null, absent and [] are refused next to tool calls, "" is the workaround
        # (docs/providers.md#content, langchain-ai/langchain#34140, AstrBotDevs/AstrBot#6447)
        "tool-call-content": {
            "enabled": True,
            "shape": "empty",
            "kinds": ["absent", "null", "empty_list"],
        },
        # a tool_choice without tools, absent included (docs/providers.md#xai-request,
        # router-for-me/CLIProxyAPI#3704)
        "empty-tools": {"enabled": True, "refused": "tool_choice"},
    },
    contract=_contract(
        PAIRING,
        # docs/providers.md#xai-request, xAI (router-for-me/CLIProxyAPI#3704, #4491)
        tool_choice_without_tools={},
        no_content_element={},  # docs/providers.md#xai-content, xAI (langchain-ai/langchain#34140)
        multiple_text_elements={},  # docs/providers.md#xai-content, xAI (nocmt/LLMSearchPlus#2)
        # docs/providers.md#xai-content, xAI (nocmt/LLMSearchPlus#2)
        thinking_part={"text": content.XAI_SINGLE_TEXT},
    ),
)

OPENAI = Profile(
    "openai",
    "OpenAI (api.openai.com) Chat Completions: `developer` is kept, images only in user messages",
    hosts=(Host("api.openai.com", "https://api.openai.com"),),
    rules={
        "empty-tools": True,
        "thinking-parts": True,
        "image-parts": {"enabled": True, "action": "relocate"},
        "tool-call-ids": {"enabled": True, "format": "max40"},
        "function-names": {"enabled": True, "pattern": "strict"},
        "null-content": True,
    },
    contract=_contract(
        _OPENAI_PAIRING,
        empty_tools={},
        image_not_user={},  # docs/providers.md#openai-content, OpenAI (OpenHands/OpenHands#7700)
        # docs/providers.md#openai-pairing, OpenAI (agno-agi/agno#5382)
        tool_call_id_format={"format": "max40", "text": ids.OPENAI_ID_LENGTH_TEXT},
        # docs/providers.md#openai-pairing (mcp-use/mcp-use#90)
        function_name_invalid={"text": ids.OPENAI_NAME_TEXT},
        # docs/providers.md#openai-content, OpenAI/Azure (langchain-ai/langchainjs#4153)
        content_null={},
        # docs/providers.md#openai-content, OpenAI unknown part type (aallam/openai-kotlin#320)
        thinking_part={},
    ),
    # docs/providers.md#openai-responses: a message item replayed after its call, away from its
    # reasoning item (continuedev/continue#11994)
    # ... and reasoning items replayed by id with `store: false` (anomalyco/opencode#4445)
    responses={"responses-reasoning-order": True, "responses-unpersisted-items": True},
    responses_contract={"responses_reasoning_order": {}, "responses_unpersisted_item": {}},
)

AZURE = Profile(
    "azure",
    "Azure OpenAI / Azure AI Inference: OpenAI's rules plus a strict field allowlist",
    hosts=(Host("*.openai.azure.com", "https://my-resource.openai.azure.com/openai"),),
    rules={**OPENAI.rules, "unknown-message-fields": True},
    contract=_contract(
        OPENAI.contract,
        # docs/providers.md#azure-fields (microsoft/azurechat#503)
        unknown_field={"text": fields.AZURE_FIELD_TEXT},
    ),
    # Azure serves OpenAI's reasoning models on the same Responses API
    responses=OPENAI.responses,
    responses_contract=OPENAI.responses_contract,
)

CHAT_TEMPLATE = Profile(
    "chat-template",
    "Self-hosted servers rendering HF chat templates (vLLM, SGLang, TGI, llama.cpp, LM Studio)",
    replies={"response-text-tool-calls": {"formats": list(FORMATS)}},
    rules={
        # HF templates know system, user, assistant and tool: a `developer` turn breaks their
        # alternation check (docs/providers.md#chat-templates-roles, microsoft/autogen#1037)
        "developer-role": True,
        "system-messages": {"enabled": True, "later": "hoist"},
        "consecutive-user-messages": True,
        "leading-user-message": True,
        "tool-user-bridge": True,
        "trailing-assistant": {"enabled": True, "action": "continue", "prefix_allowed": False},
    },
    contract=_contract(
        PAIRING,
        # docs/providers.md#qwen-roles, Qwen3.5 templates (vllm-project/vllm#41114)
        system_not_first={},
        # docs/providers.md#chat-templates-roles, HF templates (microsoft/autogen#1037)
        roles_not_alternating={},
        # docs/providers.md#chat-templates-roles, llama.cpp's server (amd/gaia#1667): two
        # assistant messages at the end of the list
        successive_assistant={
            "text": "Cannot have 2 or more assistant messages at the end of the list."
        },
        # docs/providers.md#chat-templates-roles, llama.cpp (ggml-org/llama.cpp#20861)
        trailing_assistant={
            "text": "Assistant response prefill is incompatible with enable_thinking.",
            "prefix_allowed": False,
        },
    ),
    # docs/providers.md#chat-templates-pairing, vLLM parses a Responses request's historical
    # `arguments` as it does chat's (OpenHands/software-agent-sdk#2887)
    responses={"responses-invalid-arguments": True},
    responses_contract={"responses_invalid_arguments": {}},
)

#: Anthropic itself (api.anthropic.com): its Messages API is the strict one the others copy.
ANTHROPIC = Profile(
    "anthropic",
    "Anthropic (api.anthropic.com): the Messages API; its OpenAI-compatible chat endpoint gets "
    "the core",
    hosts=(Host("api.anthropic.com", "https://api.anthropic.com"),),
    # The chat side: the OpenAI-compatible layer translates to the native rules (inferred,
    # docs/providers.md): the core pairing checks.
    contract=PAIRING,
    messages={
        "messages-tool-use-id-charset": True,  # BlockRunAI/ClawRouter#17, maximhq/bifrost#5097
        # lobehub/lobehub#1601, langchain4j/langchain4j#1197 (no other endpoint on record)
        "messages-leading-user": True,
        "messages-thinking-order": True,  # anthropics/claude-code#20705
        "messages-tool-loop-thinking": True,  # n8n-io/n8n#22550, anthropics/claude-code#20692
        "messages-thinking-disabled": True,  # tailcallhq/forgecode#1853
        "messages-trailing-prefill": True,  # smallmain/vscode-unify-chat-provider#249
        "messages-metadata-user-id": True,  # anthropics/claude-code#56643
        # mastra-ai/mastra#7507: only an explicit `thinking` counts for Claude models
        "messages-thinking-tool-choice": {"enabled": True, "models": []},
        # anthropics/claude-code#10627, anthropics/anthropic-sdk-python#1598; another issuer's
        # signature (DeepSeek's UUID) refused alike: ding113/claude-code-hub#518 (switching
        # channels), docs/providers.md#anthropic-reasoning
        "messages-unsigned-thinking": {"enabled": True, "signatures": "anthropic"},
        "messages-context-management": True,  # ericc-ch/copilot-api#217
        # griffinmartin/opencode-claude-auth#123: two clients' breakpoints, five in all
        "messages-cache-control": {"enabled": True, "max_markers": 4},
    },
    messages_contract=_contract(
        anthropic.MESSAGES_CORE,
        # anthropics/claude-code#28515: Anthropic's wording has no backticks
        messages_duplicate_tool_use_id={"text": anthropic.ANTHROPIC_DUPLICATE_TEXT},
        messages_tool_use_id_pattern={},
        messages_roles_alternate={},
        messages_first_not_user={},
        messages_thinking_not_first={},
        messages_tool_loop_thinking={},
        messages_thinking_disabled={},
        messages_user_id_pattern={},
        messages_thinking_tool_choice={
            "text": anthropic.ANTHROPIC_TOOL_CHOICE_TEXT,
            "models": [],
        },
        messages_prefill={},
        messages_thinking_signature={"shape": "anthropic"},
        messages_context_management={},
        messages_cache_markers={},  # griffinmartin/opencode-claude-auth#123
    ),
)

#: OpenRouter (openrouter.ai): a router. It relays the downstream provider's refusal verbatim
#: (docs/providers.md#openrouter), so a request runs under the profile of the vendor its model
#: names (``deepseek/deepseek-v4-flash``, ``~deepseek/deepseek-v4-flash-latest``,
#: ``moonshotai/kimi-k2.5``): a vendor whose refusals are on record through OpenRouter. The
#: rules of that profile read the model name without the router's prefix
#: (``rules.engine.thinking``). Another vendor gets the pairing core every strict provider applies.
OPENROUTER = Profile(
    "openrouter",
    "OpenRouter (openrouter.ai): a router; the model's vendor prefix picks the downstream profile",
    hosts=(Host("openrouter.ai", "https://openrouter.ai/api/v1"),),
    contract=PAIRING,
    variants=(
        # BerriAI/litellm#27439: DeepSeek V4 via OpenRouter, thinking-mode tool turns
        ("deepseek/*", "deepseek"),
        ("~deepseek/*", "deepseek"),
        # mastra-ai/mastra#12592, docs/providers.md#kimi-reasoning: Kimi via OpenRouter
        ("moonshotai/*", "kimi"),
        ("~moonshotai/*", "kimi"),
        # MiniMax-AI/MiniMax-M2#76 (provider_name Minimax through OpenRouter)
        ("minimax/*", "minimax"),
        ("~minimax/*", "minimax"),
    ),
)

PASSTHROUGH = Profile(
    "passthrough",
    "No repair and no contract: chatmend only relays (and logs)",
    rules=dict.fromkeys((rule.name for rule in RULES), False),
    contract={},
    # No rule on any API (the Responses rules too: passthrough relays only; recovery alone acts)
    responses=dict.fromkeys((rule.name for rule in RESPONSES_RULES), False),
    messages=dict.fromkeys((rule.name for rule in MESSAGES_RULES), False),
    messages_contract={},
)

#: Every profile, by name, in the order docs/profiles.md lists them.
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
        ANTHROPIC,
        OPENROUTER,
        PASSTHROUGH,
    )
}
DEFAULT_PROFILE = DEEPSEEK.name
#: (host glob, profile) of every profile's hosts, in the order PROFILES lists them: what picks
#: the profile of an upstream the config names none for (``proxy.config.profile_for_upstream``).
HOST_PROFILES: tuple[tuple[str, str], ...] = tuple(
    (host.pattern, profile.name) for profile in PROFILES.values() for host in profile.hosts
)
