"""Growing sessions in process: an agent re-sends its whole history, one turn more each request.

The sessions and their workloads are the tests' (tests/sessions.py: each request the previous
one plus a turn; ``clean``, ``clean-empty``, ``clean-kimi``, ``stuck``, ``broken``; with
``--workload stuck-split``, issue 39's split turn that repeats a call). With ``--thinking``:
chat sessions in DeepSeek's thinking mode whose client drops ``reasoning_content``, each request
given every turn's reasoning by the stash (its keys read per request, as the server's lookup
reads them); Messages sessions with a signed thinking block in each assistant turn.

Subjects, timed over the whole session (every request in order) and interleaved round by round in
the same run: ``floor-json`` (``orjson.dumps(orjson.loads(body))``, the least a JSON-aware proxy
pays), ``relay`` (``bytes(body)``: a byte relay's copy, the limit), ``prefix`` (chatmend as the
server runs it: each session through a prefix cache of its own, proxy/relay/prefix.py, then
``rules.providers.sanitize.sanitize_body`` under the default profile's plan, the rules resuming
from the previous request's run, rules/engine/resume.py), ``prefix-whole`` (the same with the
rules run over the whole list) and ``chatmend`` (without the prefix cache: every request parsed
and walked whole). Each round starts with
nothing remembered (``rules.engine.known`` emptied, each session's cache empty). The ratio is
floor-json's time over the subject's (the median of the per-round ratios): above 1, chatmend is
faster than the floor, as the HTTP benchmark's throughput ratio reads.

Run: ``.venv/bin/python -m bench.sessions [--quick] [--turns N] [--sessions N]`` (``--quick``:
about a minute or less).
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

from proxy.config import PrefixConfig
from proxy.relay.prefix import PrefixCache
from proxy.stash.hooks import wanted_of
from rules.engine import known
from rules.engine.base import RequestFacts
from rules.engine.pipeline import Carried
from rules.providers.apis import APIS, CHAT_API, Api
from rules.providers.planner import Plan, Planner
from rules.providers.sanitize import Sanitized, sanitize_body
from tests.sessions import ESCAPED, SPACED, SPLIT, WORKLOADS, api_session, session


@dataclass(frozen=True, slots=True)
class SessionRow:
    workload: str
    sessions: int
    requests: int
    total_kb: float
    last_kb: float
    changes: int
    #: Median ms of the whole workload (every session, every request) per subject.
    ms: dict[str, float]
    #: floor-json's time over each subject's (median of the per-round ratios).
    ratio: dict[str, float]


#: What the server's stash lookup gives a request, from the body as parsed and the rules'
#: record of the session's last request when the body is that one's plus a turn.
Recall = Callable[[dict[str, Any], Carried | None], RequestFacts]
_SCOPE = "bench"


def stash_of(bodies: Sequence[Sequence[bytes]], plan: Plan) -> Recall:
    """A stash holding the reasoning of every turn of ``bodies`` (about 500 characters each, as
    DeepSeek's usually are): the facts it gives a request, its keys read as the server's lookup
    reads them (``Plan.recalling``, proxy/stash/hooks.py)."""
    recalling = plan.recalling()
    assert recalling is not None, "the plan recalls nothing"
    query, ctx = recalling
    store: dict[str, str] = {}
    for one in bodies:
        for key in query.keys(orjson.loads(one[-1]), ctx, _SCOPE, 0):
            store.setdefault(key, f"Turn {len(store)}: " + "the user wants the file read. " * 16)

    def recall(payload: dict[str, Any], carried: Carried | None) -> RequestFacts:
        keys, _ = wanted_of(recalling, payload, _SCOPE, carried)
        return RequestFacts(_SCOPE, {k: store[k] for k in keys if k in store}, wanted=keys)

    return recall


def _full(
    flat: Sequence[bytes], plan: Plan, api: Api = CHAT_API, recall: Recall | None = None
) -> list[Sanitized]:
    """Every request repaired alone (``prefix_cache: {enabled: false}``); nothing a round
    remembered of the strings is left for the next (``rules.engine.known``); ``recall``: each
    given what the stash holds for it."""
    known.forget()
    if recall is None:
        return [sanitize_body(b, plan, api.name) for b in flat]
    out: list[Sanitized] = []
    for body in flat:
        payload = orjson.loads(body)
        given = recall(payload, None)
        out.append(sanitize_body(body, plan, api.name, parsed=payload, given=given))
    return out


def _through_cache(
    bodies: Sequence[Sequence[bytes]],
    plan: Plan,
    *,
    resume: bool = True,
    api: Api = CHAT_API,
    recall: Recall | None = None,
) -> list[object]:
    """Every request repaired as the server does it (proxy/relay/prefix.py): each session through
    a cache of its own, empty when the session starts; ``resume``: the rules resume from the
    previous request's run (rules/engine/resume.py), else they run over the whole list;
    ``recall``: each given what the stash holds for it."""
    known.forget()
    out: list[object] = []
    for one in bodies:
        cache = PrefixCache(PrefixConfig(resume=resume))
        for body in one:
            reading = cache.read("session", api, body)
            payload = reading.payload
            given = None if recall is None or payload is None else recall(payload, reading.resume)
            out.append(cache.repair(reading, body, plan, api.name, parsed=payload, given=given))
    return out


def _time(fn: Callable[[], object], loops: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(loops):
        fn()
    return (time.perf_counter_ns() - start) / loops / 1e6


def measure(
    label: str,
    bodies: Sequence[Sequence[bytes]],
    plan: Plan,
    *,
    rounds: int,
    loops: int,
    api: Api = CHAT_API,
    recall: Recall | None = None,
) -> SessionRow:
    flat = [body for one in bodies for body in one]
    subjects: dict[str, Callable[[], object]] = {
        "floor-json": lambda: [orjson.dumps(orjson.loads(b)) for b in flat],
        "relay": lambda: [bytes(memoryview(b)) for b in flat],
        "chatmend": lambda: _full(flat, plan, api, recall),
        "prefix": lambda: _through_cache(bodies, plan, api=api, recall=recall),
        "prefix-whole": lambda: _through_cache(bodies, plan, resume=False, api=api, recall=recall),
    }
    for fn in subjects.values():
        fn()  # warm up
    samples: dict[str, list[float]] = {name: [] for name in subjects}
    ratios: dict[str, list[float]] = {name: [] for name in subjects}
    for _ in range(rounds):
        gc.collect()
        for name, fn in subjects.items():
            samples[name].append(_time(fn, loops))
        for name in subjects:
            ratios[name].append(samples["floor-json"][-1] / samples[name][-1])
    changes = sum(len(result.changes) for result in _full(flat, plan, api, recall))
    return SessionRow(
        label,
        len(bodies),
        len(flat),
        sum(len(b) for b in flat) / 1024,
        max(len(one[-1]) for one in bodies) / 1024,
        changes,
        {name: statistics.median(v) for name, v in samples.items()},
        {name: statistics.median(v) for name, v in ratios.items()},
    )


def run(
    *,
    workloads: Sequence[str] = (*WORKLOADS, *SPACED),
    sessions: int = 4,
    messages: int = 300,
    rounds: int = 5,
    loops: int = 1,
    api: str = "chat",
    thinking: bool = False,
) -> list[SessionRow]:
    """Every workload under the default profile's plan (what ``make run`` serves); ``api``:
    the sessions written for that API (``tests.sessions.api_session``: Claude Code's Messages,
    Codex's Responses; ``thinking``: Messages with a signed thinking block in each assistant
    turn), under the plan the default planner gives their model."""
    if api == "chat":
        model = "deepseek-reasoner" if thinking else "deepseek-chat"
        plan = Planner().plan(model)
        rows = []
        for workload in workloads:
            bodies = [session(messages, workload, seed=7 + i) for i in range(sessions)]
            if thinking:
                bodies = [[_with_model(body, model) for body in one] for one in bodies]
            recall = stash_of(bodies, plan) if thinking else None
            label = f"thinking: {workload}" if thinking else workload
            rows.append(measure(label, bodies, plan, rounds=rounds, loops=loops, recall=recall))
        return rows
    record = APIS[api]
    rows = []
    for workload in workloads:
        bodies = [
            api_session(api, messages, workload, seed=7 + i, thinking=thinking)
            for i in range(sessions)
        ]
        plan = Planner().for_api(record, orjson.loads(bodies[0][0]).get("model"))
        label = f"{api}{' thinking' if thinking else ''}: {workload}"
        rows.append(measure(label, bodies, plan, rounds=rounds, loops=loops, api=record))
    return rows


def _with_model(body: bytes, model: str) -> bytes:
    return orjson.dumps({**orjson.loads(body), "model": model})


def table(rows: Sequence[SessionRow]) -> str:
    lines = [
        "| session | sessions x requests | MB sent | last KB | changes | floor-json ms "
        "| chatmend ms | **chatmend / floor-json** | rules not resumed | without the prefix cache "
        "| relay / floor-json |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines.extend(
        f"| {r.workload} | {r.sessions} x {r.requests // r.sessions} | {r.total_kb / 1024:.1f} "
        f"| {r.last_kb:.0f} | {r.changes} | {r.ms['floor-json']:,.0f} | {r.ms['prefix']:,.0f} "
        f"| **{r.ratio['prefix']:.2f}** | {r.ratio['prefix-whole']:.2f} "
        f"| {r.ratio['chatmend']:.2f} | {r.ratio['relay']:.1f} |"
        for r in rows
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 sessions of 200 messages, 7 rounds")
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--messages", type=int, default=300, help="messages of the last request")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--workload",
        action="append",
        choices=(*WORKLOADS, *SPACED, *SPLIT, *ESCAPED),
        help="measure only this workload (repeatable; default: every one but stuck-split and the "
        "Go client's (-go), and "
        "for --api messages or responses clean, stuck and broken)",
    )
    parser.add_argument(
        "--api",
        choices=("chat", "messages", "responses"),
        default="chat",
        help="the sessions' API: chat (every workload), messages (Claude Code) or responses "
        "(Codex), these two over clean, stuck and broken sessions",
    )
    parser.add_argument(
        "--thinking",
        action="store_true",
        help="thinking sessions: chat in DeepSeek's thinking mode, the client dropping "
        "reasoning_content and the stash restoring every turn's; messages: Claude Code with "
        "extended thinking (a signed thinking block opens each assistant turn)",
    )
    args = parser.parse_args(argv)
    if args.thinking and args.api == "responses":
        parser.error("--thinking is for --api chat or messages")
    every = (*WORKLOADS, *SPACED) if args.api == "chat" else ("clean", "stuck", "broken")
    workloads = args.workload or every
    if args.quick:
        rows = run(
            workloads=workloads,
            sessions=3,
            messages=200,
            rounds=7,
            api=args.api,
            thinking=args.thinking,
        )
    else:
        rows = run(
            workloads=workloads,
            sessions=args.sessions,
            messages=args.messages,
            rounds=args.rounds,
            api=args.api,
            thinking=args.thinking,
        )
    print(table(rows))


if __name__ == "__main__":
    main()
