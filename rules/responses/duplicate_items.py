"""responses-duplicate-items: no item ``id`` twice in ``input``.

What: an item whose ``id`` an earlier item already carries is dropped; the first is kept.
Why: OpenAI Responses (also OpenRouter and Copilot) answer "Duplicate item found with id
rs_0468... Remove duplicate items from your input and try again."
(docs/providers.md#openai-responses, continuedev/continue#10723, #10200 after a provider switch,
OpenRouterTeam/ai-sdk-provider#254). Safety: unsafe in principle: two items with one id are one item
sent twice, but when their contents differ the second is lost (logged with its id and type; a
function call's output, if then unanswered or doubled, is handled by the pairing rules after this
one).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext
from rules.engine.messages import rewrite_at
from rules.responses.items import item_id, item_type

NAME = "responses-duplicate-items"


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    first: dict[str, int] = {}
    repeats: list[int] = []
    for index, item in enumerate(items):
        key = item_id(item)
        if key is None:
            continue
        if key in first:
            repeats.append(index)
        else:
            first[key] = index
    if not repeats:
        return Outcome(items)
    changes = tuple(
        Change(
            NAME,
            index,
            "dropped_item",
            {
                "id": items[index]["id"],
                "type": item_type(items[index]),
                "first": first[items[index]["id"]],
            },
        )
        for index in repeats
    )
    return Outcome(rewrite_at(items, repeats, lambda _i, _item: None), changes)


RULE = Rule(
    name=NAME,
    summary="Drop an input item whose `id` an earlier item carries (the first is kept).",
    defect='an item id twice in `input`: "Duplicate item found with id rs_0468... Remove '
    'duplicate items from your input and try again." (continuedev/continue#10723, '
    "OpenRouterTeam/ai-sdk-provider#254; docs/providers.md#openai-responses)",
    repair="drop every later item with that `id` (the first is kept), logging its id and type. "
    "Unsafe: a second item with the same id but other content is lost (logged)",
    safety="unsafe",
    default=True,
    apply=apply,
)
