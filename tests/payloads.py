"""Deterministic agent-transcript payloads for the tests and the benchmarks (``random.Random``, no
hypothesis).

``build(n, broken=...)`` returns a chat-completions request body whose ``messages`` has exactly
``n`` entries: a system prompt, user requests, assistant turns with 1-3 tool calls and their
results, and short assistant answers. Sizes are those of real coding-agent transcripts
(500 messages ~ 270 KB).

The *clean* variants are accepted by a strict provider as they stand (chatmend changes nothing),
in the shapes real agents send (``VARIANTS``): ``clean`` (tool-call turns with ``null`` content
or a short thought), ``clean-empty`` (``"content": ""`` on every tool-call turn, as LangChain and
many agents send it) and ``clean-kimi`` (``""`` and Kimi's ``functions.<name>:<n>`` ids, numbered
through the session). The *broken* variant is the same walk with a defect in roughly 5-10 % of
the turns: split assistant turns, ``tool_calls: []``, Kimi-style ids reused by later turns
(``functions.bash:0``), truncated or trailing-comma ``arguments``, and an agent's bookkeeping
keys (``timestamp`` on messages, a Responses ``call_id`` on calls).
"""

from __future__ import annotations

import random
import string
from typing import Any

import orjson

SIZES: tuple[int, ...] = (10, 100, 500, 2000)
#: The payload variants every benchmark measures, clean ones first.
VARIANTS: tuple[str, ...] = ("clean", "clean-empty", "clean-kimi", "broken")
SEED = 7

_TOOLS = ("bash", "read_file", "write_file", "grep", "list_dir")
_PROSE = (
    "the test fails because the fixture returns None when the cache is cold so we need to "
    "check the config loader and the retry path before patching the handler itself which "
    "also logs a warning about stale entries and an unclosed client session in teardown"
)
_WORDS = tuple(_PROSE.split())
_DEFECT_RATE = 0.08
_TURN_DEFECTS = ("split", "reused_id", "truncated", "trailing_comma")
_DEFECTS = (*_TURN_DEFECTS, "empty_tool_calls", "bookkeeping")


def _text(rng: random.Random, lo: int, hi: int) -> str:
    """Prose of ``lo``..``hi`` characters."""
    target = rng.randint(lo, hi)
    words: list[str] = []
    length = 0
    while length < target:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:target]


def _code(rng: random.Random, lo: int, hi: int) -> str:
    """Tool output: file listings, code lines, test logs."""
    target = rng.randint(lo, hi)
    lines: list[str] = []
    length = 0
    while length < target:
        kind = rng.random()
        if kind < 0.4:
            name = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 10)))
            line = f"    def {name}(self, value: int) -> str:  # line {rng.randint(1, 900)}"
        elif kind < 0.7:
            line = f"tests/test_{rng.choice(_WORDS)}.py::test_{rng.choice(_WORDS)} PASSED"
        else:
            line = f'        raise ValueError("bad {rng.choice(_WORDS)}: {{value!r}}")'
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:target]


def _arguments(rng: random.Random, tool: str) -> dict[str, Any]:
    path = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"
    if tool == "bash":
        return {"command": f"pytest -x -q tests/test_{rng.choice(_WORDS)}.py", "timeout": 120}
    if tool == "read_file":
        return {"path": path, "offset": rng.randint(0, 400), "limit": 200}
    if tool == "write_file":
        return {"path": path, "content": _code(rng, 150, 500)}
    if tool == "grep":
        return {"pattern": rng.choice(_WORDS), "path": "src", "ignore_case": rng.random() < 0.5}
    return {"path": path.rsplit("/", 1)[0], "recursive": False}


class _Builder:
    def __init__(self, n: int, broken: bool, seed: int, shape: str = "clean") -> None:
        self.n = n
        self.broken = broken
        #: ``clean``, ``clean-empty`` or ``clean-kimi`` (see ``VARIANTS``).
        self.shape = shape
        self.rng = random.Random(seed * 1_000_003 + n)
        self.messages: list[dict[str, Any]] = []
        self.next_id = 0
        self.defects: dict[str, int] = dict.fromkeys(_DEFECTS, 0)

    @property
    def left(self) -> int:
        return self.n - len(self.messages)

    @property
    def last_role(self) -> str | None:
        return self.messages[-1]["role"] if self.messages else None

    def defect(self) -> str | None:
        """The defect of the next tool turn, if any (the first tool turn always has one)."""
        if not self.broken:
            return None
        if sum(self.defects.values()) == 0:
            return "split" if self.left >= 4 else "trailing_comma"
        if self.rng.random() >= _DEFECT_RATE:
            return None
        return self.rng.choice(_TURN_DEFECTS)

    def user(self) -> None:
        message = {"role": "user", "content": _text(self.rng, 80, 400)}
        if self.broken and self.rng.random() < 0.2:
            message["timestamp"] = f"2026-11-30T10:{self.rng.randint(0, 59):02d}:00Z"
            self.defects["bookkeeping"] += 1
        self.messages.append(message)

    def answer(self) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": _text(self.rng, 60, 300)}
        # opencode-style clients send `tool_calls: []` on plain answers (answers are ~10 % of turns)
        if self.broken and self.rng.random() < 0.3:
            message["tool_calls"] = []
            self.defects["empty_tool_calls"] += 1
        self.messages.append(message)

    def tool_turn(self, calls: int) -> None:
        rng = self.rng
        defect = self.defect()
        if defect == "split" and self.left < calls + 2:
            defect = None
        tool_calls: list[dict[str, Any]] = []
        for _ in range(calls):
            tool = "bash" if defect == "reused_id" else rng.choice(_TOOLS)
            if defect == "reused_id":
                # Kimi numbers calls per turn, not per session: later turns reuse the ids
                call_id = f"functions.{tool}:{len(tool_calls)}"
            elif self.shape == "clean-kimi":
                call_id = f"functions.{tool}:{self.next_id}"
                self.next_id += 1
            else:
                call_id = f"call_{self.next_id:06d}_{rng.getrandbits(40):010x}"
                self.next_id += 1
            arguments = orjson.dumps(_arguments(rng, tool)).decode()
            tool_calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": tool, "arguments": arguments},
                }
            )
        if defect == "truncated":
            arguments = tool_calls[0]["function"]["arguments"]
            tool_calls[0]["function"]["arguments"] = arguments[: max(2, len(arguments) * 2 // 3)]
        elif defect == "trailing_comma":
            arguments = tool_calls[-1]["function"]["arguments"]
            tool_calls[-1]["function"]["arguments"] = arguments[:-1] + ",}"
        if defect is not None:
            self.defects[defect] += 1
        thought = _text(rng, 40, 200) if rng.random() < 0.5 else None
        if self.shape != "clean":
            thought = ""
        if defect == "split":
            self.messages.append({"role": "assistant", "content": thought or _text(rng, 40, 200)})
            self.messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        else:
            self.messages.append(
                {"role": "assistant", "content": thought, "tool_calls": tool_calls}
            )
        if self.broken and rng.random() < 0.1:
            # an agent's bookkeeping: a Responses call_id kept on the chat call
            tool_calls[0]["call_id"] = f"fc_{self.next_id:06d}"
            self.defects["bookkeeping"] += 1
        for tool_call in tool_calls:
            self.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": tool_call["id"],
                    "content": _code(rng, 150, 1000),
                }
            )

    def build(self) -> list[dict[str, Any]]:
        system = "You are a coding agent. " + _text(self.rng, 1500, 2500)
        self.messages.append({"role": "system", "content": system})
        self.user()
        while self.left > 0:
            if self.last_role == "assistant":  # an answer: the user speaks next
                self.user()
            elif self.left <= 2 or self.rng.random() < 0.1:
                self.answer()
            else:
                calls = min(self.rng.choice((1, 1, 1, 2, 2, 3)), self.left - 1)
                self.tool_turn(calls)
        return self.messages[: self.n]


def build_messages(
    n: int, *, broken: bool = False, seed: int = SEED, shape: str = "clean"
) -> list[dict[str, Any]]:
    """Exactly ``n`` messages of an agent transcript (``n`` >= 2)."""
    return _Builder(n, broken, seed, shape).build()


def build_variant(n: int, variant: str, *, seed: int = SEED) -> bytes:
    """The body of ``n`` messages of one of ``VARIANTS``."""
    if variant == "broken":
        return build(n, broken=True, seed=seed)
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}")
    return build(n, seed=seed, shape=variant)


def build(n: int, *, broken: bool = False, seed: int = SEED, shape: str = "clean") -> bytes:
    """A chat-completions request body with ``n`` messages."""
    payload = {
        "model": "deepseek-chat",
        "messages": build_messages(n, broken=broken, seed=seed, shape=shape),
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"The {name} tool.",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
            for name in _TOOLS
        ],
        "temperature": 0.2,
        "stream": False,
    }
    return orjson.dumps(payload)


def defect_counts(n: int, *, seed: int = SEED) -> dict[str, int]:
    """How many of each defect the broken payload of ``n`` messages carries."""
    builder = _Builder(n, True, seed)
    builder.build()
    return builder.defects


if __name__ == "__main__":
    for size in SIZES:
        for variant in VARIANTS:
            body = build_variant(size, variant)
            print(f"{size:5d} {variant:11s} {len(body) / 1024:8.1f} KB")
