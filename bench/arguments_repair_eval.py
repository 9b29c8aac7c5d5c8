"""Hand-written argument repair vs the json-repair library: correctness and speed on one corpus.

Run: ``.venv/bin/python bench/arguments_repair_eval.py`` (``pip install json-repair`` to compare;
without it only chatmend's repair is measured). Each corpus entry is a malformed ``arguments``
string from a reported failure family (docs/providers.md#hermes-arguments,
docs/providers.md#pairing) and the object a careful human would recover, or ``UNREPAIRABLE`` where
any answer is a guess.

Verdicts: *correct* = the expected object (or gave up where giving up is expected); *wrong* =
an object other than the expected one (a guess); *gave up* = no object where one was expected.
A library answer that is not a dict, or an empty dict, counts as giving up (it becomes ``{}``).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any, Final

from rules.engine.json_repair_passes import parse_strict_object, repair_object

UNREPAIRABLE: Final = "unrepairable"
GAVE_UP: Final = object()

#: (name, malformed text, expected object or UNREPAIRABLE). The expectation is the intent a
#: human reads in the text, not what chatmend's spec does: chatmend is not favoured by it.
CORPUS: list[tuple[str, str, Any]] = [
    # --- the families the rule's spec names ----------------------------------------------
    (
        "trailing comma, object",
        '{"path": "a.txt", "force": true,}',
        {"path": "a.txt", "force": True},
    ),
    ("trailing comma, array", '{"ids": [1, 2, 3,]}', {"ids": [1, 2, 3]}),
    (
        "trailing comma, string-aware",
        '{"sql": "IN (1, 2, )", "note": "a, }",}',
        {"sql": "IN (1, 2, )", "note": "a, }"},
    ),
    ("raw control chars", '{"cmd": "ls\n\tpwd"}', {"cmd": "ls\n\tpwd"}),
    ("Python literals", '{"recursive": True, "limit": None}', {"recursive": True, "limit": None}),
    (
        "single quotes with embedded quotes",
        "{'msg': 'say \"hi\"', 'x': 'it\\'s'}",
        {"msg": 'say "hi"', "x": "it's"},
    ),
    ("code fence", '```json\n{"query": "weather"}\n```', {"query": "weather"}),
    ("double-encoded", '"{\\"city\\": \\"Beijing\\"}"', {"city": "Beijing"}),
    (
        "double-encoded + trailing comma",
        '"{\\"a\\": [1, 2,],}"',
        {"a": [1, 2]},
    ),
    (
        "truncated, missing }",
        '{"command":"ls -la","timeout":30',
        {"command": "ls -la", "timeout": 30},
    ),
    ("truncated nested", '{"a": [1, 2', {"a": [1, 2]}),
    (
        "truncated nested objects",
        '{"items":[{"n":1},{"n":2',
        {"items": [{"n": 1}, {"n": 2}]},
    ),
    ("braces inside strings", '{"code":"}","x":"[{"', {"code": "}", "x": "[{"}),
    (
        "escaped quotes + braces, truncated",
        '{"s": "say \\"}\\" {", "n": 1',
        {"s": 'say "}" {', "n": 1},
    ),
    (
        "misnested closer",
        '{"edits":[{"old":"a"},{"old":"b"}}',
        {"edits": [{"old": "a"}, {"old": "b"}]},
    ),
    ("extra }", '{"k":"v"}}', {"k": "v"}),
    ("extra ] before }", '{"a": [1]]}', {"a": [1]}),
    ("dangling comma", '{"a":1,"b":2,', {"a": 1, "b": 2}),
    ("hanging key and colon", '{"prompt":"cat","background":', {"prompt": "cat"}),
    ("hanging key", '{"prompt":"cat","backgr', {"prompt": "cat"}),
    ("hanging colon, nested", '{"opts": {"a": 1, "b":', {"opts": {"a": 1}}),
    ("cut-off literal", '{"a": [1, 2, tr', {"a": [1, 2, True]}),
    (
        "truncated inside a string",
        '{"path":"a.py","content":"def f():\\n    ret',
        {"path": "a.py", "content": "def f():\n    ret"},
    ),
    ("truncated string with } inside", '{"content":"hello } world', {"content": "hello } world"}),
    ("concatenated objects", '{"q":"a"}{"q":"b"}', {"q": "a"}),
    ("concatenated, newline", '{"q":"a"}\n{"q":"b"}\n', {"q": "a"}),
    (
        "unicode, dangling comma",
        '{"city":"Zürich","emoji":"😀","jp":"日本語",',
        {"city": "Zürich", "emoji": "😀", "jp": "日本語"},
    ),
    ("NaN / Infinity", '{"a": NaN, "b": -Infinity}', {"a": None, "b": None}),
    (
        "huge integer kept exact",
        '{"id": 123456789012345678901234567890,}',
        {"id": 123456789012345678901234567890},
    ),
    (
        "literals and quotes inside strings",
        '{"t": "True, None, \'x\'", "ok": True,}',
        {"t": "True, None, 'x'", "ok": True},
    ),
    # --- beyond the spec: repairs with one obvious reading ------------------------------------
    ("prose around JSON", 'Sure! Here are the args: {"a": 1} Hope it helps.', {"a": 1}),
    ("unquoted keys", '{city: "Paris", days: 3}', {"city": "Paris", "days": 3}),
    ("// comment", '{"a": 1, // count\n"b": 2}', {"a": 1, "b": 2}),
    ("missing comma", '{"a": 1 "b": 2}', {"a": 1, "b": 2}),
    ("invalid escapes (Windows path)", '{"path": "C:\\Users\\me"}', {"path": "C:\\Users\\me"}),
    ("hex number", '{"mode": 0x1F}', {"mode": 31}),
    (
        "unescaped inner quotes",
        '{"text": "He said "stop" now", "n": 1}',
        {"text": 'He said "stop" now', "n": 1},
    ),
    ("apostrophe in single quotes", "{'msg': 'it's here'}", {"msg": "it's here"}),
    ("misnested or mistyped closer", '{"a": [1, 2}, "b": 3}', {"a": [1, 2], "b": 3}),
    # --- where every answer is a guess ----------------------------------------------------
    ("array, not an object", "[1, 2]", UNREPAIRABLE),
    ("JSON string, not an object", '"Beijing"', UNREPAIRABLE),
    ("plain prose", "search for cats", UNREPAIRABLE),
    ("missing value mid-text", '{"a": , "b": 2}', UNREPAIRABLE),
    ("two strings, no comma or key", '{"x": "a" "b"}', UNREPAIRABLE),
]

#: A realistic worst case for speed: a 100 KB write_file cut off inside its content.
LARGE = '{"path": "src/big.py", "content": "' + "def f(x):\\n    return x + 1\\n" * 3500


def chatmend(text: str) -> Any:
    """The rule's behaviour: valid object text is kept, otherwise repair, else give up."""
    if parse_strict_object(text):
        return json.loads(text)
    repaired = repair_object(text)
    return GAVE_UP if repaired.text is None else json.loads(repaired.text)


def library(strict: bool) -> Callable[[str], Any] | None:
    try:
        from json_repair import repair_json
    except ImportError:
        return None

    def run(text: str) -> Any:
        try:
            value = repair_json(text, return_objects=True, strict=strict)
        except ValueError:
            return GAVE_UP
        return value if isinstance(value, dict) and value else GAVE_UP

    return run


def same(got: Any, expected: Any) -> bool:
    """Exact JSON equality as the rule would send it: 1 is not 1.0 is not True, key order
    ignored, NaN and infinities are null (what orjson writes for them)."""
    if expected == UNREPAIRABLE:
        return got is GAVE_UP
    if got is GAVE_UP:
        return False
    return json.dumps(_finite(got), sort_keys=True) == json.dumps(expected, sort_keys=True)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def microseconds(run: Callable[[str], Any], texts: list[str], budget: float = 1.0) -> float:
    """Mean µs per call over ``texts``, repeated for about ``budget`` seconds."""
    rounds, spent = 0, 0.0
    while spent < budget:
        start = time.perf_counter()
        for text in texts:
            run(text)
        spent += time.perf_counter() - start
        rounds += 1
    return spent / (rounds * len(texts)) * 1e6


def describe(value: Any) -> str:
    text = "gave up" if value is GAVE_UP else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def main() -> int:
    implementations: dict[str, Callable[[str], Any]] = {"chatmend": chatmend}
    for strict in (False, True):
        run = library(strict)
        if run is not None:
            implementations[f"json-repair{' strict' if strict else ''}"] = run
    fallback = library(strict=False)
    if fallback is not None:  # what adopting the library only for what chatmend gives up on buys

        def hybrid(text: str, fallback: Callable[[str], Any] = fallback) -> Any:
            value = chatmend(text)
            return fallback(text) if value is GAVE_UP else value

        implementations["chatmend+json-repair"] = hybrid
    if len(implementations) == 1:
        print("json-repair is not installed (pip install json-repair): measuring chatmend only\n")
    else:
        from importlib.metadata import version

        print(f"json-repair {version('json-repair')}\n")

    texts = [text for _, text, _ in CORPUS]
    results = {name: [run(text) for text in texts] for name, run in implementations.items()}

    print(f"{len(CORPUS)} malformed argument strings\n")
    header = f"{'implementation':<20}{'correct':>8}{'wrong':>7}{'gave up':>9}"
    print(header + f"{'µs/call':>10}{'µs 100KB':>10}")
    for name, run in implementations.items():
        verdicts = [same(g, e) for g, (_, _, e) in zip(results[name], CORPUS, strict=True)]
        correct = sum(verdicts)
        gave_up = sum(
            not ok and got is GAVE_UP for ok, got in zip(verdicts, results[name], strict=True)
        )
        wrong = len(CORPUS) - correct - gave_up
        per_call = microseconds(run, texts)
        large = microseconds(run, [LARGE], budget=0.5)
        print(f"{name:<20}{correct:>8}{wrong:>7}{gave_up:>9}{per_call:>10.1f}{large:>10.0f}")

    print("\nCases where an implementation is not correct:")
    for index, (case, _, expected) in enumerate(CORPUS):
        misses = {
            name: results[name][index]
            for name in implementations
            if not same(results[name][index], expected)
        }
        if not misses:
            continue
        want = "unrepairable" if expected == UNREPAIRABLE else describe(expected)
        print(f"- {case}: expected {want}")
        for name, got in misses.items():
            print(f"    {name:<20} {describe(got)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
