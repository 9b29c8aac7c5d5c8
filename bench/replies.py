"""The reply rules' cost and bound, in process (``make bench`` runs it; alone:
``.venv/bin/python -m bench.replies [--rounds N]``).

- **Per event**: one SSE stream of ``events`` chat chunks (a few characters each) through
  ``ReplyStream`` under the deepseek profile's reply plan, for a request that declared a tool:
  clean text (no marker: every event passes as its bytes), and the same text ending in a
  DSML tool call (one block held, then converted). Per event, against one ``orjson.loads`` of
  each event's data (``parse only``: what the reasoning stash's observer pays at least);
  medians over rounds.
- **Hold-back**: the most characters of content the rules hold at once (fed minus let go), over
  every case of tests/fixtures/replies/text-tool-calls.json fed one character per event under
  ``chat-template`` (every format armed): for the negative cases (text that is not a call) and
  for prose around a marker's first characters. A call block is held until it ends (at most
  ``max_block``); text is held at most one marker's length.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from proxy.relay.replies import ReplyStream
from rules.providers.planner import Planner
from rules.replies.base import Step
from rules.replies.pipeline import ReplyRun
from tools.emulate.text_calls import WRITERS

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "replies"
TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
REQUEST = {"tools": [TOOL]}


def _event(content: str) -> bytes:
    chunk = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def stream(events: int, *, call: bool) -> list[bytes]:
    out = [_event(f"tok{i} ") for i in range(events)]
    if call:
        text = WRITERS["deepseek-dsml"]("read_file", {"path": "a.txt"}, "")
        out += [_event(text[at : at + 5]) for at in range(0, len(text), 5)]
    return [*out, b"data: [DONE]\n\n"]


def _per_event(chunks: list[bytes], run: ReplyRun | None) -> float:
    started = time.perf_counter()
    if run is None:
        for chunk in chunks:
            if chunk.startswith(b"data: {"):
                orjson.loads(chunk[6:])
    else:
        rewriter = ReplyStream(run)
        for chunk in chunks:
            rewriter.feed(chunk)
        rewriter.finish()
    return (time.perf_counter() - started) / len(chunks) * 1e6


@dataclass(frozen=True, slots=True)
class Costs:
    baseline_us: float
    clean_us: float
    with_call_us: float


def costs(events: int, rounds: int) -> Costs:
    plan = Planner().replies("deepseek")
    clean, called = stream(events, call=False), stream(events, call=True)
    base, plain, call = [], [], []
    for _ in range(rounds):
        base.append(_per_event(clean, None))
        plain.append(_per_event(clean, ReplyRun(plan.steps, REQUEST)))
        call.append(_per_event(called, ReplyRun(plan.steps, REQUEST)))
    return Costs(statistics.median(base), statistics.median(plain), statistics.median(call))


def held(case: dict[str, Any], tools: list[dict[str, Any]]) -> int:
    """The most content characters held at once, the case fed one character per step."""
    plan = Planner().replies("chat-template")
    pipe = ReplyRun(plan.steps, {"tools": tools}).choice(0)
    out = most = 0
    for fed, char in enumerate(case["text"], 1):
        for step in pipe.feed(Step({"content": char})):
            out += len(step.delta.get("content") or "")
        most = max(most, fed - out)
    return most


def holds() -> dict[str, int]:
    data = json.loads((FIXTURE / "text-tool-calls.json").read_text())
    negative = [c for c in data["cases"] if "why" in c]
    return {
        "negative cases": len(negative),
        "most held (negatives)": max(held(c, data["tools"]) for c in negative),
        "most held (prose with '<' and '[')": held(
            {"text": "if a < b and list[0] [TOOL or <tool_ then <\uff5c ok"}, data["tools"]
        ),
    }


def table(events: int = 5000, rounds: int = 7) -> str:
    """The per-event costs and the hold-back bound, as markdown."""
    found = costs(events, rounds)
    lines = [
        f"Reply rules per SSE event ({events} events, median of {rounds} rounds, in process):",
        "",
        "| stream | µs per event | ratio to parse only |",
        "|---|---:|---:|",
        f"| parse only (one orjson.loads per event) | {found.baseline_us:.2f} | 1.00 |",
    ]
    for name, value in (("clean text", found.clean_us), ("text + DSML call", found.with_call_us)):
        lines.append(f"| {name} | {value:.2f} | {value / found.baseline_us:.2f} |")
    lines += ["", "Hold-back (content characters held at once, fed one character per event):", ""]
    lines += [f"- {name}: {value}" for name, value in holds().items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--events", type=int, default=5000)
    args = parser.parse_args(argv)
    print(table(args.events, args.rounds))


if __name__ == "__main__":
    main()
