"""In-process micro-benchmark of the sanitizer alone, against orjson parse + serialize.

For each payload size, clean and broken, one run measures interleaved round by round:

- ``baseline``: ``orjson.dumps(orjson.loads(body))``, the least any JSON-aware proxy pays;
- ``pipeline``: ``rules.providers.sanitize.sanitize_body(body, plan)`` under the default
  profile's plan (parse, the one walk, the rules it woken_by, serialize only if something changed);
- ``parse`` (``orjson.loads`` alone) and ``walk`` (``rules.chat.scan.scan`` on the parsed
messages):
  what a clean request costs.

Each subject is timed with ``time.perf_counter_ns`` over a loop calibrated to ~``target_ms``;
a round times every subject once; the figures are medians over the rounds, and the ratio
pipeline/baseline is the median of the per-round ratios (paired, so drift cancels).

Run: ``.venv/bin/python -m bench.micro [--rounds N] [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from rules.chat import scan
from rules.providers.planner import Plan, Planner
from rules.providers.sanitize import sanitize_body
from tests.payloads import SIZES, VARIANTS, build_variant


@dataclass(frozen=True, slots=True)
class MicroRow:
    messages: int
    variant: str
    size_bytes: int
    changes: int
    baseline_us: float
    pipeline_us: float
    #: Median of the per-round ratios pipeline / baseline.
    ratio: float
    #: ``parse`` and ``walk``: median µs of the body's parse alone and of the one walk of
    #: rules/chat/scan.py over its messages (the clean path's two costs).
    rule_us: dict[str, float]

    @property
    def pipeline_mb_s(self) -> float:
        return self.size_bytes / self.pipeline_us  # bytes per µs == MB/s

    @property
    def baseline_mb_s(self) -> float:
        return self.size_bytes / self.baseline_us

    def per_message(self, us: float) -> float:
        return us / self.messages


def _loop_ns(fn: Callable[[], object], loops: int) -> float:
    """Nanoseconds per call of ``fn``, over ``loops`` calls."""
    start = time.perf_counter_ns()
    for _ in range(loops):
        fn()
    return (time.perf_counter_ns() - start) / loops


def _calibrate(fn: Callable[[], object], target_ns: float) -> int:
    fn()  # warm up
    one = max(_loop_ns(fn, 1), _loop_ns(fn, 1), 1.0)
    return max(1, int(target_ns / one))


def measure(
    body: bytes,
    plan: Plan,
    *,
    rounds: int = 9,
    target_ms: float = 15.0,
) -> tuple[float, float, float, dict[str, float]]:
    """(baseline µs, pipeline µs, paired ratio, {part: µs}) for one body: the parts are the
    parse alone and the one walk of rules/chat/scan.py on the parsed messages."""
    messages: list[Any] = orjson.loads(body)["messages"]

    subjects: dict[str, Callable[[], object]] = {
        "baseline": lambda: orjson.dumps(orjson.loads(body)),
        "pipeline": lambda: sanitize_body(body, plan),
        "parse": lambda: orjson.loads(body),
        "walk": lambda: scan.scan(messages),
    }
    loops = {name: _calibrate(fn, target_ms * 1e6) for name, fn in subjects.items()}
    samples: dict[str, list[float]] = {name: [] for name in subjects}
    ratios: list[float] = []
    for _ in range(rounds):
        gc.collect()
        for name, fn in subjects.items():
            samples[name].append(_loop_ns(fn, loops[name]) / 1000)
        ratios.append(samples["pipeline"][-1] / samples["baseline"][-1])
    median = {name: statistics.median(values) for name, values in samples.items()}
    parts = {"parse": median["parse"], "walk": median["walk"]}
    return median["baseline"], median["pipeline"], statistics.median(ratios), parts


def run(
    sizes: Sequence[int] = SIZES, *, rounds: int = 9, target_ms: float = 15.0
) -> list[MicroRow]:
    """Every size and variant under the default profile's plan (what ``make run`` serves)."""
    plan = Planner().plan("deepseek-chat")
    rows: list[MicroRow] = []
    for size in sizes:
        for variant in VARIANTS:
            body = build_variant(size, variant)
            changes = len(sanitize_body(body, plan).changes)
            base, pipe, ratio, parts = measure(body, plan, rounds=rounds, target_ms=target_ms)
            rows.append(MicroRow(size, variant, len(body), changes, base, pipe, ratio, parts))
    return rows


def table(rows: Sequence[MicroRow]) -> str:
    """The pipeline against the baseline, with what the clean path spends: parse and walk."""
    lines = [
        "| messages | payload | KB | changes | orjson µs | sanitize µs | ratio | "
        "parse µs | walk µs | sanitize µs/msg | walk µs/msg |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines.extend(
        f"| {r.messages} | {r.variant} | {r.size_bytes / 1024:.1f} | {r.changes} "
        f"| {r.baseline_us:,.0f} | {r.pipeline_us:,.0f} | **{r.ratio:.2f}** "
        f"| {r.rule_us['parse']:,.0f} | {r.rule_us['walk']:,.0f} "
        f"| {r.per_message(r.pipeline_us):.2f} | {r.per_message(r.rule_us['walk']):.2f} |"
        for r in rows
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="3 rounds of ~3 ms, for a smoke run")
    args = parser.parse_args(argv)
    rounds, target = (3, 3.0) if args.quick else (args.rounds, 15.0)
    print(table(run(rounds=rounds, target_ms=target)))


if __name__ == "__main__":
    main()
