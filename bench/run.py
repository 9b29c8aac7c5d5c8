"""``make bench``: every benchmark in one run; writes bench/results/tmp/latest.md (and .png),
or the committed bench/results/latest.* with ``--record`` (``make bench RECORD=1``).

Sections, in order: the in-process sanitizer micro-benchmark (``bench.micro``), HTTP with wrk
(``bench.http``, optional peers from ``bench.peers``), the event-loop comparison
(``bench.loops``) and SSE streams (``bench.streams``). Each section starts and stops its own
servers; Ctrl-C or SIGTERM stops them too.

Run: ``.venv/bin/python -m bench.run [--quick] [--peers litellm] [--no-http] [--no-streams]
[--no-loops] [--rounds N] [--seconds S] [--sizes 100,500] [--concurrency 1,16,64] [--out DIR]``
(``make bench PEERS=litellm ARGS=--quick``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bench import http, loops, micro, peers, report, streams
from bench.payloads import SIZES
from bench.procs import handle_sigterm

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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run chatmend's benchmarks.")
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--no-http", action="store_true", help="skip wrk runs and event loops")
    parser.add_argument("--no-streams", action="store_true", help="skip the SSE benchmark")
    parser.add_argument("--no-loops", action="store_true", help="skip --loop asyncio/uvloop")
    parser.add_argument("--peers", default="", help="comma-separated peers to add: litellm")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--seconds", type=int, default=2, help="seconds per wrk run (default 2)")
    parser.add_argument(
        "--out",
        type=Path,
        default=RESULTS / "tmp",
        help="directory for latest.md and latest.png (default bench/results/tmp, not "
        "committed; the committed results: --record)",
    )
    parser.add_argument(
        "--record",
        action="store_const",
        const=RESULTS,
        dest="out",
        help="write the committed bench/results/latest.* (what docs/performance.md cites)",
    )
    parser.add_argument("--sizes", default="", help="comma-separated HTTP payload sizes")
    parser.add_argument("--concurrency", default="", help="comma-separated HTTP concurrencies")
    args = parser.parse_args(argv)
    handle_sigterm()
    peer_names = peers.parse(args.peers)
    rounds = 1 if args.quick else args.rounds
    seconds = 1 if args.quick else args.seconds

    started = datetime.datetime.now(datetime.UTC)
    # Before anything is written: the code measured, not the results this run produces.
    commit = _command("git", "rev-parse", "--short", "HEAD")
    changed = _command("git", "status", "--porcelain", "--", ".", ":!bench/results")
    dirty = " (uncommitted changes)" if changed not in ("", "?") else ""
    print("micro-benchmark ...")
    res = report.Results(
        micro.run(rounds=3 if args.quick else 9, target_ms=3.0 if args.quick else 15.0),
        peers=peer_names,
    )
    print(micro.table(res.micro_rows))

    if args.no_http:
        res.http_skipped = res.loops_skipped = "`--no-http`"
    elif shutil.which("wrk") is None:
        res.http_skipped = res.loops_skipped = "`wrk` is not installed"
    else:
        print("HTTP benchmark (wrk) ...")
        sizes = http.QUICK_SIZES if args.quick else SIZES
        concurrency = http.QUICK_CONCURRENCY if args.quick else http.CONCURRENCY
        res.http = http.run(
            sizes=tuple(int(n) for n in args.sizes.split(",")) if args.sizes else sizes,
            concurrency=(
                tuple(int(n) for n in args.concurrency.split(","))
                if args.concurrency
                else concurrency
            ),
            rounds=rounds,
            seconds=seconds,
            peers=peer_names,
        )
        print(http.throughput_table(res.http.rows))
        print(http.latency_table(res.http.rows))
        if args.no_loops:
            res.loops_skipped = "`--no-loops`"
        elif (reason := loops.skip_reason()) is not None:
            res.loops_skipped = reason
        else:
            print("event loops (wrk) ...")
            res.loops = loops.run(rounds=rounds, seconds=seconds)
            print(loops.table(res.loops))

    if args.no_streams:
        res.streams_skipped = "`--no-streams`"
    else:
        print("streams ...")
        res.streams = streams.run(
            streams.Params.quick() if args.quick else streams.Params(rounds=max(3, rounds))
        )
        print(streams.tables(res.streams))

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    png = out / "latest.png"
    has_png = report.plot(res, png)
    command = " ".join(["python -m bench.run", *(sys.argv[1:] if argv is None else argv)])
    header = f"""# chatmend benchmark results

- machine: {machine_line()}
- commit: `{commit}`{dirty}
- date: {started:%Y-%m-%d %H:%M} UTC
- command: `{command}` (run by `make bench`)"""
    text = report.markdown(res, header=header, rounds=rounds, seconds=seconds, has_png=has_png)
    (out / "latest.md").write_text(text)
    print(report.targets_table(report.targets(res)))
    print(f"wrote {out / 'latest.md'}" + (f" and {png}" if has_png else ""))


if __name__ == "__main__":
    main()
