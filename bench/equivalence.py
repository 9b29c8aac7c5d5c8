"""Byte-for-byte behaviour record: every built-in profile x every API x a corpus of bodies.

``python -m bench.equivalence --write FILE`` runs ``rules.providers.sanitize.sanitize_body`` (plans
from ``rules.providers.planner.Planner``, contract checks on) over the corpus and writes, per case,
the sha256 of the body it returns, its changes ``(rule, index, action, detail)``, why it was
skipped, the contract's violations and the rules that failed. ``--check FILE`` runs the same corpus
and prints every case whose record differs (exit status 1 if any does): a reorganization that keeps
behaviour reports ``0 differences``.

The corpus: ``tests.payloads`` variants at 10/100/500 messages with 3 seeds, the tests' broken and
clean transcripts (tests/transcripts.py, tests/client_shapes.py), the Messages sessions of
tests/anthropic_bodies.py, the Responses output items of tests/fake_responses.py, and every case
input of the rule fixtures under tests/fixtures/. Each body's list goes to each API under that
API's field (``messages`` or ``input``), so every profile meets every shape under every API.

Only ``sanitize_body``, ``Planner`` and ``PROFILES`` are imported from the product, so the record
survives any reshaping behind them; cases are keyed by what they are (fixture rule name and case
number, not file path).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests import payloads

ROOT = Path(__file__).resolve().parent.parent
APIS = {"chat": "messages", "responses": "input", "messages": "messages"}
SEEDS = (7, 11, 13)
SIZES = (10, 100, 500)

Case = tuple[str, dict[str, Any], list[Any]]


def _split(body: dict[str, Any]) -> tuple[dict[str, Any], list[Any]] | None:
    for field in ("messages", "input"):
        items = body.get(field)
        if isinstance(items, list):
            return {k: v for k, v in body.items() if k != field}, items
    return None


def _from_body(label: str, body: Any) -> Iterator[Case]:
    if isinstance(body, bytes):
        body = json.loads(body)
    if isinstance(body, dict):
        split = _split(body)
        if split is not None:
            yield label, split[0], split[1]
    elif isinstance(body, list):
        yield label, {"model": "m"}, body


def corpus() -> Iterator[Case]:
    """Every case: a label, the request without its list, the list."""
    sys.path.insert(0, str(ROOT))
    for size in SIZES:
        for variant in payloads.VARIANTS:
            for seed in SEEDS:
                raw = payloads.build_variant(size, variant, seed=seed)
                yield from _from_body(f"payloads:{variant}:{size}:{seed}", raw)
    from tests import anthropic_bodies, client_shapes, fake_responses, transcripts

    for name, messages in sorted(transcripts.BROKEN.items()):
        yield from _from_body(f"transcripts:{name}", messages)
    yield from _from_body("transcripts:clean", transcripts.CLEAN_BODY)
    for name, raw in sorted(client_shapes.bodies().items()):
        yield from _from_body(f"client_shapes:{name}", raw)
    yield from _from_body("anthropic_bodies:clean", anthropic_bodies.clean_session())
    yield from _from_body("anthropic_bodies:broken", anthropic_bodies.broken_session())
    output = fake_responses.response_object("gpt-5")["output"]
    yield from _from_body("fake_responses:output", output)
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*.json")):
        fixture = json.loads(path.read_text())
        for number, case in enumerate(fixture.get("cases", [])):
            if "input" not in case:
                continue  # not a request's list: the reply rules' cases (tests/fixtures/replies)
            request = dict(case.get("request") or {"model": "m"})
            yield f"fixture:{fixture.get('rule')}:{number}", request, case["input"]


def _digest(result: Any) -> dict[str, Any]:
    return {
        "body": hashlib.sha256(result.body).hexdigest(),
        "changes": [[c.rule, c.index, c.action, c.detail] for c in result.changes],
        "skipped": result.skipped,
        "profile": result.profile,
        "violations": [[v.code, v.index, v.message, v.status] for v in result.violations],
        "failures": sorted(f.rule for f in result.failures),
    }


def record() -> dict[str, Any]:
    from rules.providers.planner import Planner
    from rules.providers.profiles import PROFILES
    from rules.providers.sanitize import sanitize_body

    planners = {name: Planner(default=name, verify=True) for name in sorted(PROFILES)}
    cases = list(corpus())
    out: dict[str, Any] = {}
    for label, request, items in cases:
        for api, field in APIS.items():
            raw = json.dumps({**request, field: items}).encode()
            for name, planner in planners.items():
                key = f"{name}|{api}|{label}"
                if key in out:
                    raise SystemExit(f"duplicate case {key}")
                out[key] = json.loads(
                    json.dumps(_digest(sanitize_body(raw, planner, api)), default=repr)
                )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="FILE")
    group.add_argument("--check", metavar="FILE")
    args = parser.parse_args(argv)
    now = record()
    if args.write:
        Path(args.write).write_text(json.dumps(now, sort_keys=True))
        print(f"{len(now)} cases written to {args.write}")
        return 0
    before = json.loads(Path(args.check).read_text())
    differing = sorted(key for key in before.keys() | now.keys() if before.get(key) != now.get(key))
    for key in differing[:50]:
        print(f"{key}\n  before: {before.get(key)}\n  now:    {now.get(key)}")
    print(f"{len(now)} cases, {len(differing)} differences")
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
