"""What observing responses for the reasoning stash costs the relay, on one long SSE stream.

A fake thinking-mode upstream streams ``--chunks`` SSE events (reasoning deltas, then a tool
call in pieces, ``finish_reason``, ``[DONE]``), each written separately, as fast as it can.
Two chatmend apps on loopback relay it, identical but for ``reasoning.store``: ``memory`` (an
observer reads every chunk after it is written, and stores the turn) and ``off`` (no observer
object at all). A client reads the whole stream through each, the two interleaved round by
round; the figures are medians over the rounds: the time per event through each, the added
microseconds per event, and the ratio observed/plain (per-round ratios, paired, so drift
cancels). It also times the observer alone (``feed`` over the same events, no I/O), and the
Anthropic Messages observer alone over a ``--chunks``-event Messages stream (thinking deltas,
a signature, text deltas, a ``tool_use`` input in pieces: the stream is read to its end).

Run: ``.venv/bin/python -m bench.observe [--chunks 5000] [--rounds 15]``, or
``make bench-observe``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time
from typing import Any

import orjson
from aiohttp import ClientSession, web

from proxy.config import parse_config
from proxy.observe.log import configure_logging
from proxy.server.app import create_app
from proxy.stash.messages_observer import MessagesObserver
from proxy.stash.observer import BodyObserver, ResponseObserver
from tools.emulate.messages import sse

REASONING_EVENT_SHARE = 0.9  # the rest: content-less deltas, the tool call, the finish


def events(count: int) -> list[bytes]:
    """``count`` SSE events of a DeepSeek-style thinking turn that ends in one tool call."""

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "deepseek-v4-pro",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + orjson.dumps(body) + b"\n\n"

    thinking = int(count * REASONING_EVENT_SHARE)
    out = [event({"role": "assistant", "content": None})]
    out += [
        event({"reasoning_content": f"step {n}: consider the file ", "content": None})
        for n in range(thinking)
    ]
    call = {"index": 0, "id": "call_bench", "type": "function", "function": {"name": "ls"}}
    out.append(event({"tool_calls": [{**call, "function": {"name": "ls", "arguments": ""}}]}))
    pieces = max(count - len(out) - 2, 1)
    out += [
        event({"tool_calls": [{"index": 0, "function": {"arguments": " " if n else "{"}}]})
        for n in range(pieces)
    ]
    out.append(event({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}, None))
    out.append(event({}, "tool_calls"))
    return [*out, b"data: [DONE]\n\n"]


def messages_events(count: int) -> list[bytes]:
    """``count`` SSE events of an Anthropic Messages thinking turn: thinking deltas (90 %), its
    signature, text deltas, then a ``tool_use`` whose input streams in pieces."""

    def delta(index: int, **fields: Any) -> bytes:
        return sse("content_block_delta", {"type": "content_block_delta", "index": index, **fields})

    def start(index: int, block: dict[str, Any]) -> bytes:
        event = {"type": "content_block_start", "index": index, "content_block": block}
        return sse("content_block_start", event)

    thinking = int(count * REASONING_EVENT_SHARE)
    out = [sse("message_start", {"type": "message_start", "message": {"id": "msg_bench"}})]
    out.append(start(0, {"type": "thinking", "thinking": "", "signature": ""}))
    out += [
        delta(0, delta={"type": "thinking_delta", "thinking": f"step {n}: consider the file "})
        for n in range(thinking)
    ]
    out.append(delta(0, delta={"type": "signature_delta", "signature": "EqQBCkYIARgC" * 20}))
    out.append(start(1, {"type": "text", "text": ""}))
    texts = max((count - len(out) - 4) // 2, 1)
    out += [delta(1, delta={"type": "text_delta", "text": "Reading it. "}) for _ in range(texts)]
    out.append(start(2, {"type": "tool_use", "id": "toolu_bench", "name": "ls", "input": {}}))
    pieces = max(count - len(out) - 2, 1)
    out += [
        delta(2, delta={"type": "input_json_delta", "partial_json": " " if n else "{"})
        for n in range(pieces)
    ]
    out.append(delta(2, delta={"type": "input_json_delta", "partial_json": "}"}))
    return [*out, sse("message_stop", {"type": "message_stop"})]


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


def plain_events(count: int) -> list[bytes]:
    """``count`` SSE events of an answer without reasoning (the observer stops at the first)."""
    thinking = events(count)
    return [
        chunk.replace(b'"reasoning_content":"step', b'"content":"step').replace(
            b',"content":null', b""
        )
        for chunk in thinking
    ]


def upstream_app(bodies: dict[str, list[bytes]]) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        body = bodies[(await request.json())["model"]]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in body:
            await response.write(chunk)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def request(model: str) -> bytes:
    return orjson.dumps(
        {"model": model, "stream": True, "messages": [{"role": "user", "content": "ls"}]}
    )


async def one_stream(session: ClientSession, url: str, body: bytes) -> tuple[float, int]:
    started = time.perf_counter()
    async with session.post(url + "/v1/chat/completions", data=body) as response:
        size = len(await response.read())
    return time.perf_counter() - started, size


def time_observer(
    body: list[bytes], repeat: int, kind: type[BodyObserver] = ResponseObserver
) -> float:
    """Seconds per event for ``feed`` alone, best of ``repeat``."""
    best = float("inf")
    for _ in range(repeat):
        observer = kind(lambda key, text: None, "scope", stream=True)
        started = time.perf_counter()
        for chunk in body:
            observer.feed(chunk)
        observer.finish()
        best = min(best, (time.perf_counter() - started) / len(body))
    return best


async def main(chunks: int, rounds: int) -> None:
    configure_logging(logging.WARNING)  # no request_done line per stream in the timings
    bodies = {"deepseek-v4-pro": events(chunks), "deepseek-chat": plain_events(chunks)}
    runners = []
    runner, upstream = await serve(upstream_app(bodies))
    runners.append(runner)
    urls = {}
    for store in ("off", "memory"):
        config = parse_config({"reasoning": {"store": store}}, default_upstream=upstream)
        runner, urls[store] = await serve(create_app(config))
        runners.append(runner)
    try:
        async with ClientSession() as session:
            for model, label in (
                ("deepseek-v4-pro", "thinking stream (reasoning, then a tool call)"),
                ("deepseek-chat", "plain stream (no reasoning: the observer stops early)"),
            ):
                print(f"== {label}")
                await measure(session, urls, bodies[model], request(model), rounds)
        body = messages_events(chunks)
        alone = time_observer(body, 5, MessagesObserver) * 1e6
        print("== Anthropic Messages thinking stream (thinking, text, then a tool_use)")
        print(f"events per stream: {len(body)} ({sum(map(len, body)) / 1024:.0f} KiB)")
        print(f"MessagesObserver.feed alone:      {alone:7.2f} µs per event")
    finally:
        for runner in runners:
            await runner.cleanup()


async def measure(
    session: ClientSession, urls: dict[str, str], body: list[bytes], payload: bytes, rounds: int
) -> None:
    times: dict[str, list[float]] = {"off": [], "memory": []}
    ratios: list[float] = []
    for store in ("off", "memory"):  # warm up both
        await one_stream(session, urls[store], payload)
    sizes = set()
    for round_ in range(rounds):
        order = ("off", "memory") if round_ % 2 == 0 else ("memory", "off")
        took: dict[str, float] = {}
        for store in order:
            took[store], size = await one_stream(session, urls[store], payload)
            sizes.add(size)
            times[store].append(took[store])
        ratios.append(took["memory"] / took["off"])
    n = len(body)
    plain = statistics.median(times["off"]) / n * 1e6
    observed = statistics.median(times["memory"]) / n * 1e6
    added = statistics.median(m - o for m, o in zip(times["memory"], times["off"], strict=True))
    alone = time_observer(body, 5) * 1e6
    print(f"events per stream: {n} ({sum(map(len, body)) / 1024:.0f} KiB), rounds: {rounds}")
    print(f"relay, no observer (store: off):  {plain:7.2f} µs per event")
    print(f"relay, observed (store: memory):  {observed:7.2f} µs per event")
    print(f"added per event (paired median):  {added / n * 1e6:7.2f} µs")
    print(f"ratio observed/plain (median):    {statistics.median(ratios):7.3f}")
    print(f"observer.feed alone:              {alone:7.2f} µs per event")
    assert len(sizes) == 1, "every stream must arrive whole"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    asyncio.run(main(args.chunks, args.rounds))
