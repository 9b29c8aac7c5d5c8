"""system-messages: one system message, and only at the start.

What: the leading run of system messages merges into one. Its non-empty contents are combined in
order: a part list of text parts only is first folded into a string (its texts joined with
"\\n", as vLLM renders such a list), then strings join with "\\n\\n"; once a part with another
type (an image) is involved the result is a part list (strings become text parts, lists are
concatenated) so nothing is lost. A later (mid-conversation) system message, by option
``later``:
- ``hoist`` (default): it is removed from its place and its content appended, in order, to the
  leading system message (created at index 0 if there is none). Two assistants it stood between
  are merged, as consecutive-assistant-messages would (that rule already ran).
- ``user``: it becomes a user message at its place, its text prefixed with option ``prefix``
  (default "[system] "; a part list gets the prefix on its first text part). A user it lands
  next to is merged by consecutive-user-messages, which runs next.
Every other key keeps the first system message's value; keys only a later one has are added.
Only the ``system`` role is handled: ``developer`` is another rule's (role mapping).
Why: Qwen3.5+ chat templates raise "System message must be at the beginning." (vLLM 400,
llama.cpp 500; docs/providers.md#chat-templates-roles, vllm-project/vllm#41114,
ggml-org/llama.cpp#27367), and MiniMax answers "invalid params, chat content has invalid message
role: system (2013)" (docs/providers.md#minimax-roles, BigPizzaV3/CodexPlusPlus#267; the fix in
netease-youdao/LobsterAI#123 merges them). can1357/oh-my-pi#958 lists the strict-template hosts that
need this (Qwen via vLLM, MiniMax, DashScope, Qwen Portal).
Safety: by action: the leading merge is ``safe`` (lossless), and no text is ever dropped; but with
``hoist`` a mid-conversation instruction moves to the start and reads as part of the opening one
(``unsafe``; the change log records each move), and with ``user`` it keeps its place but reads as
the user's words (``unsafe``, marked by the prefix).
"""

from __future__ import annotations

from typing import Any

from rules.chat.merge import join_contents, merge_messages
from rules.chat.message_fields import has_content
from rules.chat.tool_turns import is_assistant, rejoin
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried

NAME = "system-messages"

#: Between the contents of two system messages (as hermes R14 joins its system prompts).
SEPARATOR = "\n\n"
#: Between the text parts of one text-only part list (vLLM's rendering of such a list, inferred).
PART_SEPARATOR = "\n"

LATER_CHOICES = ("hoist", "user")
DEFAULT_PREFIX = "[system] "


#: The rule's options (the record below lists them; read them through these).
LATER = Option(
    "later",
    "hoist",
    "a system message after the first non-system one: `hoist` appends its text to the "
    "leading system message, `user` turns it into a user message where it stands",
    LATER_CHOICES,
)
PREFIX = Option(
    "prefix",
    DEFAULT_PREFIX,
    "with `later: user`, text put before the converted message's text",
)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    lead = 0
    while lead < len(messages) and _is_system(messages[lead]):
        lead += 1
    later = [index for index in range(lead, len(messages)) if _is_system(messages[index])]
    if lead <= 1 and not later:
        return Outcome(messages)  # the common case: one leading system message or none
    changes: list[Change] = []
    if lead > 1:
        detail = {"merged_indices": list(range(lead)), "count": lead}
        changes.append(Change(NAME, 0, "merged", detail))
    if LATER.of(ctx) == "user":
        return _to_user(messages, lead, later, str(PREFIX.of(ctx)), changes)
    return _hoist(messages, lead, later, changes)


def resume(
    messages: list[Any], ctx: RuleContext, before: bool | None
) -> tuple[Outcome, bool] | None:
    """The rule over ``messages`` after a list (``None``: its start), and whether the list so
    far is settled: its leading system run ended, and it ends on no system message (a removed
    one there would put its neighbours side by side). A new turn after a settled list changes
    nothing before it but where a system message in it is hoisted to the start: it declines
    then (``later: user`` converts it where it stands, as the whole run does)."""
    if before is None:
        return apply(messages, ctx), _settled(messages)
    if not messages:
        return Outcome(messages), before
    if not before:
        return None
    later = [index for index, message in enumerate(messages) if _is_system(message)]
    if not later:
        return Outcome(messages), True
    if LATER.of(ctx) != "user":
        return None
    return _to_user(messages, 0, later, str(PREFIX.of(ctx)), []), _settled(messages)


def _settled(messages: list[Any]) -> bool:
    return bool(messages) and not _is_system(messages[-1]) and not all(map(_is_system, messages))


def _is_system(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "system"


def _hoist(messages: list[Any], lead: int, later: list[int], changes: list[Change]) -> Outcome:
    sources = [*range(lead), *later]
    removed = set(sources)
    out: list[Any] = [_merge([messages[index] for index in sources])]
    seams: list[int] = []  # positions where a removal put two assistants next to each other
    gap = False
    for index, message in enumerate(messages):
        if index in removed:
            gap = True
            continue
        if gap and is_assistant(message) and is_assistant(out[-1]):
            seams.append(len(out))
        gap = False
        out.append(message)
    changes.extend(Change(NAME, index, "hoisted", {"to": 0}) for index in later)
    if seams:
        out = rejoin(out, seams, NAME, changes)
    return Outcome(out, tuple(changes))


def _to_user(
    messages: list[Any], lead: int, later: list[int], prefix: str, changes: list[Change]
) -> Outcome:
    out = list(messages)
    if lead > 1:
        out[:lead] = [_merge(messages[:lead])]
    shift = lead - 1 if lead > 1 else 0
    for index in later:
        message = messages[index]
        out[index - shift] = {
            **message,
            "role": "user",
            **({"content": _prefixed(message.get("content"), prefix)} if prefix else {}),
        }
        changes.append(Change(NAME, index, "renamed_role", {"from": "system", "to": "user"}))
    return Outcome(out, tuple(changes))


def _merge(run: list[dict[str, Any]]) -> dict[str, Any]:
    """One system message from ``run`` (one message is returned as it is)."""
    if len(run) == 1:
        return run[0]
    folded = [
        {**message, "content": _folded(message["content"])} if has_content(message) else message
        for message in run
    ]
    return merge_messages(folded, SEPARATOR)


def _folded(content: Any) -> Any:
    """A part list of text parts only as one string; any other content as it is."""
    if not isinstance(content, list):
        return content
    texts: list[str] = []
    for part in content:
        if not (isinstance(part, dict) and part.get("type") == "text"):
            return content
        text = part.get("text")
        if not isinstance(text, str):
            return content
        if text:
            texts.append(text)
    return PART_SEPARATOR.join(texts)


def _prefixed(content: Any, prefix: str) -> Any:
    """``content`` with ``prefix`` before its text (a first text part, or a new leading one)."""
    if content is None or content == "":
        return prefix
    if isinstance(content, str):
        return prefix + content
    if isinstance(content, list):
        first = content[0] if content else None
        if isinstance(first, dict) and first.get("type") == "text":
            text = first.get("text")
            if isinstance(text, str):
                return [{**first, "text": prefix + text}, *content[1:]]
        return [{"type": "text", "text": prefix}, *content]
    return join_contents([prefix, content], SEPARATOR)  # junk: a part list, prefix first


RULE = Rule(
    name=NAME,
    summary="Merge system messages into one leading system message.",
    defect='system messages after index 0, or more than one: Qwen3.5+ templates "System message '
    'must be at the beginning." (vLLM 400, llama.cpp 500; vllm-project/vllm#41114), MiniMax '
    '"invalid params, chat content has invalid message role: system (2013)" '
    "(BigPizzaV3/CodexPlusPlus#267; docs/providers.md#minimax-roles)",
    repair="merge the leading run into one (texts joined with a blank line; image parts keep a "
    "part list); a later one is appended to it (option `later: hoist`) or becomes a user message "
    "with its text after option `prefix` (`later: user`); two assistants a hoisted message stood "
    "between are merged. Unsafe: no text is lost, but a later instruction moves to the start "
    "(`hoist`) or reads as the user's (`user`)",
    safety={
        "hoisted": "unsafe",
        "merged": "safe",
        "merged_assistants": "safe",
        "renamed_role": "unsafe",
    },
    default=False,
    apply=apply,
    horizon=carried(resume),  # a later system message reaches the start
    options=(
        LATER,
        PREFIX,
    ),
)
