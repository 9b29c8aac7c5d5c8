"""Nothing lost, in every format: properties of every profile's plan for all three APIs (chat
completions, Responses, Anthropic Messages) over generated agent histories.

The histories are built from one abstract conversation (turns of a user text, an assistant text
and tool calls, each call with a unique result text) and rendered into each API, broken the ways
agents break them: call ids reused within a turn and across turns (``call_1`` twice in one
parallel batch, Kimi's ``functions.ls:0`` every turn), results shuffled inside their batch,
results sent a turn late (after the next user message), results sent before their call
(Responses and Messages), missing results, orphan results whose id names no call, invalid
``arguments`` JSON (Python quotes), and a replayed history (a prefix sent twice).

The oracle is written here, from the protocols, never imported from the rules or the contracts
(a wrong predicate shared by a rule and its check passes both). What a result answered in the
CLIENT's body is read as each API reads it:

- Responses: the k-th output naming call_id X answers the k-th call naming X, wherever each
  stands.
- chat and Messages: a result in the block right after an assistant turn (chat: the tool
  messages after it; Messages: the next user message) answers that turn's calls, the k-th naming
  X the turn's k-th call naming X; the results left over answer the calls left over, the k-th
  naming X the k-th naming X.

Then, after the profile's plan: every result text the client sent survives unless its id names
no call; each surviving result answers (as the output reads: ids are unique there) a call with
the same name and arguments as the call it answered in the client's body (arguments compared as
the object the client meant: Python-quoted text is read as Python); every user text survives.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from rules.engine.pipeline import run_rules
from rules.providers.planner import (
    Plan,
    compile_messages_plan,
    compile_plan,
    compile_responses_plan,
)
from rules.providers.profiles import PROFILES
from tests.budget import examples

pytestmark = pytest.mark.slow

NAMES = [name for name in PROFILES if name != "passthrough"]
SETTINGS = settings(
    max_examples=examples(0.4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
IDS = ("call_1", "call_2", "functions.ls:0")
TOOLS = ("ls", "read", "grep")

# ---------------------------------------------------------------------------------------------
# The abstract conversation, and its rendering
# ---------------------------------------------------------------------------------------------


@dataclass
class Call:
    id: str
    name: str
    args: str  # the arguments text as the client sends it
    result: str  # the unique result text
    fate: str  # normal, late, early, missing


@dataclass
class Turn:
    user: str
    said: str | None
    calls: list[Call]
    #: The results placed in this turn's result slot, in order: (id, text).
    placed: list[tuple[str, str]] = field(default_factory=list)


@st.composite
def conversations(draw: st.DrawFn, fates: tuple[str, ...]) -> list[Turn]:
    turns: list[Turn] = []
    count = 0
    for number in range(draw(st.integers(1, 4))):
        calls: list[Call] = []
        for _ in range(draw(st.integers(0, 3))):
            count += 1
            path = f"f{count}.txt"
            args = (
                f"{{'path': '{path}'}}"  # Python quotes: invalid JSON
                if draw(st.integers(0, 4)) == 0
                else json.dumps({"path": path})
            )
            calls.append(
                Call(
                    draw(st.sampled_from(IDS)),
                    draw(st.sampled_from(TOOLS)),
                    args,
                    f"result {count}",
                    draw(st.sampled_from(fates)),
                )
            )
        said = draw(st.sampled_from((None, f"working {number}"))) if calls else f"done {number}"
        turns.append(Turn(f"user says {number}", said, calls))
    # A turn after the last, where the last turn's late results land ("never mind", "ok").
    turns.append(Turn("never mind", "ok", []))
    for index, turn in enumerate(turns):
        for call in turn.calls:
            if call.fate == "missing":
                continue
            target = index
            if call.fate == "late":
                target = index + 1
            elif call.fate == "early" and index > 0:
                target = index - 1
            turns[target].placed.append((call.id, call.result))
    orphans = draw(st.integers(0, 2))
    for n in range(orphans):
        at = draw(st.integers(0, len(turns) - 1))
        turns[at].placed.append((f"orphan_{n}", f"orphan result {n}"))
    for turn in turns:
        turn.placed = draw(st.permutations(turn.placed))
    return turns


def chat(turns: list[Turn]) -> list[Any]:
    out: list[Any] = []
    for turn in turns:
        out.append({"role": "user", "content": turn.user})
        message: dict[str, Any] = {"role": "assistant", "content": turn.said}
        if turn.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.args}}
                for c in turn.calls
            ]
        if turn.said is not None or turn.calls:
            out.append(message)
        out.extend({"role": "tool", "tool_call_id": i, "content": t} for i, t in turn.placed)
    return out


def responses(turns: list[Turn]) -> list[Any]:
    out: list[Any] = []
    for turn in turns:
        out.append({"role": "user", "content": turn.user})
        if turn.said is not None:
            text = [{"type": "output_text", "text": turn.said}]
            out.append({"type": "message", "role": "assistant", "content": text})
        out.extend(
            {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.args}
            for c in turn.calls
        )
        out.extend(
            {"type": "function_call_output", "call_id": i, "output": t} for i, t in turn.placed
        )
    return out


def messages(turns: list[Turn]) -> list[Any]:
    """Per turn: the user message (this turn's text after the previous turn's results: Messages
    alternates), then the assistant; a last user message holds the last turn's results."""
    out: list[Any] = []
    carried: list[Any] = []
    for turn in turns:
        out.append({"role": "user", "content": [*carried, {"type": "text", "text": turn.user}]})
        blocks: list[Any] = [] if turn.said is None else [{"type": "text", "text": turn.said}]
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": python_object(c.args)}
            for c in turn.calls
        ]
        out.append({"role": "assistant", "content": blocks})
        carried = [{"type": "tool_result", "tool_use_id": i, "content": t} for i, t in turn.placed]
    out.append({"role": "user", "content": [*carried, {"type": "text", "text": "continue"}]})
    return out


def replayed(items: list[Any], cut: int) -> list[Any]:
    """A history stored twice: its first ``cut`` items again right after themselves."""
    return [*items[:cut], *items[:cut], *items[cut:]]


def marked(turns: list[Turn]) -> bool:
    """The turns carry an id a provider issued once (not a per-turn counter such as Kimi's
    ``functions.ls:0``, which recurs legitimately): a replay of them is recognisable as one."""
    return any(":" not in call.id for turn in turns for call in turn.calls)


# ---------------------------------------------------------------------------------------------
# The oracle's reading of a body
# ---------------------------------------------------------------------------------------------


def python_object(text: str) -> Any:
    """The arguments the client meant: JSON, or Python-quoted text read as Python."""
    try:
        return json.loads(text)
    except ValueError:
        return ast.literal_eval(text)


def meaning(name: Any, arguments: Any) -> tuple[Any, str]:
    value = python_object(arguments) if isinstance(arguments, str) else arguments
    return name, json.dumps(value, sort_keys=True)


Event = tuple[bool, str, Any]  # (is a call, id, the call's meaning or the result's text)


def law(events: list[Event]) -> dict[int, int]:
    """The k-th result naming X answers the k-th call naming X: result index -> call index."""
    calls: dict[str, list[int]] = {}
    for index, (is_call, key, _) in enumerate(events):
        if is_call:
            calls.setdefault(key, []).append(index)
    seen: Counter[str] = Counter()
    found: dict[int, int] = {}
    for index, (is_call, key, _) in enumerate(events):
        if is_call:
            continue
        nth = seen[key]
        seen[key] += 1
        if nth < len(calls.get(key, ())):
            found[index] = calls[key][nth]
    return found


def block_reading(blocks: list[tuple[list[Event], list[Event]]]) -> dict[str, set[Any]]:
    """chat and Messages: each block's results answer its own calls first (k-th to k-th), the
    leftovers answer the leftover calls by the law. Result text -> the meanings it answered."""
    answered: dict[str, set[Any]] = {}
    leftovers: list[Event] = []
    for calls, results in blocks:
        waiting: dict[str, list[Event]] = {}
        for call in calls:
            waiting.setdefault(call[1], []).append(call)
        for result in results:
            queue = waiting.get(result[1])
            if queue:
                answered.setdefault(result[2], set()).add(queue.pop(0)[2])
            else:
                leftovers.append(result)
        leftovers.extend(call for queue in waiting.values() for call in queue)
    for spare, owner in law(leftovers).items():
        answered.setdefault(leftovers[spare][2], set()).add(leftovers[owner][2])
    return answered


def read_chat(body: list[Any]) -> dict[str, set[Any]]:
    blocks: list[tuple[list[Event], list[Event]]] = [([], [])]
    for message in body:
        if message.get("role") == "assistant":
            calls = [
                (True, c["id"], meaning(c["function"]["name"], c["function"]["arguments"]))
                for c in message.get("tool_calls") or ()
            ]
            blocks.append((calls, []))
        elif message.get("role") == "tool":
            blocks[-1][1].append((False, message["tool_call_id"], message["content"]))
        elif message.get("role") == "user":
            blocks.append(([], []))
    return block_reading(blocks)


def read_messages(body: list[Any]) -> dict[str, set[Any]]:
    blocks: list[tuple[list[Event], list[Event]]] = []
    previous: list[Event] | None = None  # the calls of the assistant right before
    for message in body:
        content = message.get("content")
        content = content if isinstance(content, list) else []
        if message["role"] == "assistant":
            if previous is not None:
                blocks.append((previous, []))
            previous = [
                (True, b["id"], meaning(b["name"], b["input"]))
                for b in content
                if b.get("type") == "tool_use"
            ]
            continue
        results = [
            (False, b["tool_use_id"], b["content"])
            for b in content
            if b.get("type") == "tool_result"
        ]
        blocks.append((previous or [], results))
        previous = None
    if previous is not None:
        blocks.append((previous, []))
    return block_reading(blocks)


def read_responses(body: list[Any]) -> dict[str, set[Any]]:
    events: list[Event] = []
    for item in body:
        if item.get("type") == "function_call":
            events.append((True, item["call_id"], meaning(item["name"], item["arguments"])))
        elif item.get("type") == "function_call_output":
            events.append((False, item["call_id"], item["output"]))
    answered: dict[str, set[Any]] = {}
    for result, call in law(events).items():
        answered.setdefault(events[result][2], set()).add(events[call][2])
    return answered


def results_sent(body: list[Any], api: str) -> set[str]:
    if api == "chat":
        return {m["content"] for m in body if m.get("role") == "tool"}
    if api == "responses":
        return {i["output"] for i in body if i.get("type") == "function_call_output"}
    return {
        b["content"]
        for m in body
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }


def user_texts(body: list[Any], api: str) -> set[str]:
    found: set[str] = set()
    for message in body:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            found.add(content)
        elif isinstance(content, list):
            found.update(
                part["text"]
                for part in content
                if isinstance(part, dict) and part.get("type") in ("text", "input_text")
            )
    return found


READ = {"chat": read_chat, "responses": read_responses, "messages": read_messages}
RENDER = {"chat": chat, "responses": responses, "messages": messages}


def plan_of(api: str, name: str) -> Plan:
    profile = PROFILES[name]
    if api == "chat":
        return compile_plan(profile)
    if api == "responses":
        return compile_responses_plan(profile=profile)
    return compile_messages_plan(profile)


def judge(
    api: str, name: str, sent: list[Any], request: dict[str, Any], meant: list[Any] | None = None
) -> None:
    """``sent`` through ``name``'s plan for ``api``, judged against what the client meant
    (``meant``: the body with an exact replayed duplicate removed; ``sent`` itself if none)."""
    meant = sent if meant is None else meant
    plan = plan_of(api, name)
    result = run_rules(sent, plan.steps, request={**request, "model": "some-model"})
    out = result.messages
    note(f"sent: {json.dumps(sent)}")
    note(f"out:  {json.dumps(out)}")
    note(f"changes: {[c.as_dict() for c in result.changes]}")
    before = READ[api](meant)
    after = READ[api](out)
    # Every result text whose id names a call survives (and answers a call).
    lost = set(before) - results_sent(out, api)
    assert not lost, f"results lost: {sorted(lost)}"
    # Each surviving result answers a call with the name and arguments of the call it answered.
    for text, meanings in after.items():
        if text.startswith("[chatmend]"):
            continue
        assert meanings <= before.get(text, set()), f"{text!r} now answers {meanings}"
    # Nothing answers no call: a result left in the output is read as answering one.
    stray = {t for t in results_sent(out, api) if not t.startswith("[chatmend]")} - set(after)
    assert not stray, f"results answering no call: {sorted(stray)}"
    # Every user text survives (merged with a neighbour at most: consecutive users are joined
    # where a provider refuses them).
    kept = user_texts(out, api)
    lost_texts = [t for t in user_texts(sent, api) if not any(t in k for k in kept)]
    assert not lost_texts, f"user texts lost: {lost_texts}"


FATES_ALL = ("normal", "normal", "normal", "late", "early", "missing")
#: Chat histories get no result placed before its call: the chat path still drops such a
#: result as an orphan and renames its call (duplicate-tool-call-ids takes the id as used by the
#: earlier tool message), a known gap this property would report.
FATES_CHAT = FATES_ALL


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(turns=conversations(FATES_CHAT), whole=st.integers(0, 3), replay=st.booleans())
def test_chat_loses_and_misattributes_nothing(
    name: str, turns: list[Turn], whole: int, replay: bool
) -> None:
    sent = chat(turns)
    cut = len(chat(turns[:whole]))  # the history stored twice: its first turns, whole
    doubled = replayed(sent, cut)
    # A replay only an issued id marks is one the client meant once; otherwise it is a history
    # as sent, read by the law like any other.
    meant = sent if marked(turns[:whole]) else doubled
    judge("chat", name, doubled if replay else sent, {}, meant if replay else sent)


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(turns=conversations(FATES_ALL), whole=st.integers(0, 3), replay=st.booleans())
def test_responses_loses_and_misattributes_nothing(
    name: str, turns: list[Turn], whole: int, replay: bool
) -> None:
    sent = responses(turns)
    cut = len(responses(turns[:whole]))
    doubled = replayed(sent, cut)
    meant = sent if marked(turns[:whole]) else doubled
    judge("responses", name, doubled if replay else sent, {}, meant if replay else sent)


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(turns=conversations(FATES_ALL))
def test_messages_loses_and_misattributes_nothing(name: str, turns: list[Turn]) -> None:
    judge("messages", name, messages(turns), {"max_tokens": 1024})


def clean_responses(turns: list[Turn]) -> list[Any]:
    """A history every provider accepts as sent: ids unique, valid arguments, each output right
    after its call."""
    out: list[Any] = []
    for number, turn in enumerate(turns):
        out.append({"role": "user", "content": turn.user})
        for k, c in enumerate(turn.calls):
            cid = f"call_{number}_{k}"
            arguments = json.dumps(python_object(c.args))
            out.append(
                {"type": "function_call", "call_id": cid, "name": c.name, "arguments": arguments}
            )
            out.append({"type": "function_call_output", "call_id": cid, "output": c.result})
        if turn.said is not None:
            text = [{"type": "output_text", "text": turn.said}]
            out.append({"type": "message", "role": "assistant", "content": text})
    return out


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(turns=conversations(("normal",)))
def test_a_clean_responses_history_passes_every_profile_untouched(
    name: str, turns: list[Turn]
) -> None:
    sent = clean_responses(turns)
    result = run_rules(sent, plan_of("responses", name).steps, request={"model": "m"})
    assert result.changes == ()
    assert result.messages == sent
