"""``make bench``: run the micro and HTTP benchmarks, write bench/results/latest.md (and .png).

Run: ``.venv/bin/python -m bench.run [--quick] [--no-http] [--rounds N] [--seconds S]``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from bench import http, micro
from bench.payloads import SIZES

RESULTS = Path(__file__).resolve().parent / "results"


def _command(*args: str) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def machine_line() -> str:
    return (
        f"{_command('uname', '-m')}, {os.cpu_count()} CPUs (nproc {_command('nproc')}), "
        f"Python {platform.python_version()} ({platform.python_implementation()})"
    )


def plot(
    micro_rows: Sequence[micro.MicroRow], http_rows: Sequence[http.HttpRow], path: Path
) -> bool:
    """Ratio vs payload size; False if matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = 2 if http_rows else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.5), squeeze=False)
    ax = axes[0][0]
    for variant in ("clean", "broken"):
        mrows = [r for r in micro_rows if r.variant == variant]
        ax.plot([r.messages for r in mrows], [r.ratio for r in mrows], marker="o", label=variant)
    ax.axhline(1.5, color="grey", linestyle="--", label="target (broken) 1.5x")
    ax.set(
        xscale="log",
        xlabel="messages",
        ylabel="sanitize_body / orjson loads+dumps",
        title="Sanitizer alone vs orjson round trip",
    )
    ax.legend()
    if http_rows:
        ax = axes[0][1]
        for variant in ("clean", "broken"):
            for conc in sorted({r.concurrency for r in http_rows}):
                rows = [r for r in http_rows if r.variant == variant and r.concurrency == conc]
                ax.plot(
                    [r.messages for r in rows],
                    [r.ratio for r in rows],
                    marker="o",
                    linestyle="-" if variant == "clean" else ":",
                    label=f"{variant}, c={conc}",
                )
        ax.axhline(0.95, color="grey", linestyle="--", label="target clean 0.95")
        ax.axhline(0.80, color="grey", linestyle=":", label="target broken 0.80")
        ax.set(
            xscale="log",
            xlabel="messages",
            ylabel="chatmend req/s / floor-json req/s",
            title="HTTP throughput vs floor-json (wrk)",
        )
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run chatmend's benchmarks.")
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--no-http", action="store_true", help="micro-benchmark only")
    parser.add_argument("--rounds", type=int, default=3, help="HTTP rounds (default 3)")
    parser.add_argument("--seconds", type=int, default=2, help="seconds per wrk run (default 2)")
    args = parser.parse_args(argv)

    started = datetime.datetime.now(datetime.UTC)
    print("micro-benchmark ...")
    micro_rows = micro.run(rounds=3 if args.quick else 9, target_ms=3.0 if args.quick else 15.0)
    micro_md = micro.table(micro_rows)
    print(micro_md)

    http_rows: list[http.HttpRow] = []
    if args.no_http:
        http_md = "_Skipped (`--no-http`)._"
    elif shutil.which("wrk") is None:
        http_md = "_Skipped: `wrk` is not installed._"
    else:
        print("HTTP benchmark (wrk) ...")
        http_rows = http.run(
            sizes=(10, 500) if args.quick else SIZES,
            concurrency=(1, 4) if args.quick else http.CONCURRENCY,
            rounds=1 if args.quick else args.rounds,
            seconds=1 if args.quick else args.seconds,
        )
        http_md = http.table(http_rows)
        print(http_md)

    RESULTS.mkdir(parents=True, exist_ok=True)
    png = RESULTS / "latest.png"
    has_png = plot(micro_rows, http_rows, png)
    commit = _command("git", "rev-parse", "--short", "HEAD")
    dirty = " (uncommitted changes)" if _command("git", "status", "--porcelain") else ""
    rounds = 1 if args.quick else args.rounds
    seconds = 1 if args.quick else args.seconds
    text = f"""# chatmend benchmark results

- machine: {machine_line()}
- commit: `{commit}`{dirty}
- date: {started:%Y-%m-%d %H:%M} UTC
- command: `make bench`{" (--quick)" if args.quick else ""}

## Sanitizer alone (in process)

`sanitize_body(body, default steps)` against `orjson.dumps(orjson.loads(body))` on the same
payload, interleaved round by round; ratio = median of the per-round ratios (target for broken
500/2000-message payloads: at most 1.5). A clean payload is parsed and checked but not
re-serialized (the original bytes are forwarded).

{micro_md}

## HTTP on loopback (wrk)

chatmend (default config, logs to /dev/null) and `floor-json` (aiohttp relay with one orjson
parse + serialize) in front of the same fake upstream; one wrk thread, {rounds} interleaved
round(s) of {seconds} s per target; ratio = median of per-round chatmend/floor-json req/s
(targets: clean at least 0.95, broken at least 0.80).

{http_md}
"""
    if has_png:
        text += "\n![ratio vs payload size](latest.png)\n"
    (RESULTS / "latest.md").write_text(text)
    print(f"wrote {RESULTS / 'latest.md'}" + (f" and {png}" if has_png else ""))


if __name__ == "__main__":
    main()
