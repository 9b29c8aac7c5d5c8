"""text-part-arrays: a content made only of text parts becomes a plain string.

What: for a message whose role is in option ``roles``, a ``content`` list whose every part is a
text part (``{"type": "text", "text": <string>}``) becomes the parts' texts joined by option
``separator`` (default ``""``); a content that is one bare text part (an object, not a list)
becomes its text. Other keys of those parts (``cache_control``) are dropped and named in the
Change. An empty list becomes ``null`` on an assistant with tool calls and ``""`` elsewhere. A
list holding any other part (an image, a ``thinking`` part, junk) is left as it is. Option
``lists: false`` collapses only the bare part object (for providers that accept part lists but
not an object); option ``min_parts`` leaves text-only lists shorter than it (xAI refuses more than
one text element, not one).
Why: providers that want a string refuse the array: DeepSeek "Failed to deserialize the JSON
body into the target type: messages[19]: invalid type: sequence, expected a string" (all roles,
and ``content: []`` next to tool calls; docs/providers.md#deepseek-content, moeru-ai/airi#1222,
BerriAI/litellm#9905, EvoScientist/EvoScientist#77; docs/providers.md#question-18: collapse for all
roles); Groq "'messages.0' : for 'role:system' the following must be satisfied[('messages.0.content'
: value must be a string)]" (docs/providers.md#groq-content, OpenHands/OpenHands#4643) and
"message[4].content must be a string" (browser-use/browser-use#54); xAI "The model expects a single
`text` element per message." (docs/providers.md#xai-content, nocmt/LLMSearchPlus#2); GLM
"message[3].content[2] has invalid field(s): text" (docs/providers.md#glm-content,
BigPizzaV3/CodexPlusPlus#329); Ollama "json: cannot unmarshal array into Go struct field
Message.messages.content of type string" (docs/providers.md#ollama-content, ollama/ollama#3824). A
bare part object is refused by Moonshot and DashScope ("expected one of a string or array of
objects, but got an object instead", docs/providers.md#qwen-content, felinics/Memoh#744,
LnYo-Cly/ai4j#62), whose repair is "convert it to a string". The empty list: DeepSeek and Bedrock
Mantle want ``null`` (or ``""``) instead of ``[]`` on a tool-call assistant
(docs/providers.md#bedrock-content, litellm#9905, strands-agents/harness-sdk#1562); ``null`` is the
value OpenAI defines there, and tool-call-content reshapes it per provider afterwards. The
separator: an upstream that accepts the array reads the parts back to back (LiteLLM's
``convert_content_list_to_str``, written for Mistral and Azure AI that "don't support content as a
list", concatenates them; HF chat templates render ``item.text`` one after the other), so ``""``
gives the model the same text it would have seen. vLLM's string format joins with ``"\\n"``; an
operator who prefers that sets ``separator: "\\n"``. Safety: safe. The text is kept whole and in
order; only part metadata (``cache_control``) that a string-only provider cannot take is dropped,
and named.
"""

from __future__ import annotations

from typing import Any

from rules.chat import scan
from rules.chat.message_fields import ROLES, has_calls, role_set
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at

NAME = "text-part-arrays"

#: The keys of a text part that its text carries; any other (``cache_control``) is dropped.
_KEPT = ("type", "text")


#: The rule's options (the record below lists them; read them through these).
SEPARATOR = Option("separator", "", 'what joins the texts of the parts ("": back to back)')
ROLES_OPTION = Option("roles", list(ROLES), "the roles whose content is collapsed")
LISTS = Option(
    "lists",
    True,
    "collapse part lists (false: only a bare part object, for Kimi and DashScope, "
    "which accept lists)",
)
MIN_PARTS = Option(
    "min_parts",
    1,
    "leave text-only lists with fewer parts than this (xAI: 2, it refuses more than one "
    "text element); `[]` is always replaced",
)


def text_of(part: Any) -> str | None:
    """The text of a text part (``{"type": "text", "text": <string>}``), else ``None``."""
    if type(part) is dict and part.get("type") == "text":
        text = part.get("text")
        if type(text) is str:
            return text
    return None


def collapsible(content: Any, *, lists: bool = True, min_parts: int = 1) -> bool:
    """True if ``content`` is what this rule turns into a string (or ``null``): a list of text
    parts only (``[]``, or at least ``min_parts`` of them; none if not ``lists``), or one bare
    text part."""
    if type(content) is list:
        if not lists or 0 < len(content) < min_parts:
            return False
        for part in content:  # noqa: SIM110 - a plain loop: no generator per message
            if text_of(part) is None:
                return False
        return True
    return type(content) is dict and text_of(content) is not None


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    roles = role_set(ROLES_OPTION.of(ctx))
    lists = LISTS.of(ctx) is not False
    min_parts = MIN_PARTS.of(ctx)
    min_parts = min_parts if type(min_parts) is int else 1
    suspects = [
        index
        for index, message in enumerate(messages)
        if type(message) is dict
        and type(message.get("content")) in (list, dict)
        and type(message.get("role")) is str
        and message["role"] in roles
        and collapsible(message["content"], lists=lists, min_parts=min_parts)
    ]
    if not suspects:
        return Outcome(messages)
    separator = SEPARATOR.of(ctx)
    separator = separator if type(separator) is str else ""
    changes: list[Change] = []

    def fix(index: int, message: Any) -> Any:
        role = message["role"]
        content = message["content"]
        if content == []:
            to: str | None = None if role == "assistant" and has_calls(message) else ""
            emptied = {"role": role, "to": "null" if to is None else "empty_string"}
            changes.append(Change(NAME, index, "replaced_empty_parts", emptied))
            return {**message, "content": to}
        parts = content if type(content) is list else [content]
        detail: dict[str, Any] = {"role": role, "parts": len(parts)}
        if type(content) is dict:
            detail["was"] = "object"
        dropped = sorted(
            {key for part in parts for key in part if type(key) is str and key not in _KEPT}
        )
        if dropped:
            detail["dropped_keys"] = dropped
        changes.append(Change(NAME, index, "collapsed_parts", detail))
        return {**message, "content": separator.join(part["text"] for part in parts)}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Collapse content made only of text parts into a string.",
    defect='content as a list of text parts where a string is required: DeepSeek "Failed to '
    "deserialize the JSON body into the target type: messages[N]: invalid type: sequence, expected "
    'a string" (moeru-ai/airi#1222), Groq (system) "value must be a string" '
    '(OpenHands/OpenHands#4643), xAI "a single `text` element per message" '
    '(nocmt/LLMSearchPlus#2), GLM "has invalid field(s): text" (BigPizzaV3/CodexPlusPlus#329), '
    'Ollama "cannot unmarshal array" (ollama/ollama#3824); a bare text-part object: Moonshot, '
    'DashScope "but got an object instead" (felinics/Memoh#744; docs/providers.md#content)',
    repair="the texts joined back to back (option `separator`: as LiteLLM and HF templates read "
    "the parts); other part keys (`cache_control`) dropped and named in the log; `[]` becomes "
    '`null` on an assistant with tool calls and `""` elsewhere; a list holding an image or any '
    "other part is left; options `roles` (which messages), `lists` (false: only a bare part "
    "object) and `min_parts` (shorter text-only lists are left). The text is kept whole and in "
    "order",
    safety="safe",
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.scan,
    woken_by=scan.on(scan.LIST_CONTENT, scan.DICT_CONTENT),
    options=(
        SEPARATOR,
        ROLES_OPTION,
        LISTS,
        MIN_PARTS,
    ),
)
