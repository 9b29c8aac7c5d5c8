"""Properties of the pipeline and of each rule over random broken transcripts and JSON junk.

The SPEC these check: after ``sanitize_messages`` no two assistants are adjacent, tool-call ids
and tool_call_ids are unique, no ``tool_calls`` is empty/null/non-list, no assistant is left with
nothing, every call's arguments is a JSON-object string, every call is answered exactly once by
the tool messages right after its assistant and every tool message answers a call of that block;
the caller's data is untouched; a second run changes nothing; and nothing the client sent is lost
except what the spec drops by design (exact replays, second results, orphan results).
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from rules.chat import RULES, replayed_history, sanitize_messages
from rules.chat.unanswered_tool_calls import DEFAULT_CONTENT as STUB
from rules.chat.unknown_roles import OPENAI_ROLES
from rules.engine.base import Rule
from rules.engine.pipeline import default_steps
from tests.budget import examples
from tests.fake_upstream import strict_errors
from tests.strategies import (
    DEFECTS,
    ORPHAN_MARK,
    Broken,
    arbitrary_messages,
    broken_transcripts,
    clean_transcripts,
)

#: Big property runs: `make quick` skips them.
pytestmark = pytest.mark.slow

#: The main properties. Generation dominates the run time (about 10 ms of CPU per transcript):
#: the whole module takes about 25 s on one core.
MAIN = settings(
    max_examples=examples(2),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: Properties that are cheap to satisfy (the pipeline clones its input; clean transcripts are
#: one shape), or that run every rule several times per example.
LIGHT = settings(MAIN, max_examples=examples(1))
#: One pairing defect kind alone: a narrow input space, checked for an exact outcome.
NARROW = settings(MAIN, max_examples=examples(0.4))

Settings = Mapping[str, Mapping[str, Any] | bool] | None

#: Settings the invariants must hold under: the defaults, and every non-default option value.
OPTION_SETS: tuple[Settings, ...] = (
    None,
    {"invalid-tool-arguments": {"truncated": "empty"}, "unanswered-tool-calls": {"content": ""}},
)

#: The defects the pairing rules repair, and the four rules themselves.
PAIRING_DEFECTS = ("unanswered_call", "displaced_result", "missing_tool_call_id", "orphan_result")
CORE_DEFECTS = tuple(kind for kind in DEFECTS if kind not in PAIRING_DEFECTS)
PAIRING_RULES = (
    "displaced-tool-results",
    "missing-tool-call-ids",
    "orphan-tool-results",
    "unanswered-tool-calls",
)

# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def show(value: Any, limit: int = 4000) -> str:
    """Compact JSON for assertion messages, cut to ``limit`` characters."""
    try:
        text = orjson.dumps(value, default=repr).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


def has_content(message: dict[str, Any]) -> bool:
    """Spec: a non-empty string, or a list with a part that is not an empty text part."""
    content = message.get("content")
    if content is None or content == "":
        return False
    if isinstance(content, list):
        return any(
            not (isinstance(p, dict) and p.get("type") == "text" and p.get("text") in ("", None))
            for p in content
        )
    return True


def calls_of(message: Any) -> list[dict[str, Any]]:
    """The object entries of an assistant's tool_calls (none if it has no list)."""
    if role(message) != "assistant" or not isinstance(message.get("tool_calls"), list):
        return []
    return [c for c in message["tool_calls"] if isinstance(c, dict)]


def function_calls(messages: list[Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(message index, call) for every call that has a dict ``function``."""
    for i, message in enumerate(messages):
        for call in calls_of(message):
            if isinstance(call.get("function"), dict):
                yield i, call


def parse_object(arguments: Any) -> dict[str, Any] | None:
    """The arguments as a dict if they are a JSON-object string (or already a dict)."""
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str):
        return None
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def invariant_violations(messages: list[Any]) -> list[str]:
    """Every SPEC invariant the final payload breaks, each as a readable line."""
    problems: list[str] = []
    call_ids: Counter[str] = Counter()
    result_ids: Counter[str] = Counter()
    previous_role: Any = None
    for i, message in enumerate(messages):
        current = role(message)
        if current == "assistant":
            assert isinstance(message, dict)
            if previous_role == "assistant":
                problems.append(f"messages[{i}] is an assistant right after another assistant")
            if "tool_calls" in message:
                calls = message["tool_calls"]
                if not isinstance(calls, list) or not calls:
                    problems.append(f"messages[{i}].tool_calls is {show(calls)}")
                else:
                    for k, call in enumerate(calls):
                        where = f"messages[{i}].tool_calls[{k}]"
                        if not isinstance(call, dict):
                            problems.append(f"{where} is not an object: {show(call)}")
                            continue
                        if isinstance(call.get("id"), str):
                            call_ids[call["id"]] += 1
                        function = call.get("function")
                        if isinstance(function, dict):
                            arguments = function.get("arguments")
                            if not isinstance(arguments, str) or parse_object(arguments) is None:
                                problems.append(
                                    f"{where}.function.arguments is not a JSON-object string: "
                                    f"{show(arguments, 200)}"
                                )
            elif not has_content(message):
                problems.append(f"messages[{i}] is an assistant with neither content nor calls")
        elif current == "tool" and isinstance(message.get("tool_call_id"), str):
            result_ids[message["tool_call_id"]] += 1
        previous_role = current
    problems += [f"tool-call id {k!r} appears {n} times" for k, n in call_ids.items() if n > 1]
    problems += [f"tool_call_id {k!r} appears {n} times" for k, n in result_ids.items() if n > 1]
    return problems


def usable_id(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def made_id(call: dict[str, Any]) -> Any:
    """The id a call has once repaired, if it has one: its own, else the Codex alias it carries
    (``codex-call-ids`` gives a call without a usable id its ``call_id``, else its
    ``response_item_id``), else ``None``."""
    for key in ("id", "call_id", "response_item_id"):
        if usable_id(call.get(key)):
            return call[key]
    return None


def pairing_problems(messages: list[Any], *, unpairable: bool = False) -> list[str]:
    """Each assistant with calls is followed by exactly one result per call, and vice versa.

    With ``unpairable=True`` a call without a usable id (hermes E26: nothing can answer it) is
    ignored instead of reported; results must still answer a call with an id.
    """
    problems: list[str] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        calls = calls_of(message)
        if role(message) == "tool":
            problems.append(f"messages[{i}] is a tool result with no assistant call before it")
        i += 1
        if not calls:
            continue
        block: list[Any] = []
        while i < len(messages) and role(messages[i]) == "tool":
            block.append(messages[i].get("tool_call_id"))
            i += 1
        ids = [c.get("id") for c in calls]
        if not unpairable and not all(usable_id(cid) for cid in ids):
            problems.append(f"messages[{i}] has a call without a usable id: {ids}")
        wanted = sorted(repr(cid) for cid in ids if usable_id(cid))
        got = sorted(repr(b) for b in block)
        if wanted != got:
            problems.append(f"calls {wanted} are answered by results {got}")
    return problems


def stubs_in(messages: list[Any]) -> int:
    return sum(role(m) == "tool" and m.get("content") == STUB for m in messages)


def must_survive(result: dict[str, Any]) -> bool:
    """A result the pipeline must keep: it names its call exactly and is not an injected orphan.

    Results without a usable id, or with an id padded with whitespace, are paired by position
    only where that is unambiguous; elsewhere they are dropped by design.
    """
    key = result.get("tool_call_id")
    content = result.get("content")
    orphan = isinstance(content, str) and content.startswith(ORPHAN_MARK)
    return isinstance(key, str) and key != "" and key == key.strip() and not orphan


def trace(messages: list[Any], options: Settings = None) -> str:
    """Rule by rule: what each changed and which invariants hold after it (for failure text)."""
    lines: list[str] = []
    current = copy.deepcopy(messages)
    for rule, ctx in default_steps(RULES, options):
        outcome = rule.apply(current, ctx)
        current = outcome.messages
        changes = [c.as_dict() for c in outcome.changes]
        lines.append(f"after {rule.name}: changes={show(changes, 1500)}")
        lines.append(f"  violations: {invariant_violations(current)}")
    return "\n".join(lines)


def describe(
    broken: Broken, output: list[Any], problems: list[str], options: Settings = None
) -> str:
    note(f"defects: {broken.defects}")
    return (
        f"\nsettings: {options}\ndefects injected: {broken.defects}\nproblems:\n  "
        + "\n  ".join(problems)
        + f"\ninput:  {show(broken.messages)}\noutput: {show(output)}"
        + f"\n{trace(broken.messages, options)}"
    )


def text_pieces(message: dict[str, Any]) -> list[str]:
    """The non-empty texts an assistant carries: its string content or its text parts."""
    content = message.get("content")
    if isinstance(content, str):
        return [content] if content else []
    if isinstance(content, list):
        return [
            p["text"]
            for p in content
            if isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"]
        ]
    return []


def call_key(call: dict[str, Any]) -> tuple[Any, bytes]:
    """A call's function name and canonical arguments (for calls with object arguments)."""
    function = call["function"]
    return function.get("name"), canonical(parse_object(function.get("arguments")))


def assistant_runs(messages: list[Any]) -> list[int]:
    """For each message, the number of the run of adjacent assistants it belongs to."""
    runs: list[int] = []
    run = 0
    for i, message in enumerate(messages):
        if not (role(message) == "assistant" and i and role(messages[i - 1]) == "assistant"):
            run += 1
        runs.append(run)
    return runs


def first_reasoning_per_run(messages: list[Any]) -> list[str]:
    """Per run of adjacent assistants that has content or calls: its first non-empty reasoning."""
    found: list[str] = []
    runs = assistant_runs(messages)
    for run in sorted({runs[i] for i, m in enumerate(messages) if role(m) == "assistant"}):
        members = [m for i, m in enumerate(messages) if runs[i] == run]
        if not any(has_content(m) or calls_of(m) for m in members):
            continue
        reasonings = [m.get("reasoning_content") for m in members]
        firsts = [r for r in reasonings if isinstance(r, str) and r]
        if firsts:
            found.append(firsts[0])
    return found


def without_stray_runs(messages: list[Any]) -> list[Any]:
    """``messages`` without the tool messages right after a run of assistants none of which has
    a call with an id: none of them can stay there (each is moved to its call or dropped), so
    the assistants around them become one run, merged as if those tool messages had never been
    sent. After a run that made calls, the rules move or drop such a message too, but the run
    still has calls to answer, so the assistants before and after it stay apart."""
    out: list[Any] = []
    run: set[Any] = set()  # the ids of the calls made in the current run of assistants
    for message in messages:
        after = out[-1] if out else None
        if role(message) == "assistant":
            ids = {made_id(c) for c in calls_of(message)} - {None}
            run = run | ids if role(after) == "assistant" else ids
        elif role(message) == "tool" and role(after) == "assistant" and not run:
            continue
        out.append(message)
    return out


def first_results(messages: list[Any]) -> list[dict[str, Any]]:
    """Tool messages that are the first result for their id within their block."""
    firsts: list[dict[str, Any]] = []
    seen: set[Any] = set()
    for message in messages:
        if role(message) != "tool":
            seen = set()
            continue
        key = message.get("tool_call_id")
        if key not in seen:
            seen.add(key)
            firsts.append(message)
    return firsts


# ---------------------------------------------------------------------------------------------
# The pipeline on broken transcripts
# ---------------------------------------------------------------------------------------------


@MAIN
@given(broken_transcripts())
def test_every_invariant_holds_at_once_on_the_output(broken: Broken) -> None:
    for options in OPTION_SETS:
        result = sanitize_messages(broken.messages, options)
        assert result.failures == (), f"a rule crashed ({options}): {result.failures}"
        problems = invariant_violations(result.messages) + pairing_problems(result.messages)
        # and the strict fake upstream, which quotes the providers' rejections, accepts it
        problems += strict_errors({"messages": result.messages})
        assert not problems, describe(broken, result.messages, problems, options)


@LIGHT
@given(broken_transcripts())
def test_the_callers_messages_are_never_modified(broken: Broken) -> None:
    """Pipeline level; ``test_each_rule_is_pure_and_idempotent`` checks each rule unshielded."""
    snapshot = copy.deepcopy(broken.messages)
    # A shallow copy shares tool_calls[*].function and writes back through it (hermes #80498).
    functions = [c["function"] for _, c in function_calls(broken.messages)]
    sanitize_messages(broken.messages)
    for function, (_, before) in zip(functions, function_calls(snapshot), strict=True):
        assert function == before["function"], (
            f"tool_calls[*].function written: {show(before['function'])} -> {show(function)}"
        )
    assert broken.messages == snapshot, (
        f"sanitize_messages wrote into its input\ndefects: {broken.defects}"
        f"\nbefore: {show(snapshot)}\nafter:  {show(broken.messages)}"
    )


@MAIN
@given(broken_transcripts())
def test_a_second_run_changes_nothing(broken: Broken) -> None:
    first = sanitize_messages(broken.messages)
    second = sanitize_messages(first.messages)
    assert second.changes == (), (
        f"second run made changes: {show([c.as_dict() for c in second.changes])}"
        f"\ndefects: {broken.defects}\nfirst output: {show(first.messages)}"
    )
    assert second.messages == first.messages
    assert second.failures == ()


@MAIN
@given(broken_transcripts())
def test_nothing_the_client_sent_is_lost(broken: Broken) -> None:
    sent = broken.messages
    result = sanitize_messages(sent)
    out = result.messages
    context = f"\ndefects: {broken.defects}\ninput:  {show(sent)}\noutput: {show(out)}"
    # A block the strategy happened to make an exact replay of the block before it (a reused
    # id on an identical turn) is a doubled history: replayed-history rightly sends it once.
    # What must survive is judged on the input with such replays collapsed.
    inp = replayed_history.apply(sent, replayed_history.RULE.context()).messages

    # Users and systems are never touched, merged, dropped or reordered; a record with a role
    # no provider knows is removed (unknown-roles), and logged with its role.
    unknown = [m for m in inp if isinstance(role(m), str) and role(m) not in OPENAI_ROLES]
    others_in = [m for m in inp if role(m) not in ("assistant", "tool") and m not in unknown]
    others_out = [m for m in out if role(m) not in ("assistant", "tool")]
    assert others_out == others_in, "user/system messages changed" + context
    removed = [c.detail["role"] for c in result.changes if c.rule == "unknown-roles"]
    assert sorted(removed) == sorted(role(m) for m in unknown), "unknown roles unlogged" + context
    inp = [m for m in inp if m not in unknown]  # the rest is judged as if they were never sent

    # The first result for each call in a block survives (later ones may be dropped), wherever
    # it was displaced to; orphans and results without an exact id may be dropped.
    wanted = Counter(canonical(m.get("content")) for m in first_results(inp) if must_survive(m))
    have = Counter(canonical(m.get("content")) for m in out if role(m) == "tool")
    missing = wanted - have
    assert not missing, f"tool results lost: {[k.decode() for k in missing]}" + context
    # A stub stands only where no result was sent: unless a call lost its result, or a result
    # its id, or a replay stopped being one (ambiguous_ids), no stub appears.
    lossy = ("unanswered_call", "missing_tool_call_id")
    if not broken.ambiguous_ids and not any(broken.has(kind) for kind in lossy):
        assert stubs_in(out) == stubs_in(inp), "a stub replaced a result that was sent" + context

    # Every non-empty assistant text survives, possibly merged with "\n" or as a text part.
    out_texts = [t for m in out if role(m) == "assistant" for t in text_pieces(m)]
    for message in inp:
        if role(message) == "assistant":
            for piece in text_pieces(message):
                assert any(piece in t for t in out_texts), f"assistant text lost: {piece!r}" + (
                    context
                )

    # The first non-empty reasoning of a run of adjacent assistants (with content or calls) is
    # the merged message's reasoning; tool messages that cannot stay between two assistants do
    # not separate them.
    wanted_reasoning = Counter(first_reasoning_per_run(without_stray_runs(inp)))
    have_reasoning = Counter(
        m["reasoning_content"]
        for m in out
        if role(m) == "assistant" and isinstance(m.get("reasoning_content"), str)
    )
    missing_reasoning = wanted_reasoning - have_reasoning
    # Assistants that a dropped (or moved home) result left side by side are merged too
    # (blocks.rejoin, first reasoning wins). Which results duplicate-tool-call-ids and
    # orphan-tool-results drop is not modelled above (a result whose id lost its exact form is
    # an orphan too), so each assistant such a merge folded away may account for one
    # reasoning, and no more.
    folded = sum(
        change.detail["merged"] - change.detail["into"]
        for change in result.changes
        if change.rule
        in ("duplicate-tool-call-ids", "orphan-tool-results", "displaced-tool-results")
        and change.action == "merged_assistants"
    )
    assert sum(missing_reasoning.values()) <= folded, (
        f"reasoning lost: {list(missing_reasoning)}" + context
    )

    # Every call whose arguments were an object survives with equal arguments. Exact replays
    # are dropped only among calls sharing an id in one run of adjacent assistants (merged into
    # one message), so a call whose id is unique in its run keeps its valid text byte for byte.
    out_calls = {call_key(c) for _, c in function_calls(out)}
    out_strings = {c["function"].get("arguments") for _, c in function_calls(out)}
    runs = assistant_runs(inp)
    per_run = Counter((runs[i], c.get("id")) for i, c in function_calls(inp))
    for i, call in function_calls(inp):
        arguments = call["function"].get("arguments")
        if parse_object(arguments) is None:
            continue
        assert call_key(call) in out_calls, f"tool call lost: {show(call)}" + context
        if isinstance(arguments, str) and per_run[runs[i], call.get("id")] == 1:
            assert arguments in out_strings, f"valid arguments rewritten: {arguments!r}" + context
    # Malformations the spec repairs losslessly give back exactly the object that was sent.
    for name, obj in broken.restorable:
        assert (name, canonical(obj)) in out_calls, (
            f"arguments not restored by repair: {name} {show(obj)}" + context
        )


@MAIN
@given(broken_transcripts(CORE_DEFECTS))
def test_every_call_keeps_exactly_its_result(broken: Broken) -> None:
    """Without the pairing rules, the id rules alone keep every call answered one to one.

    A renamed id reaches its result; a replay leaves with its duplicate result; with two calls
    sharing an id in one turn, the k-th result with that id answers the k-th call. The pairing
    rules are off, so no stub can hide a result the id rules lost; no pairing defect is injected.
    Excluded: a replay whose copy got a lossy malformation (``Broken.ambiguous_ids``), which may
    stop being a replay and stay unanswered (a stub answers it when unanswered-tool-calls runs).
    """
    assume(not broken.ambiguous_ids)
    assert not pairing_problems(broken.clean), "strategy bug: clean transcript not paired"
    options = dict.fromkeys(PAIRING_RULES, False)
    out = sanitize_messages(broken.messages, options).messages
    problems = pairing_problems(out)
    assert not problems, describe(broken, out, problems, options)


# ---------------------------------------------------------------------------------------------
# Each pairing defect alone: what exactly the pipeline gives back
# ---------------------------------------------------------------------------------------------


@NARROW
@given(broken_transcripts(("missing_tool_call_id",)))
def test_lost_ids_alone_are_all_recovered(broken: Broken) -> None:
    """A clean block answers its calls in order, so every lost or padded id is recovered."""
    out = sanitize_messages(broken.messages).messages
    assert out == broken.clean, describe(broken, out, ["ids not recovered"])


@NARROW
@given(broken_transcripts(("orphan_result",)))
def test_orphans_alone_are_dropped_and_nothing_else(broken: Broken) -> None:
    out = sanitize_messages(broken.messages).messages
    assert out == broken.clean, describe(broken, out, ["orphans not dropped exactly"])


@NARROW
@given(broken_transcripts(("displaced_result",)))
def test_displaced_results_alone_all_come_home(broken: Broken) -> None:
    """Every result is back in its call's block, unchanged, and none was replaced by a stub."""
    out = sanitize_messages(broken.messages).messages
    problems = pairing_problems(out)
    if stubs_in(out):
        problems.append("a displaced result was stubbed")
    tools_in = Counter(canonical(m) for m in broken.clean if role(m) == "tool")
    tools_out = Counter(canonical(m) for m in out if role(m) == "tool")
    if tools_in != tools_out:
        problems.append("the tool messages changed")
    assert not problems, describe(broken, out, problems)


@NARROW
@given(broken_transcripts(("unanswered_call",)))
def test_unanswered_calls_alone_get_one_stub_each(broken: Broken) -> None:
    inp = broken.messages
    unanswered = 0
    for i, message in enumerate(inp):
        answered: set[Any] = set()
        j = i + 1
        while calls_of(message) and j < len(inp) and role(inp[j]) == "tool":
            answered.add(inp[j]["tool_call_id"])
            j += 1
        unanswered += sum(c["id"] not in answered for c in calls_of(message))
    out = sanitize_messages(inp).messages
    problems = pairing_problems(out)
    if stubs_in(out) != unanswered:
        problems.append(f"{stubs_in(out)} stubs for {unanswered} unanswered calls")
    assert not problems, describe(broken, out, problems)


# ---------------------------------------------------------------------------------------------
# Clean transcripts and junk
# ---------------------------------------------------------------------------------------------


@LIGHT
@given(clean_transcripts())
def test_clean_transcripts_pass_untouched(clean: list[Any]) -> None:
    # Guard the strategy itself: a "clean" transcript must satisfy what the rules enforce.
    assert not invariant_violations(clean), invariant_violations(clean)
    assert not pairing_problems(clean), pairing_problems(clean)
    result = sanitize_messages(clean)
    assert result.changes == (), (
        f"changes on a clean transcript: {[c.as_dict() for c in result.changes]}"
    )
    assert result.messages == clean
    # Rules on by default only: profile rules reshape valid OpenAI transcripts for a stricter
    # provider on purpose (tests/rules/test_profiles.py holds them to that provider's contract).
    for rule in (rule for rule in RULES if rule.default):
        outcome = rule.apply(clean, rule.context())
        assert outcome.changes == (), f"{rule.name} changed a clean transcript"
        assert outcome.messages is clean, f"{rule.name} must return an untouched list itself"


@MAIN
@given(arbitrary_messages())
def test_junk_never_crashes_a_rule(junk: list[Any]) -> None:
    snapshot = copy.deepcopy(junk)
    result = sanitize_messages(junk)
    assert result.failures == (), f"rules crashed: {result.failures}"
    assert junk == snapshot, f"input modified: {show(junk)}"
    orjson.dumps(result.messages)  # still serializable: raises if a rule built a non-JSON value
    # Even junk leaves paired: every call with an id answered in its block, no stray result.
    problems = pairing_problems(result.messages, unpairable=True)
    assert not problems, f"{problems}\ninput:  {show(junk)}\noutput: {show(result.messages)}"


@LIGHT
@given(arbitrary_messages())
def test_each_rule_alone_survives_junk(junk: list[Any]) -> None:
    for rule in RULES:
        snapshot = copy.deepcopy(junk)
        outcome = rule.apply(junk, rule.context())
        assert junk == snapshot, f"{rule.name} modified its input: {show(junk)}"
        orjson.dumps(outcome.messages)


# ---------------------------------------------------------------------------------------------
# Each rule on its own
# ---------------------------------------------------------------------------------------------


def check_rule(rule: Rule, messages: list[Any], where: str) -> list[Any]:
    """Apply ``rule``: it must not mutate ``messages`` and a second run must change nothing."""
    snapshot = copy.deepcopy(messages)
    ctx = rule.context()
    outcome = rule.apply(messages, ctx)
    assert messages == snapshot, (
        f"{rule.name} mutated its input ({where})"
        f"\nbefore: {show(snapshot)}\nafter:  {show(messages)}"
    )
    again = rule.apply(outcome.messages, ctx)
    assert again.changes == (), (
        f"{rule.name} is not idempotent ({where}): second run made "
        f"{show([c.as_dict() for c in again.changes])}\ninput: {show(snapshot)}"
        f"\nfirst output: {show(outcome.messages)}"
    )
    assert again.messages is outcome.messages, (
        f"{rule.name} returned a new list without changes ({where})"
    )
    return outcome.messages


@LIGHT
@given(broken_transcripts())
def test_each_rule_is_pure_and_idempotent(broken: Broken) -> None:
    note(f"defects: {broken.defects}")
    staged = broken.messages
    for rule in RULES:
        check_rule(rule, broken.messages, "on the broken transcript")
        staged = check_rule(rule, staged, "on the previous rules' output")


# ---------------------------------------------------------------------------------------------
# Request-level rules over junk request fields
# ---------------------------------------------------------------------------------------------

_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.sampled_from(("", "auto", "required", "none", "function", "enabled", "disabled", "high")),
)
_KEYS = st.sampled_from(("type", "function", "name", "parameters", "enabled", "effort", "google"))
_JUNK = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=10,
)
#: The request's own fields, each absent or any JSON value (the rules must take anything).
JUNK_REQUESTS = st.fixed_dictionaries(
    {},
    optional={
        "model": st.one_of(
            st.sampled_from(("kimi-k2.5", "deepseek-v4-flash", "gemini-3-pro-preview")), _JUNK
        ),
        "tools": _JUNK,
        "tool_choice": _JUNK,
        "parallel_tool_calls": _JUNK,
        "temperature": _JUNK,
        "thinking": _JUNK,
        "reasoning": _JUNK,
        "reasoning_effort": _JUNK,
        "enable_thinking": _JUNK,
        "chat_template_kwargs": _JUNK,
    },
)
#: Each request-level rule under each option set a profile gives it.
REQUEST_RULE_OPTIONS: tuple[tuple[str, Mapping[str, Any]], ...] = (
    ("empty-tools", {}),
    ("empty-tools", {"refused": "tool_choice"}),
    ("duplicate-tool-names", {}),
    ("empty-tool-parameters", {}),
    ("thinking-tool-choice", {}),
    ("thinking-tool-choice", {"replacement": "omit", "models": ["*kimi-k2.5*"]}),
    ("thinking-sampling", {"models": ["*kimi-k2.5*"]}),
    ("missing-thought-signatures", {}),
    ("function-names", {}),
)


@LIGHT
@given(request=JUNK_REQUESTS, junk=arbitrary_messages(max_size=5))
def test_request_rules_take_any_request_purely_and_idempotently(
    request: dict[str, Any], junk: list[Any]
) -> None:
    """Request-level rules read whatever a client put in the request's fields: none crashes,
    none writes into the request or the messages, what they return is JSON, and a second run
    over their output changes nothing."""
    by_name = {rule.name: rule for rule in RULES}
    for name, options in REQUEST_RULE_OPTIONS:
        rule = by_name[name]
        snapshot = copy.deepcopy((request, junk))
        ctx = replace(rule.context(options), request=request)
        outcome = rule.apply(junk, ctx)
        assert (request, junk) == snapshot, f"{name} wrote into its input"
        fields = outcome.request if outcome.request is not None else request
        orjson.dumps({**fields, "messages": outcome.messages})
        again = rule.apply(outcome.messages, replace(ctx, request=fields))
        assert again.changes == (), (name, [c.as_dict() for c in again.changes], request)
