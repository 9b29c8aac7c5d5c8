"""The ``chatmend`` command line (also ``python -m proxy``).

``serve`` runs the server; ``learned`` reads a running one's /metrics. ``check``, ``emulate`` and
``probe`` are developer tools (tools/, imported only when one of them runs): they run from a clone
of the repository (``make run``), and an install that carries the server alone (the image) says so
and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
import urllib.request
from collections.abc import Callable, Sequence
from functools import partial
from importlib import metadata
from typing import Any

import structlog
from aiohttp import web

from proxy.config import Config, ConfigError, load_config
from proxy.observe.log import configure_logging, get_logger
from proxy.recovery.learned import format_table, learned_table
from proxy.relay.owners import Relay, Workers
from proxy.relay.routing import ends_in_v1
from proxy.server import collector
from proxy.server.app import OFFLOAD_KEY, create_app
from proxy.server.appkeys import RELAY_KEY
from proxy.server.reload import reload_config
from proxy.server.workers import bind, run_workers
from rules.providers.planner import Planner
from rules.providers.profiles import PROFILES
from rules.providers.sanitize import PlanSource
from rules.replies.formats import FORMATS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chatmend",
        description="Reverse proxy that repairs chat payloads before strict providers reject them.",
    )
    parser.add_argument("--version", action="version", version=f"chatmend {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="run the proxy")
    serve.add_argument(
        "--config", metavar="PATH", help="YAML config file (default: $CHATMEND_CONFIG)"
    )
    serve.add_argument("--upstream", metavar="URL", help="upstream base URL (overrides the config)")
    serve.add_argument("--host", metavar="HOST", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", metavar="PORT", type=int, help="port to listen on (default 8787)")
    serve.add_argument(
        "--profile",
        choices=PROFILES,
        metavar="PROFILE",
        help="provider profile for models no `models` pattern matches (overrides the config)",
    )
    serve.add_argument(
        "--loop",
        choices=LOOPS,
        default="auto",
        help="event loop: uvloop if installed (auto, the default), or asyncio's own",
    )
    serve.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="server processes sharing the port (default 1; one per core to use them all)",
    )
    check = commands.add_parser(
        "check",
        help="lint a captured request: the provider's rejections and the rules' rewrites",
    )
    check.add_argument(
        "file",
        nargs="?",
        help="request body (JSON) to check, or - for stdin (optional with --error)",
    )
    check.add_argument(
        "--error",
        metavar="FILE",
        help="a captured provider error body: print its class, the rule that repairs it and "
        "the YAML to enable it (with the request given too: whether the repair changes it)",
    )
    check.add_argument(
        "--config", metavar="PATH", help="YAML config whose rules apply (default: $CHATMEND_CONFIG)"
    )
    check.add_argument(
        "--fix", action="store_true", help="write the repaired body to stdout, the report to stderr"
    )
    check.add_argument("--format", choices=("text", "json"), default="text", help="report format")
    check.add_argument(
        "--profile",
        choices=PROFILES,
        metavar="PROFILE",
        help="check against this provider profile (default: as the proxy would pick, by model)",
    )
    emulate = commands.add_parser(
        "emulate", help="run a local strict provider: 400 with its error text, or a completion"
    )
    emulate.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    emulate.add_argument("--port", type=int, default=8788, help="port (default 8788)")
    emulate.add_argument(
        "--stream-chunks", type=int, default=5, metavar="N", help="text chunks per SSE stream"
    )
    emulate.add_argument(
        "--profile",
        choices=PROFILES,
        default="deepseek",
        metavar="PROFILE",
        help="the provider to emulate: its contract, error texts and envelope (default deepseek)",
    )
    emulate.add_argument(
        "--text-calls",
        choices=sorted(FORMATS),
        default=None,
        metavar="FORMAT",
        help="write the tool call as text in content in this markup, with finish_reason stop, "
        f"as models do ({', '.join(FORMATS)})",
    )
    probe = commands.add_parser(
        "probe",
        help="which catalogued shapes a live endpoint refuses, and the profile that fits it",
    )
    probe.add_argument("url", help="the endpoint's base URL (https://api.example.com or .../v1)")
    probe.add_argument(
        "--model",
        default=None,
        help="the model to probe (default: one the provider serves, by the profile the URL's "
        "host picks; deepseek-chat for a host no profile lists)",
    )
    probe.add_argument(
        "--key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="environment variable holding the endpoint's API key (default OPENAI_API_KEY)",
    )
    probe.add_argument(
        "--yes", action="store_true", help="do not ask before spending on a non-loopback host"
    )
    learned = commands.add_parser(
        "learned",
        help="what a running chatmend has learned from recovered refusals (from its /metrics)",
    )
    learned.add_argument(
        "url", nargs="?", default="http://127.0.0.1:8787", help="chatmend's base URL"
    )
    return parser


LOOPS = ("auto", "asyncio", "uvloop")
#: The package of the developer tools (``check``, ``emulate``, ``probe``): in a clone, not in the
#: image nor in a plain ``pip install``.
TOOLS = "tools"


def version() -> str:
    """The installed package's version (a source tree never installed says so)."""
    try:
        return metadata.version("chatmend")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def event_loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The loop to serve on. uvloop is a core dependency, so ``auto`` picks it where it
    installs; asyncio's loop remains the fallback (and ``--loop asyncio`` forces it)."""
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def _workers(value: str) -> int:
    count = int(value)
    if not 1 <= count <= 256:
        raise argparse.ArgumentTypeError(f"must be 1-256, got {count}")
    return count


def serve(args: argparse.Namespace) -> int:
    load = partial(
        load_config,
        args.config,
        upstream=args.upstream,
        host=args.host,
        port=args.port,
        profile=args.profile,
    )
    try:
        config = load()
    except ConfigError as exc:
        print(f"chatmend: config error: {exc}", file=sys.stderr)
        return 2
    try:
        new_loop = event_loop_factory(args.loop)
    except ImportError:
        print("chatmend: --loop uvloop: uvloop is not installed", file=sys.stderr)
        return 2
    try:
        # Bound here, before anything starts: a port in use or a host that does not resolve is
        # one line on stderr, whatever the number of workers.
        sock = bind(config.listen.host, config.listen.port)
    except OSError as exc:
        print(f"chatmend: cannot listen on {_listen(config)}: {_reason(exc)}", file=sys.stderr)
        return 2
    with sock:  # closed however serving ends, a failure to start included
        return _serve(args, config, load, new_loop, sock)


def _serve(
    args: argparse.Namespace,
    config: Config,
    load: Callable[[], Config],
    new_loop: Callable[[], asyncio.AbstractEventLoop],
    sock: socket.socket,
) -> int:
    configure_logging()
    if args.workers == 1:
        return _serve_one(config, load, new_loop, sock=sock)

    def validate() -> bool:
        try:
            load()
        except ConfigError as exc:
            get_logger().error("config_reload_failed", error=str(exc), where="supervisor")
            return False
        return True

    def serve_worker(shared: socket.socket, workers: Workers) -> int:
        return _serve_one(config, load, new_loop, sock=shared, workers=workers)

    return run_workers(args.workers, sock, serve_worker, validate, config.drain_seconds)


def _serve_one(
    config: Config,
    load: Callable[[], Config],
    new_loop: Callable[[], asyncio.AbstractEventLoop],
    *,
    sock: socket.socket,
    workers: Workers | None = None,
) -> int:
    """Run one server process until SIGTERM or SIGINT (then drain); SIGHUP reloads ``load()``.
    A worker of several also listens for its peers on its unix socket (``proxy.relay.owners``)."""
    app = create_app(config)
    if workers is not None:
        structlog.contextvars.bind_contextvars(worker=workers.index)  # on every line it logs
        app[RELAY_KEY] = Relay(workers)
        app.on_cleanup.append(_close_relay)
    listening = None if workers is None else workers.listening()
    if workers is not None and listening is None:
        get_logger().warning(
            "worker_socket_path_too_long", path=workers.path(workers.index), note="set TMPDIR"
        )

    async def on_startup(app: web.Application) -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload_config, app, load)
        app[OFFLOAD_KEY].start()  # The worker processes big bodies are repaired in

    async def on_shutdown(app: web.Application) -> None:
        # The listener is closed: in-flight requests (streams included) get drain_seconds.
        get_logger().info("shutdown_draining", drain_seconds=config.drain_seconds)

    app.on_startup.append(on_startup)
    app.on_shutdown.append(on_shutdown)
    host, port = sock.getsockname()[:2]
    frozen = collector.settle()  # what start-up made is never walked again (the module's why)
    loop = new_loop.__module__.split(".")[0]
    log_started(config, listen=f"{host}:{port}", loop=loop, gc_frozen=frozen)
    web.run_app(
        app,
        sock=sock,
        path=listening,
        access_log=None,  # request_done is the access log
        print=None,
        handler_cancellation=True,  # a client that leaves cancels its upstream request
        shutdown_timeout=config.drain_seconds,
        loop=new_loop(),
    )
    get_logger().info("proxy_stopped")
    return 0


async def _close_relay(app: web.Application) -> None:
    await app[RELAY_KEY].close()


def log_started(config: Config, **extra: Any) -> None:
    """The ``proxy_started`` line: what serves, under which profile and why, and which source
    set each top-level value; then a warning per upstream URL that ends in ``/v1``."""
    planner = config.planner()
    log = get_logger()
    log.info(
        "proxy_started",
        **extra,
        upstream=config.default.upstream.url,
        profile=config.default.profile,
        profile_reason=config.default.profile_reason,
        routes={
            route.name: {
                "prefix": route.prefix,
                "upstream": route.upstream.url,
                "profile": route.profile,
                "profile_reason": route.profile_reason,
            }
            for route in config.routes
        },
        models=dict(config.default.models),
        rules=[rule.name for rule, _ in planner.plans[config.default.profile].steps],
        log_content=config.default.log_content,
        sources=dict(config.sources),
    )
    for route in config.all_routes():
        if ends_in_v1(route.upstream.url):
            log.warning(
                "upstream_url_ends_in_v1",
                route=route.name,
                upstream=route.upstream.url,
                note="client paths starting with /v1 are forwarded without it (no /v1/v1/...)",
            )


def _listen(config: Config) -> str:
    return f"{config.listen.host}:{config.listen.port}"


def _reason(exc: OSError) -> str:
    """An OSError's cause in words, without the address ``socket.create_server`` appends
    (the message names it already)."""
    text = exc.strerror or str(exc) or type(exc).__name__
    return text.split(" (while attempting to bind", 1)[0]


def check(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"chatmend: config error: {exc}", file=sys.stderr)
        return 2
    planner = config.planner()
    if args.error is not None:
        return check_error(args, planner)
    if args.file is None:
        print("chatmend: check needs a request FILE (or --error FILE)", file=sys.stderr)
        return 2
    from tools.check import open_source, run_check

    source_plan = planner if args.profile is None else planner.under(args.profile)
    try:
        source = open_source(args.file)
    except OSError as exc:
        print(f"chatmend: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    with source:
        return run_check(
            source,
            source_plan,
            fix=args.fix,
            fmt=args.format,
            out=sys.stdout.buffer,
            err=sys.stderr,
        )


def check_error(args: argparse.Namespace, planner: Planner) -> int:
    """``check --error FILE [REQUEST]``: classify a provider's error body."""
    from tools.check import open_source, run_error_check

    source: PlanSource = planner if args.profile is None else planner.under(args.profile)
    try:
        with open_source(args.error) as stream:
            error = stream.read()
        request = None
        if args.file is not None:
            with open_source(args.file) as stream:
                request = stream.read()
    except OSError as exc:
        print(f"chatmend: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    return run_error_check(error, request, source, fmt=args.format, out=sys.stdout.buffer)


def emulate(args: argparse.Namespace) -> int:
    from tools.emulate.app import create_emulator

    listen = f"{args.host}:{args.port}"
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        print(f"chatmend: cannot listen on {listen}: {_reason(exc)}", file=sys.stderr)
        return 2
    with sock:
        configure_logging()
        get_logger().info(
            "emulate_started", listen=listen, profile=args.profile, text_calls=args.text_calls
        )
        app = create_emulator(
            chunks=args.stream_chunks, profile=args.profile, text_calls=args.text_calls
        )
        web.run_app(app, sock=sock, access_log=None, print=None)
    return 0


def run_probe(args: argparse.Namespace) -> int:
    """``probe URL``: the battery, the table, the best-fitting profile and its YAML."""
    from tools.probe import probe

    def ask(prompt: str) -> str:
        if not sys.stdin.isatty():
            print("(stdin is not a terminal: pass --yes to send)", file=sys.stderr)
            return ""
        return input(prompt)

    return probe(
        args.url,
        model=args.model,
        key=os.environ.get(args.key_env) or None,
        yes=args.yes,
        say=sys.stdout.write,
        ask=ask,
        key_env=args.key_env,
    )


def learned(args: argparse.Namespace) -> int:
    """``learned [URL]``: the learned repairs a running chatmend shows in its /metrics."""
    url = args.url.rstrip("/") + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        print(f"chatmend: cannot read {url}: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(format_table(learned_table(text)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return serve(args)
        if args.command == "check":
            return check(args)
        if args.command == "emulate":
            return emulate(args)
        if args.command == "learned":
            return learned(args)
        if args.command == "probe":
            return run_probe(args)
    except Exception as exc:
        if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == TOOLS:
            print(
                f"chatmend {args.command}: a developer tool ({TOOLS}/): it runs from a clone of "
                "the repository (make run); this install carries the server only",
                file=sys.stderr,
            )
            return 2
        # Anything else that stops chatmend (at start-up: the known causes above have their
        # own messages) is one line naming it, never a traceback.
        cause = " ".join(str(exc).split())  # one line, whatever the exception's text holds
        print(f"chatmend {args.command}: {type(exc).__name__}: {cause}", file=sys.stderr)
        return 1
    raise AssertionError(args.command)  # argparse rejects unknown commands first


if __name__ == "__main__":
    sys.exit(main())
