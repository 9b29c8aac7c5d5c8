"""messages-missing-thinking: in thinking mode, every tool-use turn carries a thinking block.

What: request level and messages. In thinking mode (``thinking.type`` ``enabled`` or
``adaptive``, or no ``thinking`` and a model matching option ``models``, which think by
default), an assistant message with ``tool_use`` blocks and no ``thinking`` or
``redacted_thinking`` block gets a thinking block with the option ``placeholder`` text (default
empty) and an empty signature, at its front. A turn whose thinking the client kept is never
touched.
Why: DeepSeek's Anthropic endpoint answers 400 "The `content[].thinking` in the thinking mode
must be passed back to the API." (NousResearch/hermes-agent#22313, #16748; decolua/9router#2397,
omnimind-ai/OmniBot#307: the turn after a ``tool_use``), and clients that do not keep thinking
(compaction, agents that store text only) poison the session for good. An empty thinking block
is what passes: QwenLM/qwen-code#3788 (only ``tool_use`` turns need a, possibly empty, thinking
block) and leookun/cursor-byok#276 (empty thinking block as the fallback, 1100+ requests
without the 400).
Safety: safe: the model's earlier reasoning was already lost by the client; the placeholder
says nothing. Only for providers that accept unsigned thinking (never Anthropic itself, whose
signature check refuses it).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from rules.anthropic import scan
from rules.anthropic.blocks import THINKING_TYPES, block_type, content_list, role, tool_use_ids
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext
from rules.engine.messages import rewrite_at
from rules.engine.thinking import THINKING_MODELS

NAME = "messages-missing-thinking"

#: The rule's options (the record below lists them; read them through these).
PLACEHOLDER = Option("placeholder", "", "The text of the inserted thinking block.")
MODELS = Option(
    "models",
    list(THINKING_MODELS),
    "Models that think when the request has no `thinking` (globs).",
)


def in_thinking_mode(request: Any, models: Any) -> bool:
    thinking = request.get("thinking")
    if type(thinking) is dict and type(thinking.get("type")) is str:
        return thinking["type"] in ("enabled", "adaptive")
    model = request.get("model")
    if type(model) is not str or not isinstance(models, list | tuple):
        return False
    lowered = model.lower()
    return any(type(p) is str and fnmatchcase(lowered, p.lower()) for p in models)


def _bare(message: Any) -> bool:
    if role(message) != "assistant" or not tool_use_ids(message):
        return False
    return not any(block_type(b) in THINKING_TYPES for b in content_list(message) or ())


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if not in_thinking_mode(ctx.request, MODELS.of(ctx)):
        return Outcome(messages)
    if scan.BARE_TOOL_USE not in scan.signals(messages):
        return Outcome(messages)
    suspects = [index for index, message in enumerate(messages) if _bare(message)]
    text = PLACEHOLDER.of(ctx)
    placeholder = {
        "type": "thinking",
        "thinking": text if type(text) is str else "",
        "signature": "",
    }
    changes: list[Change] = []

    def fix(index: int, message: dict[str, Any]) -> Any:
        changes.append(Change(NAME, index, "added_thinking", {"ids": tool_use_ids(message)}))
        return {**message, "content": [dict(placeholder), *message["content"]]}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


RULE = Rule(
    name=NAME,
    summary="In thinking mode, give a tool-use turn without thinking an empty thinking block.",
    defect="thinking mode and an assistant `tool_use` turn without a thinking block: DeepSeek "
    '"The `content[].thinking` in the thinking mode must be passed back to the API."',
    repair='insert `{type: thinking, thinking: <placeholder>, signature: ""}` at its front '
    "(option `placeholder`, empty)",
    safety="safe",
    default=False,
    apply=apply,
    options=(PLACEHOLDER, MODELS),
    reads_request=True,
)
