"""consecutive-user-messages: directly adjacent user messages merge into one.

What: a run of user messages with no other message between them becomes one user message at the
position of the first. Non-empty contents are combined as folding them pairwise in order would:
two strings join with "\\n\\n" (unstripped); a part list and anything else give a part list
(a string becomes a text part: leading if it came first, appended if it came later; lists are
concatenated). Empty contents (null, "", [], only empty text parts) give way to the others; with
no content anywhere the first's value (or absence) stays. A content that is neither a string, a
list nor null (junk the provider rejects anyway) is carried as one element of the part list, so
nothing is lost and no two users stay adjacent. Every other key keeps the first message's value
(``name`` included); keys only a later message has are added. A tool, assistant, system or
unrecognised entry ends the run: nothing is merged across another message.
Why: deepseek-reasoner answers 400 "deepseek-reasoner does not support successive user or
assistant messages (messages[1] and messages[2] in your input). You should interleave the
user/assistant messages in the message sequence." (docs/providers.md#deepseek-roles, deepseek-ai/
DeepSeek-R1#21, BerriAI/litellm#8018), and HF chat templates on vLLM/TGI/llama.cpp raise
"Conversation roles must alternate user/assistant/user/assistant/..."
(docs/providers.md#chat-templates-roles, microsoft/autogen#1037,
huggingface/text-generation-inference#3198). The join follows hermes R6/R23 (str + str with
"\\n\\n", lists concatenated, a string as a text part). Safety: safe. No text is dropped and the
order is kept; what goes is an empty content, or a later message's value for a key the first already
sets (a later ``name`` gives way to the first's).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext
from rules.engine.messages import has_content

NAME = "consecutive-user-messages"

#: What joins two string contents (hermes R6, docs/providers.md#roles "joining content with \n\n").
SEPARATOR = "\n\n"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    runs = _user_runs(messages)
    if not runs:
        return Outcome(messages)  # the common case, checked in one tight pass
    out: list[Any] = []
    changes: list[Change] = []
    done = 0  # messages[:done] are in ``out``
    for start, end in runs:
        out.extend(messages[done:start])
        out.append(merge_messages(messages[start:end], SEPARATOR))
        detail = {"merged_indices": list(range(start, end)), "count": end - start}
        changes.append(Change(NAME, start, "merged", detail))
        done = end
    out.extend(messages[done:])
    return Outcome(out, tuple(changes))


def _user_runs(messages: list[Any]) -> list[tuple[int, int]]:
    """``(start, end)`` of every run of two or more directly adjacent user messages."""
    runs: list[tuple[int, int]] = []
    start = -1  # start of the current user run, -1 outside one
    for index, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            if start < 0:
                start = index
        else:
            if start >= 0 and index - start > 1:
                runs.append((start, index))
            start = -1
    if start >= 0 and len(messages) - start > 1:
        runs.append((start, len(messages)))
    return runs


def merge_messages(run: list[dict[str, Any]], separator: str) -> dict[str, Any]:
    """The messages of ``run`` (dicts, two or more) as one new message: the first's keys, the
    non-empty contents joined by ``join_contents``, keys only a later message has added."""
    first = run[0]
    merged = dict(first)  # new top level only; nested values are shared and never written
    contents = [message["content"] for message in run if has_content(message)]
    if contents:
        merged["content"] = join_contents(contents, separator)
    for later in run[1:]:
        for key, value in later.items():
            if key != "content" and key not in merged:
                merged[key] = value
    return merged


def join_contents(contents: list[Any], separator: str) -> Any:
    """One content from non-empty ``contents``, as folding them pairwise in order would give.

    Strings join with ``separator``; from the first content that is not a string on, the result
    is a part list: the text so far becomes a leading text part, a list's parts are appended, a
    later string becomes its own text part and any other value is appended as one element.
    """
    if len(contents) == 1:
        return contents[0]
    texts: list[str] = []
    rest = iter(contents)
    for content in rest:
        if isinstance(content, str):
            texts.append(content)
            continue
        parts: list[Any] = [_text_part(separator.join(texts))] if texts else []
        _extend(parts, content)
        for later in rest:
            if isinstance(later, str):
                parts.append(_text_part(later))
            else:
                _extend(parts, later)
        return parts
    return separator.join(texts)


def _extend(parts: list[Any], content: Any) -> None:
    if isinstance(content, list):
        parts.extend(content)
    else:
        parts.append(content)  # junk content: kept as it came, as one element


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


RULE = Rule(
    name=NAME,
    summary="Merge directly adjacent user messages into the first one.",
    defect='two or more user messages in a row: deepseek-reasoner "does not support successive '
    'user or assistant messages" (deepseek-ai/DeepSeek-R1#21), chat templates "Conversation '
    'roles must alternate user/assistant/user/assistant/..." (microsoft/autogen#1037; '
    "docs/providers.md#deepseek-roles)",
    repair="merge them into the first: strings joined with a blank line, part lists concatenated "
    "(a string becomes a text part), the first's other fields kept; never across another message. "
    "No text is dropped and the order is kept",
    safety="safe",
    default=False,
    apply=apply,
)
