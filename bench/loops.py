"""Event-loop comparison: ``chatmend serve --loop asyncio`` against ``--loop uvloop``.

Two chatmend processes in front of the same fake upstream, measured with wrk exactly like
``bench.http`` (warm-up, then rounds with both interleaved); ratio = median of per-round
uvloop/asyncio req/s. Skipped (returns no rows) when ``chatmend serve --help`` has no
``--loop``, when uvloop is not installed, or without ``wrk``.

Run alone: ``.venv/bin/python -m bench.loops [--quick]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.http import Measured, measure, write_payloads, write_script
from bench.procs import chatmend_has_loop_flag, fleet, handle_sigterm, uvloop_available
from bench.servers import start_chatmend, start_fake

LOOPS: tuple[str, ...] = ("asyncio", "uvloop")
SIZES: tuple[int, ...] = (10, 500)
CONCURRENCY = 16


@dataclass(frozen=True, slots=True)
class LoopRow:
    messages: int
    variant: str
    concurrency: int
    measured: Measured

    @property
    def ratio(self) -> float:
        return self.measured.ratio("uvloop", "asyncio")


def skip_reason() -> str | None:
    if shutil.which("wrk") is None:
        return "`wrk` is not installed"
    if not chatmend_has_loop_flag():
        return "`chatmend serve --help` lists no `--loop` option"
    if not uvloop_available():
        return "uvloop is not installed"
    return None


def run(
    sizes: Sequence[int] = SIZES,
    concurrency: int = CONCURRENCY,
    *,
    rounds: int = 3,
    seconds: float = 2.0,
) -> list[LoopRow]:
    if skip_reason():
        return []
    rows: list[LoopRow] = []
    with tempfile.TemporaryDirectory(prefix="chatmend-loops-") as tmp_name, fleet() as servers:
        tmp = Path(tmp_name)
        upstream = start_fake(servers)
        urls = {loop: start_chatmend(servers, upstream, name=loop, loop=loop) for loop in LOOPS}
        script = write_script(tmp)
        for (size, variant), payload in write_payloads(tmp, sizes, ("clean", "broken")).items():
            measured = measure(urls, script, payload, concurrency, rounds=rounds, seconds=seconds)
            rows.append(LoopRow(size, variant, concurrency, measured))
            print(
                f"  loops {size} {rows[-1].variant} c={concurrency}: "
                f"uvloop/asyncio {rows[-1].ratio:.2f}",
                file=sys.stderr,
            )
    return rows


def table(rows: Sequence[LoopRow]) -> str:
    lines = [
        "| messages | payload | conc. | asyncio req/s | uvloop req/s | uvloop / asyncio "
        "| asyncio p50 / p99 ms | uvloop p50 / p99 ms |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        a, u = r.measured.median("asyncio"), r.measured.median("uvloop")
        lines.append(
            f"| {r.messages} | {r.variant} | {r.concurrency} | {a.rps:,.0f} | {u.rps:,.0f} "
            f"| **{r.ratio:.2f}** | {a.p50_ms:.2f} / {a.p99_ms:.2f} "
            f"| {u.p50_ms:.2f} / {u.p99_ms:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="chatmend --loop asyncio vs uvloop (wrk).")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=2)
    args = parser.parse_args(argv)
    handle_sigterm()
    reason = skip_reason()
    if reason:
        print(f"skipped: {reason}")
        return
    rows = run(rounds=1 if args.quick else args.rounds, seconds=1 if args.quick else args.seconds)
    print(table(rows))


if __name__ == "__main__":
    main()
