"""``make bench``: every benchmark in one run; writes latest.md (and .png) to bench/results/tmp/
(not committed), or to bench/results/ (the committed run) only with ``--save``.

Sections, in order: the in-process sanitizer micro-benchmark (``bench.micro``), growing
sessions in process (``bench.sessions``: clean, one early defect, broken every fourth turn,
against floor-json and a byte relay in the same run), HTTP with wrk
(``bench.http``, optional peers from ``bench.peers``), the event-loop comparison
(``bench.loops``) and SSE streams (``bench.streams``). Each section starts and stops its own
servers; Ctrl-C or SIGTERM stops them too.

Run: ``.venv/bin/python -m bench.run [--quick] [--peers litellm] [--no-http] [--no-streams]
[--no-loops] [--no-sessions] [--rounds N] [--seconds S] [--sizes 100,500] [--concurrency 1,16,64]
[--out DIR] [--save]`` (``make bench PEERS=litellm ARGS=--quick``; ``make bench SAVE=1`` writes
the committed results).
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

from bench import http, http_sessions, loops, micro, peers, replies, report, sessions, streams
from bench.procs import handle_sigterm
from tests.payloads import SIZES

RESULTS = Path(__file__).resolve().parent / "results"
#: Where a run writes unless asked to replace the committed results (``--save``); git ignores it.
SCRATCH = RESULTS / "tmp"


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
    parser.add_argument("--no-sessions", action="store_true", help="skip growing sessions")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"directory for latest.md and latest.png (default {SCRATCH}; {RESULTS} with --save)",
    )
    parser.add_argument(
        "--save", action="store_true", help=f"write the committed results in {RESULTS}"
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
    if not args.no_sessions:
        print("growing sessions ...")
        session_rows = (
            sessions.run(sessions=3, messages=200, rounds=3)
            if args.quick
            else sessions.run(sessions=8, messages=300, rounds=5)
        )
        session_table = sessions.table(session_rows)
        print(session_table)
    else:
        session_table = ""

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
        if not args.no_sessions:
            print("growing sessions over HTTP (wrk) ...")
            rows = (
                http_sessions.run(sessions=4, messages=150, rounds=2, concurrency=4)
                if args.quick
                else http_sessions.run(peers=peer_names)
            )
            session_table += (
                "\n\nOver HTTP (`python -m bench.http_sessions`: the sessions interleaved step by "
                "step, wrk at one connection per session; ratios of req/s):\n\n"
                + http_sessions.table(rows)
            )
            print(http_sessions.table(rows))
        if args.no_loops:
            res.loops_skipped = "`--no-loops`"
        elif (reason := loops.skip_reason()) is not None:
            res.loops_skipped = reason
        else:
            print("event loops (wrk) ...")
            res.loops = loops.run(rounds=rounds, seconds=seconds)
            print(loops.table(res.loops))

    replies_table = ""
    if args.no_streams:
        res.streams_skipped = "`--no-streams`"
    else:
        print("streams ...")
        res.streams = streams.run(
            streams.Params.quick() if args.quick else streams.Params(rounds=max(3, rounds))
        )
        print(streams.tables(res.streams))
        print("reply rules ...")
        replies_table = replies.table(rounds=3 if args.quick else 7)
        print(replies_table)

    out: Path = args.out if args.out is not None else RESULTS if args.save else SCRATCH
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
    if session_table:
        text += (
            "\n## Growing sessions (in process, `python -m bench.sessions`)\n\n"
            "Each request is the previous one plus a turn; ratio = floor-json time / chatmend "
            "time over the whole workload (above 1: faster than the floor).\n\n"
            f"{session_table}\n"
        )
    if replies_table:
        text += f"\n## Reply rules (`python -m bench.replies`)\n\n{replies_table}\n"
    (out / "latest.md").write_text(text)
    print(report.targets_table(report.targets(res)))
    print(f"wrote {out / 'latest.md'}" + (f" and {png}" if has_png else ""))


if __name__ == "__main__":
    main()
