"""In-process micro-benchmark of the sanitizer alone, against orjson parse + serialize.

For each payload size, clean and broken, one run measures interleaved round by round:

- ``baseline``: ``orjson.dumps(orjson.loads(body))``, the least any JSON-aware proxy pays;
- ``pipeline``: ``proxy.sanitize.sanitize_body(body, steps)`` with the default steps (parse,
  the rules, serialize only if something changed);
- each rule alone: ``rule.apply(messages, ctx)`` on the already parsed messages (rules never
  mutate their input, so one parsed list serves every call).

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

from bench.payloads import SIZES, build
from proxy.sanitize import sanitize_body
from rules import RULES, Rule, RuleContext, default_steps, lone_surrogates, memo


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
    #: Rule name -> median µs per call of that rule alone.
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
    steps: Sequence[tuple[Rule, RuleContext]],
    *,
    rounds: int = 9,
    target_ms: float = 15.0,
) -> tuple[float, float, float, dict[str, float]]:
    """(baseline µs, pipeline µs, paired ratio, {rule: µs}) for one body."""
    messages: list[Any] = orjson.loads(body)["messages"]

    def baseline() -> object:
        return orjson.dumps(orjson.loads(body))

    def pipeline() -> object:
        return sanitize_body(body, steps)

    def rule_alone(rule: Rule, ctx: RuleContext) -> Callable[[], object]:
        def once() -> object:
            memo.clear()  # each rule alone pays for its prescan, shared ones included
            return rule.apply(messages, ctx)

        return once

    subjects: dict[str, Callable[[], object]] = {"baseline": baseline, "pipeline": pipeline}
    for rule, ctx in steps:
        if rule.name == lone_surrogates.NAME:
            continue  # sanitize_body skips it for bodies orjson reads: they cannot hold one
        subjects[rule.name] = rule_alone(rule, ctx)
    loops = {name: _calibrate(fn, target_ms * 1e6) for name, fn in subjects.items()}
    samples: dict[str, list[float]] = {name: [] for name in subjects}
    ratios: list[float] = []
    for _ in range(rounds):
        gc.collect()
        for name, fn in subjects.items():
            samples[name].append(_loop_ns(fn, loops[name]) / 1000)
        ratios.append(samples["pipeline"][-1] / samples["baseline"][-1])
    median = {name: statistics.median(values) for name, values in samples.items()}
    rule_us = {rule.name: median[rule.name] for rule, _ in steps if rule.name in median}
    return median["baseline"], median["pipeline"], statistics.median(ratios), rule_us


def run(
    sizes: Sequence[int] = SIZES, *, rounds: int = 9, target_ms: float = 15.0
) -> list[MicroRow]:
    steps = default_steps(RULES)
    rows: list[MicroRow] = []
    for size in sizes:
        for broken in (False, True):
            body = build(size, broken=broken)
            changes = len(sanitize_body(body, steps).changes)
            base, pipe, ratio, rule_us = measure(body, steps, rounds=rounds, target_ms=target_ms)
            variant = "broken" if broken else "clean"
            rows.append(MicroRow(size, variant, len(body), changes, base, pipe, ratio, rule_us))
    return rows


def table(rows: Sequence[MicroRow]) -> str:
    """Two markdown tables: the pipeline against the baseline, and µs/message per rule."""
    lines = [
        "| messages | payload | KB | changes | orjson µs | sanitize µs | ratio | "
        "orjson MB/s | sanitize MB/s | sanitize µs/msg |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines.extend(
        f"| {r.messages} | {r.variant} | {r.size_bytes / 1024:.1f} | {r.changes} "
        f"| {r.baseline_us:,.0f} | {r.pipeline_us:,.0f} | **{r.ratio:.2f}** "
        f"| {r.baseline_mb_s:.0f} | {r.pipeline_mb_s:.0f} "
        f"| {r.per_message(r.pipeline_us):.2f} |"
        for r in rows
    )
    names = list(rows[0].rule_us) if rows else []
    lines += [
        "",
        "Each rule alone on the parsed messages, µs per message (median). Alone, each rule pays"
        " its own prescan; in the pipeline the four pairing rules share one (rules/memo.py), so"
        " the sum overstates the pipeline's cost. `lone-surrogates` is not listed: the proxy"
        " skips it for bodies orjson reads, which cannot hold a lone surrogate.",
        "",
        "| messages | payload | " + " | ".join(f"`{n}`" for n in names) + " | sum of rules |",
        "|---:|---|" + "---:|" * (len(names) + 1),
    ]
    for r in rows:
        cells = " | ".join(f"{r.per_message(r.rule_us[n]):.3f}" for n in names)
        total = r.per_message(sum(r.rule_us.values()))
        lines.append(f"| {r.messages} | {r.variant} | {cells} | {total:.3f} |")
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
