"""The text tool-call formats against wire texts written from their documentation
(tests/fixtures/replies/text-tool-calls.json), split every way a stream can split them.

The oracle is the fixture: each positive case lists, by hand, the calls and the content the
text holds; each negative case (over a third of them) must come back byte for byte. Every
split gives what the whole text gives; no marker of a converted block leaks into the content;
mutated texts never crash and never lose or add a character; a made call always names a
declared tool with a JSON object of arguments.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from rules.engine.base import RuleContext
from rules.replies import REPLY_RULES
from rules.replies.base import Step, declared_tools
from rules.replies.formats import FORMATS
from rules.replies.pipeline import ReplyRun, fix_message
from rules.replies.scanner import Calls, Piece, Text, TextCalls, text_of, whole

FIXTURE = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "replies" / "text-tool-calls.json").read_text()
)
TOOLS: list[dict[str, Any]] = FIXTURE["tools"]
DECLARED = declared_tools({"tools": TOOLS})
POSITIVE = [case for case in FIXTURE["cases"] if "calls" in case]
NEGATIVE = [case for case in FIXTURE["cases"] if "why" in case]
STRUCTURAL = ["{", "}", "[", "]", '"', "\\", "</", "<", ">", "`"]


def test_a_third_of_the_cases_are_negative() -> None:
    assert len(NEGATIVE) * 3 >= len(FIXTURE["cases"])
    assert {case["format"] for case in POSITIVE} == set(FORMATS)


def splits(text: str, markers: list[str]) -> list[tuple[str, list[str]]]:
    """The ways a stream may cut ``text``: whole, per character, fixed sizes, around every
    marker and structural character, and random sizes (three seeds)."""
    out = [("whole", [text]), ("char", list(text))]
    out += [
        (f"fixed-{n}", [text[i : i + n] for i in range(0, len(text), n)]) for n in (2, 3, 5, 8, 13)
    ]
    cuts = {0, len(text)}
    for marker in [*markers, *STRUCTURAL]:
        at = text.find(marker)
        while at != -1:
            for offset in (-1, 0, 1, len(marker) - 1, len(marker), len(marker) + 1):
                if 0 < at + offset < len(text):
                    cuts.add(at + offset)
            at = text.find(marker, at + 1)
    ordered = sorted(cuts)
    out.append(("markers", [text[a:b] for a, b in itertools.pairwise(ordered)]))
    for seed in (0, 7, 13):
        rng, chunks, at = random.Random(seed), [], 0
        while at < len(text):
            size = rng.randint(1, 17)
            chunks.append(text[at : at + size])
            at += size
        out.append((f"seed-{seed}", chunks))
    return out


def scan(formats: list[str], chunks: list[str]) -> list[Piece]:
    scanner = TextCalls([FORMATS[name] for name in formats], DECLARED)
    pieces: list[Piece] = []
    for chunk in chunks:
        pieces += scanner.feed(chunk)
    return pieces + scanner.end()


def calls_of(pieces: list[Piece]) -> list[dict[str, Any]]:
    return [
        {"name": call.name, "arguments": json.loads(call.arguments), "id": call.id}
        for piece in pieces
        if isinstance(piece, Calls)
        for call in piece.calls
    ]


def expected(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": "", **call} for call in case["calls"]]


@pytest.mark.parametrize("case", POSITIVE, ids=[c["name"] for c in POSITIVE])
@pytest.mark.parametrize("armed", ["own", "all"])
def test_every_split_reads_the_documented_calls(case: dict[str, Any], armed: str) -> None:
    formats = [case["format"]] if armed == "own" else list(FORMATS)
    for strategy, chunks in splits(case["text"], case["markers"]):
        pieces = scan(formats, chunks)
        assert calls_of(pieces) == expected(case), strategy
        assert text_of(pieces) == case["content"], strategy
        assert whole(pieces) == case["text"], strategy
        for marker in case["markers"]:
            if marker not in case["content"]:
                assert marker not in text_of(pieces), (strategy, marker)


@pytest.mark.parametrize("case", NEGATIVE, ids=[c["name"] for c in NEGATIVE])
def test_every_split_of_a_negative_comes_back_byte_for_byte(case: dict[str, Any]) -> None:
    for strategy, chunks in splits(case["text"], ["<", "[", "`"]):
        pieces = scan(case["formats"], chunks)
        assert not any(isinstance(p, Calls) for p in pieces), strategy
        assert text_of(pieces) == case["text"], strategy


def mutants(text: str, markers: list[str]) -> list[str]:
    """Truncations at markers, markers deleted or doubled, garbage injected, random cuts."""
    rng = random.Random(42)
    out: list[str] = []
    for marker in dict.fromkeys(markers):
        at = text.find(marker)
        while at != -1:
            out += [
                text[: at + max(1, len(marker) // 2)],
                text[:at] + text[at + len(marker) :],
                text[:at] + marker + text[at:],
            ]
            at = text.find(marker, at + 1)
    out += [text[: rng.randrange(1, len(text))] for _ in range(4)]
    for _ in range(4):
        at = rng.randrange(0, len(text))
        out.append(text[:at] + " GARBAGE\U0001f92a " + text[at:])
    return list(dict.fromkeys(out))


@pytest.mark.parametrize("case", POSITIVE, ids=[c["name"] for c in POSITIVE])
def test_mutants_never_crash_lose_text_or_invent_a_call(case: dict[str, Any]) -> None:
    for mutant in mutants(case["text"], case["markers"]):
        for chunks in ([mutant], [mutant[i : i + 7] for i in range(0, len(mutant), 7)]):
            pieces = scan(list(FORMATS), chunks)
            assert whole(pieces) == mutant
            for call in calls_of(pieces):
                assert call["name"] in DECLARED
                assert isinstance(call["arguments"], dict)


def run_steps(formats: list[str]) -> ReplyRun:
    counter = itertools.count()
    return ReplyRun(
        plan({"response-text-tool-calls": {"formats": formats}}),
        {"tools": TOOLS},
        new_id=lambda: f"call_{next(counter)}",
    )


def plan(options: dict[str, dict[str, Any]]) -> list[tuple[Any, RuleContext]]:
    """The rules a route runs: those on by default, and those given options."""
    return [
        (rule, RuleContext(options.get(rule.name, {})))
        for rule in REPLY_RULES
        if rule.default or rule.name in options
    ]


def streamed(run: ReplyRun, chunks: list[str], finish: str) -> tuple[str, list[Any], str | None]:
    """A stream's deltas through the rules, rebuilt as a client does: the content, the calls
    by index, the last finish_reason."""
    pipe = run.choice(0)
    steps = [out for chunk in chunks for out in pipe.feed(Step({"content": chunk}))]
    steps += pipe.feed(Step({}, finish)) + pipe.end()
    content, last = "", None
    calls: dict[int, dict[str, Any]] = {}
    for step in steps:
        content += step.delta.get("content") or ""
        for call in step.delta.get("tool_calls") or []:
            calls.setdefault(call["index"], call)
        last = step.finish or last
    return content, [calls[i] for i in sorted(calls)], last


@pytest.mark.parametrize("case", POSITIVE + NEGATIVE, ids=[c["name"] for c in POSITIVE + NEGATIVE])
def test_a_stream_gives_what_the_whole_message_gives(case: dict[str, Any]) -> None:
    formats = [case["format"]] if "format" in case else case["formats"]
    message, finish = fix_message(
        run_steps(formats).choice(0, stream=False),
        {"role": "assistant", "content": case["text"]},
        "stop",
    )
    if "why" in case:
        assert message == {"role": "assistant", "content": case["text"]} and finish == "stop"
    else:
        assert finish == "tool_calls"
        assert (message["content"] or "") == case["content"]
    whole_calls = [
        {k: v for k, v in call.items() if k != "id"} for call in message.get("tool_calls") or []
    ]
    for strategy, chunks in splits(case["text"], case.get("markers", [])):
        content, calls, last = streamed(run_steps(formats), chunks, "stop")
        assert content == (message["content"] or ""), strategy
        assert [
            {k: v for k, v in call.items() if k not in ("id", "index")} for call in calls
        ] == whole_calls, strategy
        assert [call["index"] for call in calls] == list(range(len(calls)))
        assert last == finish


def test_a_clean_stream_passes_every_step_as_the_same_object() -> None:
    """No candidate marker: each step leaves as the very object that came in (the relay then
    sends the upstream's bytes)."""
    pipe = run_steps(list(FORMATS)).choice(0)
    for text in ("Hello", " world, ", "no markup here.", "\n"):
        step = Step({"content": text})
        assert pipe.feed(step) == [step] and pipe.feed(step)[0] is step
    last = Step({}, "stop")
    assert pipe.feed(last)[0] is last and pipe.end() == []


def test_hold_back_is_bounded_by_one_opener() -> None:
    scanner = TextCalls(list(FORMATS.values()), DECLARED)
    longest = max(len(o) for f in FORMATS.values() for o in f.opens)
    for char in "some prose <tool_ca":
        scanner.feed(char)
        assert scanner.holding < longest
    assert scanner.end() == [Text("<tool_ca")]


def think(chunks: list[str], tags: list[str] | None = None) -> tuple[str, str]:
    """``chunks`` of content through response-think-tags: (reasoning, content) as a client
    rebuilds them."""
    pipe = ReplyRun(
        plan({"response-think-tags": {"tags": tags or ["think", "thinking"]}}), {}
    ).choice(0)
    out = [s for chunk in chunks for s in pipe.feed(Step({"content": chunk}))]
    out += pipe.feed(Step({}, "stop")) + pipe.end()
    reasoning = "".join(s.delta.get("reasoning_content") or "" for s in out)
    return reasoning, "".join(s.delta.get("content") or "" for s in out)


@pytest.mark.parametrize(
    ("text", "reasoning", "content"),
    [
        ("<think>The user wants X.</think>Here is X.", "The user wants X.", "Here is X."),
        ("\n<thinking>a < b </thin</thinking>\n\nAnswer", "a < b </thin", "\n\n\nAnswer"),
        ("<think>cut off", "cut off", ""),
        ("Answer with <think> later", "", "Answer with <think> later"),
        ("<thin", "", "<thin"),
        ("", "", ""),
    ],
)
def test_leading_thinking_moves_to_reasoning_content_whatever_the_split(
    text: str, reasoning: str, content: str
) -> None:
    for strategy, chunks in splits(text, ["<think>", "</think>", "<thinking>", "</thinking>"]):
        assert think(chunks) == (reasoning, content), strategy


def test_no_think_rule_unless_asked() -> None:
    pipe = run_steps(list(FORMATS)).choice(0)
    step = Step({"content": "<think>kept</think>"})
    assert pipe.feed(step) == [step]


@pytest.mark.parametrize("content", [None, [{"type": "text", "text": "<think>x"}], ""])
def test_think_tags_leave_a_content_that_is_not_text_as_it_came(content: Any) -> None:
    """A whole message whose content is null, a list of parts or empty has nothing that could
    open a tag: it passes as the same step (before, a null or a list became ``""`` once a
    ``finish_reason`` came, and a client's parts were lost)."""
    pipe = ReplyRun(plan({"response-think-tags": {}}), {}).choice(0, stream=False)
    step = Step({"role": "assistant", "content": content}, "stop")
    assert pipe.feed(step)[0] is step and pipe.end() == []
    assert fix_message(
        ReplyRun(plan({"response-think-tags": {}}), {}).choice(0, stream=False),
        step.delta,
        "stop",
    ) == (step.delta, "stop")
