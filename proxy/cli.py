"""The ``chatmend`` command line (also ``python -m proxy``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence

from aiohttp import web

from proxy.app import create_app
from proxy.config import ConfigError, load_config
from proxy.log import configure_logging, get_logger


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chatmend",
        description="Reverse proxy that repairs chat payloads before strict providers reject them.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="run the proxy")
    serve.add_argument(
        "--config", metavar="PATH", help="YAML config file (default: $CHATMEND_CONFIG)"
    )
    serve.add_argument("--upstream", metavar="URL", help="upstream base URL (overrides the config)")
    serve.add_argument("--host", metavar="HOST", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", metavar="PORT", type=int, help="port to listen on (default 8787)")
    serve.add_argument(
        "--loop",
        choices=LOOPS,
        default="auto",
        help="event loop: uvloop if installed (auto, the default), or asyncio's own",
    )
    return parser


LOOPS = ("auto", "asyncio", "uvloop")


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


def serve(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config, upstream=args.upstream, host=args.host, port=args.port)
    except ConfigError as exc:
        print(f"chatmend: config error: {exc}", file=sys.stderr)
        return 2
    try:
        new_loop = event_loop_factory(args.loop)
    except ImportError:
        print("chatmend: --loop uvloop: uvloop is not installed", file=sys.stderr)
        return 2
    configure_logging()
    app = create_app(config)
    get_logger().info(
        "proxy_started",
        listen=f"{config.listen.host}:{config.listen.port}",
        upstream=config.upstream.url,
        rules=[name for name, setting in config.rules.items() if setting.enabled],
        log_content=config.log_content,
        loop=new_loop.__module__.split(".")[0],
    )
    web.run_app(
        app,
        host=config.listen.host,
        port=config.listen.port,
        access_log=None,  # request_done is the access log
        print=None,
        handler_cancellation=True,  # a client that leaves cancels its upstream request
        loop=new_loop(),
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    raise AssertionError(args.command)  # argparse rejects unknown commands first


if __name__ == "__main__":
    sys.exit(main())
