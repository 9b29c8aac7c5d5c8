"""codex-call-ids: a tool result naming its call's Codex ``call_id`` names the call's ``id``.

What: agents that also speak the Responses API keep a Codex-style ``call_id`` (and a
``response_item_id``) on their chat tool calls, next to the ``id``, and their tool messages
answer the ``call_id``. For every tool message whose ``tool_call_id`` is such an alias of a call,
and no call's ``id``, the ``tool_call_id`` becomes that call's ``id``: the call the alias names
is the one the latest assistant declaring that alias made (a reused ``call_id`` names the latest
call that carries it); among the calls of one assistant sharing an alias, a result goes to the
first one not yet answered (under either name), and one more than there are calls names the last
of them (a second answer, which ``duplicate-tool-call-ids`` drops as it drops any). A
call with an alias and no usable ``id`` gets ``id`` = its ``call_id`` (else its
``response_item_id``), so its results, which name that alias, already match. The aliases stay
on the calls (removing them is ``bookkeeping-keys``' job).
Why: every pairing rule after this one matches a result to its call by ``id``; a result that
names the ``call_id`` is taken for an orphan and dropped, and its call gets a stub "No result
was recorded" although the result is right there (docs/providers.md#hermes-e3:
hermes-agent
#58168 "valid results were dropped when keyed on `call_id`, leaving calls unanswered → DeepSeek/
Kimi 400", #55626 "[Result unavailable…] shown for tools that ran fine", #63000, #93251; hermes
pairs on every alias of a call as one group, R4). A call with only ``call_id`` kept its result
unmatched and itself unanswered, which the provider refuses ("An assistant message with
'tool_calls' must be followed by tool messages responding to each 'tool_call_id'",
docs/providers.md#pairing).
Safety: safe. A result is renamed only to the one call its id names unambiguously: an alias that
is also some call's ``id`` (anywhere in the request), or that one assistant gives to a call of
its own id already, is never rewritten, so two different calls' results are never merged. The
result's content and position are kept; a Change names the old and new id.
"""

from __future__ import annotations

from typing import Any, Final, TypeGuard

from rules.chat import scan
from rules.chat.apart import TURNS
from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.engine.messages import rewrite_at

NAME = "codex-call-ids"

#: The keys of a chat tool call that name it besides ``id``, in the order a missing ``id`` is
#: taken from (Codex's ``call_id`` is what a tool output answers).
ALIAS_KEYS: Final = ("call_id", "response_item_id")


def _usable(value: Any) -> TypeGuard[str]:
    return type(value) is str and value != ""


def _has_alias(call: Any) -> bool:
    """A call with an alias other than its ``id``, or an alias and no usable ``id``."""
    if type(call) is not dict:
        return False
    cid = call.get("id")
    for key in ALIAS_KEYS:
        alias = call.get(key)
        if _usable(alias) and alias != cid:
            return True
    return False


def _suspects(messages: list[Any]) -> list[int]:
    """Indices of the assistants with a call carrying an alias (the cheap prescan)."""
    found: list[int] = []
    for index, message in enumerate(messages):
        if type(message) is not dict or message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        if type(calls) is list:
            for call in calls:
                # A key test first: most calls carry neither alias, and this is the clean path.
                if (
                    type(call) is dict
                    and ("call_id" in call or "response_item_id" in call)
                    and _has_alias(call)
                ):
                    found.append(index)
                    break
    return found


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    suspects = _suspects(messages)
    if not suspects:
        return Outcome(messages)  # the common case: no call carries an alias
    changes: list[Change] = []
    # 1. A call with an alias and no usable id takes the alias as its id.
    fixed = rewrite_at(
        messages, suspects, lambda index, message: _fill_ids(index, message, changes)
    )
    # 2. Every id a call carries (after 1): an alias equal to one of them is ambiguous.
    ids: set[str] = set()
    for message in fixed:
        if type(message) is dict and message.get("role") == "assistant":
            calls = message.get("tool_calls")
            if type(calls) is list:
                for call in calls:
                    if type(call) is dict and _usable(call.get("id")):
                        ids.add(call["id"])
    # 3. One walk: each assistant declaring aliases sets where they point; results follow them.
    targets: dict[str, list[str]] = {}  # alias -> ids of the latest calls carrying it
    #: per id of a declaring assistant: [its calls with that id, results naming it so far]
    slots: dict[str, list[int]] = {}
    renames: dict[int, tuple[str, str]] = {}
    suspect_set = set(suspects)
    for index, message in enumerate(fixed):
        if type(message) is not dict:
            continue
        role = message.get("role")
        if role == "assistant" and index in suspect_set:
            _declare(message["tool_calls"], ids, targets, slots)
        elif role == "tool":
            old = message.get("tool_call_id")
            if not _usable(old):
                continue
            if old in ids:  # a result naming the id itself fills one of that id's calls
                if old in slots:
                    slots[old][1] += 1
                continue
            named = targets.get(old)
            if named is None:
                continue
            # The first of its calls still waiting; with none, a second answer to the last one,
            # under the id duplicate-tool-call-ids judges second answers by.
            new = next((cid for cid in named if _open(slots[cid])), named[-1])
            renames[index] = (old, new)
            slots[new][1] += 1
    if renames:

        def rename(index: int, message: Any) -> Any:
            old, new = renames[index]
            changes.append(Change(NAME, index, "renamed_result_id", {"from": old, "to": new}))
            return {**message, "tool_call_id": new}

        fixed = rewrite_at(fixed, sorted(renames), rename)
    if not changes:
        return Outcome(messages)
    return Outcome(fixed, tuple(sorted(changes, key=lambda change: change.index)))


def _open(slot: list[int]) -> bool:
    """Whether the calls with one id still wait for a result."""
    return slot[1] < slot[0]


def _declare(
    calls: list[Any], ids: set[str], targets: dict[str, list[str]], slots: dict[str, list[int]]
) -> None:
    """Point each alias of ``calls`` at the calls that carry it (replacing an earlier turn's),
    and count this turn's calls per id as not yet answered."""
    declared: dict[str, list[str]] = {}
    counted: dict[str, int] = {}
    for call in calls:
        if type(call) is not dict:
            continue
        cid = call.get("id")
        if not _usable(cid):
            continue
        counted[cid] = counted.get(cid, 0) + 1
        seen: set[str] = set()
        for key in ALIAS_KEYS:
            alias = call.get(key)
            if not _usable(alias) or alias == cid or alias in ids or alias in seen:
                continue
            seen.add(alias)
            declared.setdefault(alias, []).append(cid)
    for cid, count in counted.items():
        slots[cid] = [count, 0]
    targets.update(declared)


def _fill_ids(index: int, message: dict[str, Any], changes: list[Change]) -> dict[str, Any]:
    calls: list[Any] = message["tool_calls"]
    out: list[Any] | None = None
    for position, call in enumerate(calls):
        if type(call) is not dict or _usable(call.get("id")):
            continue
        alias = next((call[key] for key in ALIAS_KEYS if _usable(call.get(key))), None)
        if alias is None:
            continue
        if out is None:
            out = list(calls)
        out[position] = {**call, "id": alias}
        detail = {"position": position, "to": alias, "was": _describe(call.get("id"), call)}
        changes.append(Change(NAME, index, "set_call_id", detail))
    return message if out is None else {**message, "tool_calls": out}


def _describe(value: Any, call: dict[str, Any]) -> str:
    if "id" not in call:
        return "absent"
    if value is None:
        return "null"
    return "empty_string" if value == "" else type(value).__name__


RULE = Rule(
    name=NAME,
    summary="Pair tool results that answer a call's Codex call_id with the call's id.",
    defect="a tool result naming its call's Codex `call_id` (or `response_item_id`) instead of its "
    "`id`, or a call with only a `call_id`: the result is dropped as an orphan and its call "
    'stubbed (NousResearch/hermes-agent#58168, #55626), or the call left unanswered: "An '
    "assistant message with 'tool_calls' must be followed by tool messages responding to each "
    "'tool_call_id'\" (aliasrobotics/cai#111; docs/providers.md#openai-pairing)",
    repair="the result's `tool_call_id` becomes the call's `id` (the latest call carrying that "
    "alias; the k-th result of a turn answers its k-th call carrying it); a call without a usable "
    "`id` takes its `call_id`; an alias that is also some call's `id` is ambiguous and left alone. "
    "A result moves only to the one call its id names, so two calls' results are never merged",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(TURNS.apart(apply)),  # a new turn apart from the history
    scan=scan.scan,
    woken_by=scan.on(scan.CALL_KEYS),
)
