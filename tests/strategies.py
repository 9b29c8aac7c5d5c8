"""Hypothesis strategies for chat ``messages``: clean agent loops, broken ones, and JSON junk.

Shared by the property tests and the benchmark. Every strategy builds fresh objects on each
draw (no shared dicts between messages or examples), so a test may compare against snapshots.

- ``clean_transcripts()``: realistic OpenAI-shaped agent transcripts that every rule must pass
  through untouched.
- ``broken_transcripts()``: a clean transcript with defects injected, as a ``Broken`` record that
  keeps the clean original and the list of defects (``kind`` or ``kind:variant``).
- ``arbitrary_messages()``: lists of anything JSON, with message-shaped dicts whose every field
  may hold a wrong type; for robustness only.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from hypothesis import strategies as st

Message = dict[str, Any]

# ---------------------------------------------------------------------------------------------
# Leaves: text, JSON values, content parts
# ---------------------------------------------------------------------------------------------

#: Encodable text only: the proxy parses bodies with orjson, which never yields lone surrogates.
_CHARS: Final = st.characters(codec="utf-8")

SAMPLE_TEXTS: Final[tuple[str, ...]] = (
    "",
    " ",
    "ok",
    "Done.",
    "Let me look at the file first.",
    "Ünïcödé ✓ naïve café",
    "日本語のテキスト",
    "emoji 🎉🚀 👩‍💻",
    "line one\nline two",
    'tab\tand "quotes" and \\backslash',
    '{"looks": "like json"}',
    "```python\nprint('hi')\n```",
    "\u200b",
    "null",
)

TOOL_NAMES: Final[tuple[str, ...]] = (
    "bash",
    "read_file",
    "write_file",
    "search",
    "get_weather",
    "web_fetch",
)
ARG_KEYS: Final[tuple[str, ...]] = ("path", "command", "query", "city", "content", "timeout")
#: Random-looking id bodies; the counter in each id keeps ids unique whatever the token is.
_TOKENS: Final[tuple[str, ...]] = ("", "abc", "Xy7", "9f2K3mQz", "0", "q1w2e3r4t5y6u7i8o9p0")
DUMP_STYLES: Final[tuple[str, ...]] = ("compact", "spaced", "ascii", "indented")


class _Absent:
    """Marker for "leave this key out of the message"."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __deepcopy__(self, memo: dict[int, Any]) -> _Absent:
        return self  # a singleton: copies of injected values must still compare ``is ABSENT``


ABSENT: Final = _Absent()


def texts(max_size: int = 40) -> st.SearchStrategy[str]:
    """Short text: hand-picked awkward samples or arbitrary encodable unicode (may be empty)."""
    return st.one_of(st.sampled_from(SAMPLE_TEXTS), st.text(_CHARS, max_size=max_size))


def nonempty_texts(max_size: int = 40) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from([t for t in SAMPLE_TEXTS if t]),
        st.text(_CHARS, min_size=1, max_size=max_size),
    )


def text_parts(text: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[Message]:
    return st.builds(lambda t: {"type": "text", "text": t}, text if text is not None else texts())


def _image_part() -> Message:
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


_JSON_SCALARS: Final = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    texts(20),
)

#: Any JSON value (finite floats, ints within 53 bits so every parser agrees).
json_values: Final[st.SearchStrategy[Any]] = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(ARG_KEYS), inner, max_size=3)
    ),
    max_leaves=4,
)

#: Tool-call arguments as a Python object (serialized separately).
argument_objects: Final[st.SearchStrategy[dict[str, Any]]] = st.dictionaries(
    st.one_of(st.sampled_from(ARG_KEYS), texts(8)), json_values, max_size=4
)


def dump_arguments(obj: Any, style: str) -> str:
    """Serialize like different clients do: compact, spaced, ASCII-escaped or indented."""
    if style == "compact":
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    if style == "spaced":
        return json.dumps(obj, ensure_ascii=False)
    if style == "ascii":
        return json.dumps(obj)
    return json.dumps(obj, ensure_ascii=False, indent=2)


user_contents: Final[st.SearchStrategy[Any]] = st.one_of(
    texts(),
    st.lists(st.one_of(text_parts(), st.builds(_image_part)), min_size=1, max_size=3),
)

system_contents: Final[st.SearchStrategy[Any]] = st.one_of(
    nonempty_texts(), st.lists(text_parts(nonempty_texts()), min_size=1, max_size=2)
)

tool_contents: Final[st.SearchStrategy[Any]] = st.one_of(
    texts(), st.lists(text_parts(), min_size=1, max_size=2)
)


@st.composite
def _nonempty_part_lists(draw: st.DrawFn) -> list[Message]:
    before = draw(st.lists(text_parts(), max_size=2))
    after = draw(st.lists(text_parts(), max_size=2))
    return [*before, draw(text_parts(nonempty_texts())), *after]


#: Content of a text-only assistant: something a provider counts as set.
assistant_text_contents: Final[st.SearchStrategy[Any]] = st.one_of(
    nonempty_texts(), _nonempty_part_lists()
)

#: Content next to tool calls: often null or empty, sometimes a short preamble, sometimes absent.
assistant_call_contents: Final[st.SearchStrategy[Any]] = st.one_of(
    st.none(), st.just(""), texts(), st.just(ABSENT)
)

reasoning_contents: Final[st.SearchStrategy[Any]] = st.one_of(st.just(ABSENT), texts())


# ---------------------------------------------------------------------------------------------
# Clean transcripts
# ---------------------------------------------------------------------------------------------

ID_STYLES: Final[tuple[str, ...]] = ("openai", "anthropic", "deepseek", "kimi")


def make_call_id(style: str, n: int, name: str, token: str) -> str:
    """A tool-call id in a provider's style; unique for a unique ``n`` whatever ``token`` is."""
    if style == "openai":
        return f"call_{token}_{n}"
    if style == "anthropic":
        return f"toolu_{n}_{token}"
    if style == "deepseek":
        return f"call_{n:02d}_{token}"
    return f"functions.{name}:{n}"


def _put(message: Message, key: str, value: Any) -> None:
    if value is not ABSENT:
        message[key] = value


@st.composite
def clean_transcripts(
    draw: st.DrawFn,
    *,
    min_turns: int = 1,
    max_turns: int = 3,
    max_rounds: int = 3,
    max_calls: int = 3,
) -> list[Message]:
    """An agent transcript that is already valid for strict providers.

    ``system?`` then turns of ``user`` → 0..``max_rounds`` rounds of (assistant with
    1..``max_calls`` tool calls → one tool message per call, in order) → often an assistant text
    answer. Ids are unique, no two assistants are adjacent, arguments are JSON-object strings.
    """
    style = draw(st.sampled_from(ID_STYLES))
    counter = itertools.count(1)
    tokens = st.sampled_from(_TOKENS)
    out: list[Message] = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(system_contents)})
    for _ in range(draw(st.integers(min_turns, max_turns))):
        out.append({"role": "user", "content": draw(user_contents)})
        for _ in range(draw(st.integers(0, max_rounds))):
            names = draw(st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=max_calls))
            calls: list[Message] = []
            for name in names:
                arguments = dump_arguments(
                    draw(argument_objects), draw(st.sampled_from(DUMP_STYLES))
                )
                calls.append(
                    {
                        "id": make_call_id(style, next(counter), name, draw(tokens)),
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                )
            assistant: Message = {"role": "assistant"}
            _put(assistant, "content", draw(assistant_call_contents))
            _put(assistant, "reasoning_content", draw(reasoning_contents))
            assistant["tool_calls"] = calls
            out.append(assistant)
            out.extend(
                {"role": "tool", "tool_call_id": call["id"], "content": draw(tool_contents)}
                for call in calls
            )
        if draw(st.booleans()):
            answer: Message = {"role": "assistant", "content": draw(assistant_text_contents)}
            _put(answer, "reasoning_content", draw(reasoning_contents))
            out.append(answer)
    return out


# ---------------------------------------------------------------------------------------------
# Broken transcripts
# ---------------------------------------------------------------------------------------------

#: Defect kinds, in the order they are applied (ids, calls, pairing, arguments, keys, structure).
DEFECTS: Final[tuple[str, ...]] = (
    "kimi_ids",  # every round's ids become functions.<name>:<position>, reused across rounds
    "reused_id",  # one later call takes the id of an earlier round's call (and its result)
    "suffix_trap",  # a reused id X plus another call already named X_d1
    "id_collision_in_turn",  # two calls of one assistant share an id, both answered in order
    "replayed_call",  # exact replay of a call inside one assistant, maybe with a duplicate result
    "duplicate_result",  # a second tool result for the same call in the same block
    "unanswered_call",  # a call left without result: result deleted, block emptied, call added
    "displaced_result",  # a result moved past the next non-tool message (user, assistant, ...)
    "missing_tool_call_id",  # results whose tool_call_id is absent, null, "", a number, padded
    "orphan_result",  # a tool message answering no call: unknown id, no id, a stale copy
    "codex_call_ids",  # calls carry a Codex call_id its results answer, or only a call_id
    "malformed_arguments",  # truncated, trailing comma, dict, python literal, fenced, ...
    "junk_keys",  # extra keys on messages and calls (refusal, annotations, name, index, ...)
    "junk_call_entries",  # non-object entries inside a tool_calls list
    "bad_tool_calls",  # tool_calls: [] / null / non-list on an assistant without calls
    "thinking_parts",  # Anthropic thinking / redacted_thinking parts in assistant content
    "split_assistant",  # one assistant split into two adjacent ones
    "empty_assistant",  # an assistant with neither content nor tool calls (maybe reasoning)
    "unknown_role",  # an agent's record with a role no provider knows (session_meta)
)

MALFORMATIONS: Final[tuple[str, ...]] = (
    "truncated",
    "trailing_comma",
    "dict",
    "python_literal",
    "fenced",
    "double_encoded",
    "concatenated",
    "non_object",
)

#: Malformations the spec repairs back to exactly the original object (a Python literal too,
#: when its strings need no escapes: see ``_plain``).
LOSSLESS_MALFORMATIONS: Final = frozenset(
    {"trailing_comma", "dict", "fenced", "double_encoded", "concatenated"}
)


#: Content prefix of every injected orphan result: the pipeline may drop these by design.
ORPHAN_MARK: Final = "[orphan result "
#: Prefix of every injected thinking text, so a property can find it again.
THINKING_MARK: Final = "[thinking "
#: Roles no provider knows, as agents persist them (hermes-agent #4715) or miscase them.
UNKNOWN_ROLES: Final[tuple[str, ...]] = ("session_meta", "memory", "Tool", "event")


@dataclass(frozen=True)
class Broken:
    """A broken transcript and how it was made."""

    messages: list[Any]
    #: The transcript before any defect was injected.
    clean: list[Any] = field(repr=False)
    #: Injected defects in order, as ``kind`` or ``kind:variant``.
    defects: tuple[str, ...]
    #: True when a call shares its id with another call of its turn and got a lossy malformation
    #: (truncated, python literal, non-object): whether the two still compare as a replay after
    #: repair is then unknown, so a replay without its own result may survive unanswered.
    ambiguous_ids: bool
    #: (function name, arguments object) of each call whose arguments got a malformation the spec
    #: repairs losslessly (trailing comma, dict, fence, double encoding, concatenation, a plain
    #: Python literal): the output must hold a call with that name and exactly that object.
    restorable: tuple[tuple[Any, dict[str, Any]], ...] = field(default=(), repr=False)

    def has(self, kind: str) -> bool:
        return any(d == kind or d.startswith(kind + ":") for d in self.defects)


def _is_assistant(value: Any) -> bool:
    return isinstance(value, dict) and value.get("role") == "assistant"


def _is_tool(value: Any) -> bool:
    return isinstance(value, dict) and value.get("role") == "tool"


def _calls(message: Any) -> list[Any] | None:
    """The tool_calls list of an assistant if it holds at least one object, else None."""
    if not _is_assistant(message):
        return None
    calls = message.get("tool_calls")
    if isinstance(calls, list) and any(isinstance(c, dict) for c in calls):
        return calls
    return None


def _rounds(msgs: list[Any]) -> list[tuple[int, list[int]]]:
    """(index of an assistant with calls, indices of the tool messages right after it)."""
    found: list[tuple[int, list[int]]] = []
    for i, message in enumerate(msgs):
        if _calls(message) is not None:
            block: list[int] = []
            j = i + 1
            while j < len(msgs) and _is_tool(msgs[j]):
                block.append(j)
                j += 1
            found.append((i, block))
    return found


def _all_calls(msgs: list[Any]) -> list[tuple[int, int]]:
    """(message index, call position) of every object call with a dict ``function``."""
    return [
        (i, k)
        for i, _ in _rounds(msgs)
        for k, call in enumerate(msgs[i]["tool_calls"])
        if isinstance(call, dict) and isinstance(call.get("function"), dict)
    ]


def _ids_in(message: Message) -> list[Any]:
    return [c.get("id") for c in message.get("tool_calls") or [] if isinstance(c, dict)]


def _rename_positional(msgs: list[Any], index: int, block: list[int], k: int, new: str) -> None:
    """Give call ``k`` of ``msgs[index]`` and its result (the k-th of the block) id ``new``.

    Only valid in the id phase, where block position k still answers call k.
    """
    msgs[index]["tool_calls"][k]["id"] = new
    if k < len(block):
        msgs[block[k]]["tool_call_id"] = new


def _reformat(arguments: str, style: str) -> str:
    """The same object as other bytes: keys reversed if it has two, else another layout."""
    parsed = json.loads(arguments)
    if isinstance(parsed, dict) and len(parsed) >= 2:
        parsed = dict(reversed(list(parsed.items())))
    return dump_arguments(parsed, style)


def _malform(draw: st.DrawFn, how: str, arguments: str) -> Any:
    """``arguments`` (a JSON object string) broken the way ``how`` says."""
    parsed = json.loads(arguments)
    if how == "truncated":
        return arguments[: draw(st.integers(0, len(arguments) - 1))]
    if how == "trailing_comma":  # only drawn for a non-empty object
        return arguments.rstrip()[:-1].rstrip() + draw(st.sampled_from([",}", ", }", ",\n}"]))
    if how == "dict":
        return parsed
    if how == "python_literal":
        return repr(parsed)
    if how == "fenced":
        return draw(st.sampled_from(["```json\n", "```\n", "```json"])) + arguments + "\n```"
    if how == "double_encoded":
        return json.dumps(arguments)
    if how == "concatenated":
        return arguments + json.dumps(draw(argument_objects))
    return draw(st.sampled_from(["", "null", "[]", "[1, 2]", "42", '"text"', None, 7, ["a"]]))


def _kimi_ids(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    rounds = _rounds(msgs)
    if not rounds:
        return None
    for index, block in rounds:
        for k, call in enumerate(msgs[index]["tool_calls"]):
            name = call["function"]["name"]
            _rename_positional(msgs, index, block, k, f"functions.{name}:{k}")
    return "kimi_ids"


def _reused_id(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    rounds = _rounds(msgs)
    if len(rounds) < 2:
        return None
    a = draw(st.integers(0, len(rounds) - 2))
    b = draw(st.integers(a + 1, len(rounds) - 1))
    (ia, _), (ib, block_b) = rounds[a], rounds[b]
    source = draw(st.sampled_from(msgs[ia]["tool_calls"]))["id"]
    if source in _ids_in(msgs[ib]):
        return None
    k = draw(st.integers(0, len(msgs[ib]["tool_calls"]) - 1))
    _rename_positional(msgs, ib, block_b, k, source)
    return "reused_id"


def _suffix_trap(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    rounds = _rounds(msgs)
    calls = [(r, k) for r, (i, _) in enumerate(rounds) for k in range(len(msgs[i]["tool_calls"]))]
    if len(rounds) < 2 or len(calls) < 3:
        return None
    a = draw(st.integers(0, len(rounds) - 2))
    b = draw(st.integers(a + 1, len(rounds) - 1))
    (ia, _), (ib, block_b) = rounds[a], rounds[b]
    source = draw(st.sampled_from(msgs[ia]["tool_calls"]))["id"]
    kb = draw(st.integers(0, len(msgs[ib]["tool_calls"]) - 1))
    others = [
        (r, k)
        for r, k in calls
        if (r, k) != (b, kb) and msgs[rounds[r][0]]["tool_calls"][k]["id"] != source
    ]
    if source in _ids_in(msgs[ib]) or not others:
        return None
    r, k = draw(st.sampled_from(others))
    trap = f"{source}_d1"
    if trap in _ids_in(msgs[rounds[r][0]]):
        return None
    _rename_positional(msgs, ib, block_b, kb, source)
    _rename_positional(msgs, rounds[r][0], rounds[r][1], k, trap)
    return "suffix_trap"


def _id_collision_in_turn(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    """Two calls of one turn share an id and both are answered, in order (llama.cpp's constant
    id): the k-th result with that id answers the k-th call with it."""
    rounds = [(i, block) for i, block in _rounds(msgs) if len(msgs[i]["tool_calls"]) >= 2]
    if not rounds:
        return None
    index, block = draw(st.sampled_from(rounds))
    n = len(msgs[index]["tool_calls"])
    first = draw(st.integers(0, n - 2))
    second = draw(st.integers(first + 1, n - 1))
    _rename_positional(msgs, index, block, second, msgs[index]["tool_calls"][first]["id"])
    return "id_collision_in_turn"


def _replayed_call(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    rounds = _rounds(msgs)
    if not rounds:
        return None
    index, block = draw(st.sampled_from(rounds))
    calls = msgs[index]["tool_calls"]
    k = draw(st.integers(0, len(calls) - 1))
    replay = copy.deepcopy(calls[k])
    variant = "exact"
    arguments = replay["function"]["arguments"]
    if draw(st.booleans()):
        # Canonically equal, not byte-equal: the spec still calls this an exact replay.
        reformatted = _reformat(arguments, draw(st.sampled_from(DUMP_STYLES)))
        if reformatted != arguments:
            replay["function"]["arguments"] = reformatted
            variant = "reformatted"
    calls.insert(draw(st.integers(k + 1, len(calls))), replay)
    answers = [j for j in block if msgs[j].get("tool_call_id") == replay["id"]]
    if answers and bool(draw(st.booleans())):
        original = msgs[answers[0]]
        duplicate = copy.deepcopy(original)
        if draw(st.booleans()):
            duplicate["content"] = draw(tool_contents)
        msgs.insert(draw(st.integers(answers[0] + 1, block[-1] + 1)), duplicate)
        variant += "+result"
    return f"replayed_call:{variant}"


def _duplicate_result(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    rounds = [(i, block) for i, block in _rounds(msgs) if block]
    if not rounds:
        return None
    _, block = draw(st.sampled_from(rounds))
    j = draw(st.sampled_from(block))
    duplicate = copy.deepcopy(msgs[j])
    same = draw(st.booleans())
    if not same:
        duplicate["content"] = draw(tool_contents)
    msgs.insert(draw(st.integers(j + 1, block[-1] + 1)), duplicate)
    return "duplicate_result:" + ("same_content" if same else "new_content")


def _taken_ids(msgs: list[Any]) -> set[Any]:
    """Every call id and tool_call_id in ``msgs``."""
    taken = {c.get("id") for m in msgs for c in (_calls(m) or []) if isinstance(c, dict)}
    taken.update(m.get("tool_call_id") for m in msgs if _is_tool(m))
    return taken


def _fresh_id(msgs: list[Any], stem: str) -> str:
    taken = _taken_ids(msgs)
    return next(f"{stem}_{n}" for n in itertools.count(len(taken)) if f"{stem}_{n}" not in taken)


def _unanswered_call(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    """A call loses its result (hermes #56980), a whole block is cut, or a call is added."""
    rounds = _rounds(msgs)
    if not rounds:
        return None
    index, block = draw(st.sampled_from(rounds))
    variants = ["added_call", "dropped_result", "no_results"] if block else ["added_call"]
    variant = draw(st.sampled_from(variants))
    if variant == "added_call":
        name = draw(st.sampled_from(TOOL_NAMES))
        arguments = dump_arguments(draw(argument_objects), draw(st.sampled_from(DUMP_STYLES)))
        call = {
            "id": _fresh_id(msgs, "call_open"),
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        calls = msgs[index]["tool_calls"]
        calls.insert(draw(st.integers(0, len(calls))), call)
    elif variant == "dropped_result":
        del msgs[draw(st.sampled_from(block))]
    else:
        del msgs[block[0] : block[-1] + 1]
    return f"unanswered_call:{variant}"


def _displaced_result(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    """A result moves past the message after its block (compression, late results; hermes E5).

    Only a result whose id is carried by exactly one call and one tool message: with ids shared
    by two calls, which call a displaced result answers is a guess the rules do not make.
    """
    call_ids = Counter(c.get("id") for i, _ in _rounds(msgs) for c in _calls(msgs[i]) or [])
    result_ids = Counter(m.get("tool_call_id") for m in msgs if _is_tool(m))
    movable = [
        (j, block[-1] + 1)
        for _, block in _rounds(msgs)
        for j in block
        if block[-1] + 1 < len(msgs)
        and isinstance(key := msgs[j].get("tool_call_id"), str)
        and call_ids[key] == 1
        and result_ids[key] == 1
    ]
    if not movable:
        return None
    j, end = draw(st.sampled_from(movable))
    result = msgs.pop(j)
    # msgs[end - 1] is now the message that ended the block: land anywhere after it.
    at = draw(st.integers(end, len(msgs)))
    msgs.insert(at, result)
    before = msgs[at - 1]
    where = "in_a_block" if _is_tool(before) or _calls(before) else f"after_{before.get('role')}"
    return f"displaced_result:{where}"


_NO_IDS: Final[tuple[tuple[str, Any], ...]] = (
    ("absent", ABSENT),
    ("null", None),
    ("empty", ""),
    ("number", 0),
)


def _missing_tool_call_id(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    """Results in blocks lose their ids (langchain#22600, codex#42088) or get padded (E4)."""
    targets = [j for _, block in _rounds(msgs) for j in block]
    if not targets:
        return None
    chosen = draw(st.lists(st.sampled_from(targets), min_size=1, max_size=3, unique=True))
    if draw(st.integers(0, 4)) == 0:
        # E4 is a real id with a stray space; a blank id is just a missing one.
        padded = [j for j in chosen if str(msgs[j].get("tool_call_id") or "").strip()]
        for j in padded:
            msgs[j]["tool_call_id"] = draw(st.sampled_from([" {}", "{} ", "\t{}\n"])).format(
                msgs[j]["tool_call_id"]
            )
        return "missing_tool_call_id:padded" if padded else None
    how, value = draw(st.sampled_from(_NO_IDS))
    for j in chosen:
        msgs[j].pop("tool_call_id", None)
        _put(msgs[j], "tool_call_id", value)
    return f"missing_tool_call_id:{how}"


def _orphan_result(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    """A tool message that answers no call: an unknown id or none anywhere (before any call,
    after a user message, inside a block), or a stale copy of an answered call's result outside
    every block (context truncation, llama_index#10493; hermes R4, R19)."""
    content = f"{ORPHAN_MARK}{sum(_is_tool(m) for m in msgs)}]"
    variant = draw(st.sampled_from(("unknown_id", "no_id", "stale_id")))
    outside = [
        i
        for i in range(len(msgs) + 1)
        if i == 0 or not (_is_tool(msgs[i - 1]) or _calls(msgs[i - 1]))
    ]
    if variant == "stale_id":
        answered = [
            j for j, m in enumerate(msgs) if _is_tool(m) and isinstance(m.get("tool_call_id"), str)
        ]
        if not answered:
            return None
        j = draw(st.sampled_from(answered))
        later = [i for i in outside if i > j]
        if not later:
            return None
        orphan: Message = {
            "role": "tool",
            "tool_call_id": msgs[j]["tool_call_id"],
            "content": content,
        }
        at = draw(st.sampled_from(later))
    else:
        orphan = {"role": "tool", "content": content}
        if variant == "unknown_id":
            orphan["tool_call_id"] = _fresh_id(msgs, "call_orphan")
        else:
            _put(orphan, "tool_call_id", draw(st.sampled_from([ABSENT, None, ""])))
        at = draw(st.integers(0, len(msgs)))
    msgs.insert(at, orphan)
    return f"orphan_result:{variant}:" + ("outside" if at in outside else "in_a_block")


class _Malformed(NamedTuple):
    label: str
    ambiguous: bool
    #: (function name, the object a lossless repair must restore), or None for a lossy one.
    expected: tuple[Any, dict[str, Any]] | None


def _plain(value: Any) -> bool:
    """True if a Python literal of ``value`` reads back as JSON once quotes are swapped."""
    if isinstance(value, str):
        return value.isascii() and value.isprintable() and not set(value) & set("'\"\\")
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return True


def _malformed_arguments(draw: st.DrawFn, msgs: list[Any]) -> _Malformed | None:
    targets = [
        (i, k)
        for i, k in _all_calls(msgs)
        if isinstance(msgs[i]["tool_calls"][k]["function"].get("arguments"), str)
    ]
    if not targets:
        return None
    i, k = draw(st.sampled_from(targets))
    call = msgs[i]["tool_calls"][k]
    arguments = call["function"]["arguments"]
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    choices = [m for m in MALFORMATIONS if m != "trailing_comma" or parsed]
    how = draw(st.sampled_from(choices))
    call["function"]["arguments"] = _malform(draw, how, arguments)
    lossless = how in LOSSLESS_MALFORMATIONS or (how == "python_literal" and _plain(parsed))
    shared = _ids_in(msgs[i]).count(call.get("id")) > 1
    expected = (call["function"].get("name"), parsed) if lossless else None
    return _Malformed(f"malformed_arguments:{how}", shared and not lossless, expected)


_ASSISTANT_JUNK: Final[tuple[tuple[str, Any], ...]] = (
    ("refusal", None),
    ("annotations", []),
    ("audio", None),
    ("function_call", None),
    ("name", "helper"),
    ("x_trace", {"span": 7, "tags": ["a"]}),
)


def _junk_keys(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    if not msgs:
        return None
    i = draw(st.integers(0, len(msgs) - 1))
    message = msgs[i]
    role = message.get("role")
    if role == "assistant":
        calls = _calls(message)
        ids = _ids_in(message)
        unique = [
            k
            for k, c in enumerate(calls or [])
            if isinstance(c, dict) and ids.count(c.get("id")) == 1
        ]
        if unique and bool(draw(st.booleans())):
            k = draw(st.sampled_from(unique))
            assert calls is not None
            calls[k]["index"] = k
            return "junk_keys:call_index"
        key, value = draw(st.sampled_from(_ASSISTANT_JUNK))
        message[key] = copy.deepcopy(value)
        return f"junk_keys:assistant_{key}"
    if role == "tool":
        message["name"] = draw(st.sampled_from(TOOL_NAMES))
        return "junk_keys:tool_name"
    message["name"] = draw(st.sampled_from(["alice", "bob", ""]))
    return f"junk_keys:{role}_name"


def _junk_call_entries(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    rounds = _rounds(msgs)
    if not rounds:
        return None
    index, _ = draw(st.sampled_from(rounds))
    calls = msgs[index]["tool_calls"]
    calls.insert(draw(st.integers(0, len(calls))), draw(st.sampled_from([None, "call", 42, []])))
    return "junk_call_entries"


#: `[]` and `null` are what clients really send (DeepSeek's "empty array" 400); the rest is rarer.
_BAD_TOOL_CALLS: Final = st.one_of(
    st.sampled_from([[], None]), st.sampled_from(["", {}, 0, False, "[]", [None]])
)


def _bad_tool_calls(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    targets = [i for i, m in enumerate(msgs) if _is_assistant(m) and "tool_calls" not in m]
    if not targets:
        return None
    i = draw(st.sampled_from(targets))
    value = copy.deepcopy(draw(_BAD_TOOL_CALLS))
    msgs[i]["tool_calls"] = value
    return f"bad_tool_calls:{json.dumps(value)}"


def _second_half(draw: st.DrawFn) -> Message:
    """The later half of a split: usually bare, sometimes with text of its own (string or parts)."""
    second: Message = {"role": "assistant"}
    _put(second, "content", draw(st.one_of(st.sampled_from([None, "", ABSENT]), user_contents)))
    if draw(st.booleans()):
        second["reasoning_content"] = draw(texts())
    return second


def _split_assistant(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    targets = [i for i, m in enumerate(msgs) if _is_assistant(m)]
    if not targets:
        return None
    i = draw(st.sampled_from(targets))
    message: Message = msgs[i]
    calls = message.get("tool_calls")
    content = message.get("content")
    modes: list[str] = []
    if isinstance(calls, list) and calls:
        modes.append("text+calls")
        if len(calls) >= 2:
            modes.append("call_halves")
    else:
        if isinstance(content, str) and len(content) >= 2:
            modes.append("text_halves")
        if isinstance(content, list) and len(content) >= 2:
            modes.append("part_halves")
    if not modes:
        return None
    mode = draw(st.sampled_from(modes))
    second = _second_half(draw)
    if mode == "text+calls":
        first = {k: v for k, v in message.items() if k != "tool_calls"}
        second["tool_calls"] = calls
    elif mode == "call_halves":
        assert isinstance(calls, list)
        cut = draw(st.integers(1, len(calls) - 1))
        first = {**message, "tool_calls": calls[:cut]}
        second["tool_calls"] = calls[cut:]
    else:
        assert isinstance(content, str | list)
        cut = draw(st.integers(1, len(content) - 1))
        first = {**message, "content": content[:cut]}
        second["content"] = content[cut:]
    msgs[i : i + 1] = [first, second]
    return f"split_assistant:{mode}"


_EMPTY_CONTENTS: Final[tuple[Any, ...]] = (None, "", [], [{"type": "text", "text": ""}], ABSENT)


def _empty_assistant(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    # Anywhere except between two tool messages of one block.
    slots = [
        i
        for i in range(len(msgs) + 1)
        if not (0 < i < len(msgs) and _is_tool(msgs[i - 1]) and _is_tool(msgs[i]))
    ]
    i = draw(st.sampled_from(slots))
    empty: Message = {"role": "assistant"}
    _put(empty, "content", copy.deepcopy(draw(st.sampled_from(_EMPTY_CONTENTS))))
    calls: Any = draw(st.sampled_from([ABSENT, [], None]))
    _put(empty, "tool_calls", copy.deepcopy(calls))
    # A thinking-only turn: reasoning but nothing a provider counts as content.
    _put(empty, "reasoning_content", draw(reasoning_contents))
    msgs.insert(i, empty)
    return "empty_assistant"


def _codex_call_ids(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    """Calls of one round carry a Codex-style alias (hermes-agent #58168): ``call_id`` (or
    ``response_item_id``) that every result of the call names instead of its ``id``, or a
    ``call_id`` and no ``id`` at all. Only calls whose id no other call shares: with a shared id,
    which call an alias result answers is the rule's ambiguity, not this property's."""
    counts = Counter(c.get("id") for i, _ in _rounds(msgs) for c in _calls(msgs[i]) or [])
    rounds = [
        (i, [k for k, c in enumerate(msgs[i]["tool_calls"]) if _unique_call(c, counts)])
        for i, _ in _rounds(msgs)
    ]
    rounds = [(i, ks) for i, ks in rounds if ks]
    if not rounds:
        return None
    index, positions = draw(st.sampled_from(rounds))
    chosen = draw(st.lists(st.sampled_from(positions), min_size=1, unique=True))
    variant = draw(st.sampled_from(("call_id", "response_item_id", "only_call_id")))
    taken = _taken_ids(msgs)
    for k in chosen:
        call = msgs[index]["tool_calls"][k]
        old = call["id"]
        if variant == "only_call_id":
            del call["id"]
            call["call_id"] = old
            continue
        alias = next(
            f"call_cx{n}" for n in itertools.count(len(taken)) if f"call_cx{n}" not in taken
        )
        taken.add(alias)
        call[variant] = alias
        for message in msgs:
            if _is_tool(message) and message.get("tool_call_id") == old:
                message["tool_call_id"] = alias
    return f"codex_call_ids:{variant}"


def _unique_call(call: Any, counts: Counter[Any]) -> bool:
    """A call whose id no other call shares, and that carries no alias yet."""
    if not isinstance(call, dict) or "call_id" in call or "response_item_id" in call:
        return False
    cid = call.get("id")
    return isinstance(cid, str) and bool(cid) and counts[cid] == 1


def _thinking_part(text: str, signed: bool) -> Message:
    part: Message = {"type": "thinking", "thinking": text}
    if signed:
        part["signature"] = "EqQBCgIYAhIM"
    return part


def _thinking_parts(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    """A history carried over from a Claude session: an assistant's content becomes Anthropic
    blocks, a thinking part (sometimes with a redacted one) before its text; or a thinking-only
    turn is added (hermes R23)."""
    n = sum(1 for m in msgs if _is_assistant(m))
    text = f"{THINKING_MARK}{n}] " + draw(texts(20))
    signed = draw(st.booleans())
    blocks = [_thinking_part(text, signed)]
    if draw(st.integers(0, 3)) == 0:
        blocks.append({"type": "redacted_thinking", "data": "RW5jcnlwdGVk"})
    targets = [i for i, m in enumerate(msgs) if _is_assistant(m)]
    if targets and bool(draw(st.booleans())):
        message = msgs[draw(st.sampled_from(targets))]
        content = message.get("content")
        if isinstance(content, str) and content:
            rest: list[Any] = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            rest = content
        else:
            rest = []
        message["content"] = [*blocks, *rest]
        return "thinking_parts:" + ("with_text" if rest else "bare")
    slots = [
        i
        for i in range(len(msgs) + 1)
        if not (0 < i < len(msgs) and _is_tool(msgs[i - 1]) and _is_tool(msgs[i]))
    ]
    msgs.insert(draw(st.sampled_from(slots)), {"role": "assistant", "content": blocks})
    return "thinking_parts:thinking_only"


def _unknown_role(draw: st.DrawFn, msgs: list[Any]) -> str | None:
    """An agent's own record (hermes-agent #4715 ``session_meta``) anywhere in the list."""
    role = draw(st.sampled_from(UNKNOWN_ROLES))
    record: Message = {"role": role}
    _put(record, "content", draw(st.sampled_from([ABSENT, None, "note", {"session": "s1"}])))
    msgs.insert(draw(st.integers(0, len(msgs))), record)
    return f"unknown_role:{role}"


_INJECTORS: Final[dict[str, Callable[[st.DrawFn, list[Any]], Any]]] = {
    "kimi_ids": _kimi_ids,
    "reused_id": _reused_id,
    "suffix_trap": _suffix_trap,
    "id_collision_in_turn": _id_collision_in_turn,
    "replayed_call": _replayed_call,
    "duplicate_result": _duplicate_result,
    "unanswered_call": _unanswered_call,
    "displaced_result": _displaced_result,
    "missing_tool_call_id": _missing_tool_call_id,
    "orphan_result": _orphan_result,
    "codex_call_ids": _codex_call_ids,
    "malformed_arguments": _malformed_arguments,
    "junk_keys": _junk_keys,
    "junk_call_entries": _junk_call_entries,
    "bad_tool_calls": _bad_tool_calls,
    "thinking_parts": _thinking_parts,
    "split_assistant": _split_assistant,
    "empty_assistant": _empty_assistant,
    "unknown_role": _unknown_role,
}


@st.composite
def broken_transcripts(
    draw: st.DrawFn,
    kinds: Sequence[str] = DEFECTS,
    *,
    min_defects: int = 1,
    max_defects: int = 8,
    min_turns: int = 1,
    max_turns: int = 3,
    max_rounds: int = 3,
) -> Broken:
    """A clean transcript with defects drawn from ``kinds``.

    Half the examples are sparse (``min_defects..max_defects`` kinds drawn at random), half are
    dense (each kind 0-2 times). Defects are applied phase by phase in ``DEFECTS`` order (ids
    first, structure last), so each injector sees the shape it expects. A defect that does not
    apply to the drawn transcript (e.g. ``reused_id`` with one round) is skipped, unrecorded.
    """
    unknown = set(kinds) - set(DEFECTS)
    if unknown:
        raise ValueError(f"unknown defect kinds: {sorted(unknown)}")
    clean = draw(clean_transcripts(min_turns=min_turns, max_turns=max_turns, max_rounds=max_rounds))
    msgs: list[Any] = copy.deepcopy(clean)
    if draw(st.booleans()):  # sparse: a few defects, so each one is also seen on its own
        chosen = draw(
            st.lists(st.sampled_from(tuple(kinds)), min_size=min_defects, max_size=max_defects)
        )
    else:  # dense: every kind 0-2 times, so the combinations (and their order effects) show up
        counts = draw(st.lists(st.integers(0, 2), min_size=len(kinds), max_size=len(kinds)))
        chosen = [kind for kind, n in zip(kinds, counts, strict=True) for _ in range(n)]
    defects: list[str] = []
    ambiguous = False
    restorable: list[tuple[Any, dict[str, Any]]] = []
    for kind in sorted(chosen, key=DEFECTS.index):
        result = _INJECTORS[kind](draw, msgs)
        if isinstance(result, _Malformed):
            defects.append(result.label)
            ambiguous = ambiguous or result.ambiguous
            if result.expected is not None:
                restorable.append(result.expected)
        elif result is not None:
            defects.append(result)
    return Broken(msgs, clean, tuple(defects), ambiguous, tuple(restorable))


# ---------------------------------------------------------------------------------------------
# Arbitrary junk
# ---------------------------------------------------------------------------------------------

_JUNK_SCALARS: Final = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(_CHARS, max_size=12),
)

#: Any JSON value, 64-bit ints included (what orjson can parse and serialize back).
junk_values: Final[st.SearchStrategy[Any]] = st.recursive(
    _JUNK_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(_CHARS, max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)

_JUNK_IDS: Final = st.one_of(
    st.sampled_from(["a", "b", "a_d1", "a_d2", "", " a", "functions.bash:0"]), junk_values
)

#: Argument strings that stress a JSON repairer: partial, nested, fenced, huge nesting.
_JUNK_ARGUMENT_TEXTS: Final[tuple[str, ...]] = (
    "",
    "{",
    "}",
    '{"a": 1',
    '{"a": [1, 2',
    '{"a": "unterminated',
    '{"a": 1,}',
    "{'a': True, 'b': None}",
    '```json\n{"a": 1}\n```',
    '"{\\"a\\": 1}"',
    '"\\"{}\\""',
    '{"a": 1}{"b": 2}',
    "[]",
    "null",
    "NaN",
    '{"a": NaN}',
    '{"a": "\\ud800"}',
    "\x00",
    "[" * 3000,
    '{"a":' * 3000,
    "{" * 3000 + "}" * 3000,
    '{"a": [}',
    '{"a": ]',
    '{"a" 1}',
    '{"a": 1} trailing',
    "```",
    "``````",
)

_junk_arguments: Final = st.one_of(
    st.sampled_from(_JUNK_ARGUMENT_TEXTS), st.text(_CHARS, max_size=20), junk_values
)

_junk_functions: Final = st.one_of(
    junk_values,
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(st.sampled_from(TOOL_NAMES), junk_values),
            "arguments": _junk_arguments,
        },
    ),
)

_junk_calls: Final = st.one_of(
    junk_values,
    st.fixed_dictionaries(
        {},
        optional={
            "id": _JUNK_IDS,
            "type": st.one_of(st.just("function"), junk_values),
            "function": _junk_functions,
            "index": junk_values,
            # an agent's bookkeeping on a call (bookkeeping-keys, codex-call-ids)
            "call_id": _JUNK_IDS,
            "response_item_id": _JUNK_IDS,
            "extra_content": junk_values,
        },
    ),
)

_junk_contents: Final = st.one_of(
    junk_values,
    st.lists(st.one_of(text_parts(st.text(_CHARS, max_size=6)), junk_values), max_size=3),
)

_junk_messages: Final = st.fixed_dictionaries(
    {"role": st.one_of(st.sampled_from(["assistant", "tool", "user", "system"]), junk_values)},
    optional={
        "content": _junk_contents,
        "tool_calls": st.one_of(st.lists(_junk_calls, max_size=4), junk_values),
        "tool_call_id": _JUNK_IDS,
        "reasoning_content": junk_values,
        "name": junk_values,
        # an agent's bookkeeping on a message (bookkeeping-keys)
        "timestamp": junk_values,
        "_internal": junk_values,
    },
)


def arbitrary_messages(max_size: int = 8) -> st.SearchStrategy[list[Any]]:
    """A list of anything: JSON values, and message-shaped dicts with wrong types everywhere."""
    return st.lists(st.one_of(_junk_messages, _junk_messages, junk_values), max_size=max_size)


__all__ = [
    "ABSENT",
    "DEFECTS",
    "LOSSLESS_MALFORMATIONS",
    "MALFORMATIONS",
    "ORPHAN_MARK",
    "THINKING_MARK",
    "UNKNOWN_ROLES",
    "Broken",
    "arbitrary_messages",
    "argument_objects",
    "broken_transcripts",
    "clean_transcripts",
    "dump_arguments",
    "json_values",
    "junk_values",
    "make_call_id",
]


# ---------------------------------------------------------------------------------------------
# Request-level fields
# ---------------------------------------------------------------------------------------------

#: Models as clients and routers name them: bare, vendor-prefixed, a router's ``~`` alias and
#: ``:thinking`` variant, for every family a request-level refusal is on record for.
REQUEST_MODELS: Final[tuple[str | None, ...]] = (
    "deepseek-chat",
    "deepseek-v4-flash",
    "deepseek/deepseek-v4-pro",
    "~deepseek/deepseek-v4-flash-latest",
    "kimi-k2.5",
    "moonshotai/kimi-k2.6",
    "kimi-k3",
    "kimi-k2-0905-preview",
    "MiniMax-M3",
    "gemini-3.1-pro-preview",
    "google/gemini-3-flash-preview",
    "gemini-2.0-flash",
    "grok-4",
    "anthropic/claude-3.7-sonnet:thinking",
    "gpt-5",
    None,
)
#: The switches clients send for thinking mode (``None``: none).
THINKING_SWITCHES: Final[tuple[dict[str, Any] | None, ...]] = (
    None,
    {"thinking": {"type": "enabled"}},
    {"thinking": {"type": "disabled"}},
    {"thinking": {"type": "adaptive"}},
    {"reasoning": {"enabled": True}},
    {"reasoning": {"enabled": False}},
    {"reasoning": {"effort": "high"}},
    {"reasoning_effort": "high"},
    {"reasoning_effort": "none"},
    {"enable_thinking": True},
    {"chat_template_kwargs": {"thinking": False}},
    {"include_reasoning": True, "reasoning": {"enabled": True}},
)
_PARAMETERS: Final[tuple[Any, ...]] = (
    ABSENT,
    None,
    {},
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


@st.composite
def tool_definitions(draw: st.DrawFn) -> list[Message]:
    """0..4 function tools named from ``TOOL_NAMES`` (so names repeat), each with or without a
    parameter schema (absent, null, ``{}`` or a real one)."""
    tools: list[Message] = []
    for name in draw(st.lists(st.sampled_from(TOOL_NAMES[:4]), max_size=4)):
        function: Message = {"name": name}
        if draw(st.booleans()):
            function["description"] = f"the {name} tool"
        _put(function, "parameters", draw(st.sampled_from(_PARAMETERS)))
        tools.append({"type": "function", "function": function})
    return tools


@st.composite
def request_fields(draw: st.DrawFn) -> dict[str, Any]:
    """A request's top-level fields around its messages, as clients send them: a model name,
    maybe a thinking switch, ``tools`` (absent, ``[]``, ``null`` or definitions), a
    ``tool_choice`` (absent, ``auto``, ``none``, ``required`` or a named function) and a
    ``temperature`` (absent, 0, 0.6, 0.7, 1 or 1.0). Clean and refused shapes alike."""
    fields: dict[str, Any] = {}
    _put(fields, "model", draw(st.sampled_from(REQUEST_MODELS)) or ABSENT)
    switch = draw(st.sampled_from(THINKING_SWITCHES))
    if switch is not None:
        fields.update(switch)
    tools = draw(st.one_of(st.just(ABSENT), st.just([]), st.just(None), tool_definitions()))
    _put(fields, "tools", tools)
    names = [t["function"]["name"] for t in tools] if isinstance(tools, list) else []
    choices: list[Any] = [ABSENT, "auto", "none", "required"]
    choices += [{"type": "function", "function": {"name": name}} for name in names]
    _put(fields, "tool_choice", draw(st.sampled_from(choices)))
    _put(fields, "temperature", draw(st.sampled_from((ABSENT, 0, 0.6, 0.7, 1, 1.0))))
    return fields


@st.composite
def signed_transcripts(draw: st.DrawFn) -> list[Message]:
    """A clean transcript whose calls may carry Gemini thought signatures (some kept, some lost
    as a client that does not know them drops them)."""
    messages = draw(clean_transcripts(max_turns=2, max_rounds=2, max_calls=2))
    out: list[Message] = []
    for message in messages:
        calls = message.get("tool_calls")
        if isinstance(calls, list) and draw(st.booleans()):
            signed = {"extra_content": {"google": {"thought_signature": "Cq0BAb4+9v"}}}
            out.append({**message, "tool_calls": [{**calls[0], **signed}, *calls[1:]]})
        else:
            out.append(message)
    return out
