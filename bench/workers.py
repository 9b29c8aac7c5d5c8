"""What operating features cost or give: ``--workers 2`` and a config with routes.

Three chatmend processes in front of the same fake upstream, measured with wrk exactly like
``bench.http`` (warm-up, then rounds with all targets interleaved):

- ``one``: ``chatmend serve`` (one process), the baseline;
- ``two``: ``chatmend serve --workers 2`` (two processes sharing the port);
- ``routes``: one process whose config has eight named routes (none matches the benchmark's
  ``/v1/chat/completions``: every prefix is tried before the default route, the worst case)
  and the default route holding the upstream key behind a client token (the token is
  checked, the key set, on every request).

Ratios are medians of per-round req/s ratios against ``one``, in the same run. On a 2-core
machine wrk itself needs a core, so ``two`` shows what a second process gains while sharing
the machine with its load generator, not a clean 2x.

Run: ``.venv/bin/python -m bench.workers [--quick]`` (not part of ``make test``; needs wrk).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.http import Measured, measure, write_payloads, write_script
from bench.procs import fleet, free_port, handle_sigterm, venv_bin
from bench.servers import API_KEY, start_chatmend, start_fake

SIZES: tuple[int, ...] = (10, 500)
CONCURRENCY = 32
TARGETS = ("one", "two", "routes")


@dataclass(frozen=True, slots=True)
class WorkersRow:
    messages: int
    variant: str
    concurrency: int
    measured: Measured


def routes_config(tmp: Path, upstream: str) -> Path:
    path = tmp / "routes.yaml"
    routes = {f"r{i}": {"prefix": f"/tenant-{i}", "upstream": {"url": upstream}} for i in range(8)}
    config = {
        "upstream": {"url": upstream, "api_key_env": "BENCH_UPSTREAM_KEY"},
        "client_tokens_env": "BENCH_CLIENT_TOKENS",
        "routes": routes,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def run(
    sizes: Sequence[int] = SIZES,
    concurrency: int = CONCURRENCY,
    *,
    rounds: int = 3,
    seconds: float = 2.0,
) -> list[WorkersRow]:
    rows: list[WorkersRow] = []
    with tempfile.TemporaryDirectory(prefix="chatmend-workers-") as tmp_name, fleet() as servers:
        tmp = Path(tmp_name)
        upstream = start_fake(servers)
        urls = {
            "one": start_chatmend(servers, upstream, name="one"),
            "two": start_chatmend(servers, upstream, name="two", extra=("--workers", "2")),
        }
        port = free_port()
        command = [venv_bin("chatmend"), "serve", "--config", str(routes_config(tmp, upstream))]
        env = {"BENCH_UPSTREAM_KEY": "sk-held-by-chatmend", "BENCH_CLIENT_TOKENS": API_KEY}
        urls["routes"] = servers.start("routes", [*command, "--port", str(port)], port, env=env)
        script = write_script(tmp)
        for (size, variant), payload in write_payloads(tmp, sizes, ("clean", "broken")).items():
            measured = measure(urls, script, payload, concurrency, rounds=rounds, seconds=seconds)
            rows.append(WorkersRow(size, variant, concurrency, measured))
            print(
                f"  workers {size} {rows[-1].variant} c={concurrency}: "
                f"two/one {measured.ratio('two', 'one'):.2f}, "
                f"routes/one {measured.ratio('routes', 'one'):.2f}",
                file=sys.stderr,
            )
    return rows


def table(rows: Sequence[WorkersRow]) -> str:
    lines = [
        "| messages | payload | conc. | one req/s | two req/s | **two / one** | routes req/s "
        "| **routes / one** |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        one, two, routes = (r.measured.median(t) for t in TARGETS)
        lines.append(
            f"| {r.messages} | {r.variant} | {r.concurrency} | {one.rps:,.0f} | {two.rps:,.0f} "
            f"| **{r.measured.ratio('two', 'one'):.2f}** | {routes.rps:,.0f} "
            f"| **{r.measured.ratio('routes', 'one'):.2f}** |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="chatmend --workers 2 and routes vs one (wrk).")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=2)
    args = parser.parse_args(argv)
    handle_sigterm()
    if shutil.which("wrk") is None:
        print("skipped: `wrk` is not installed")
        return
    rows = run(rounds=1 if args.quick else args.rounds, seconds=1 if args.quick else args.seconds)
    print(table(rows))


if __name__ == "__main__":
    main()
