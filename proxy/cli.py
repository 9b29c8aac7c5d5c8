"""The ``chatmend`` command line (also ``python -m proxy``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

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
    return parser


def serve(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config, upstream=args.upstream, host=args.host, port=args.port)
    except ConfigError as exc:
        print(f"chatmend: config error: {exc}", file=sys.stderr)
        return 2
    configure_logging()
    app = create_app(config)
    get_logger().info(
        "proxy_started",
        listen=f"{config.listen.host}:{config.listen.port}",
        upstream=config.upstream.url,
        rules=[name for name, setting in config.rules.items() if setting.enabled],
        log_content=config.log_content,
    )
    web.run_app(
        app,
        host=config.listen.host,
        port=config.listen.port,
        access_log=None,  # request_done is the access log
        print=None,
        handler_cancellation=True,  # a client that leaves cancels its upstream request
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    raise AssertionError(args.command)  # argparse rejects unknown commands first


if __name__ == "__main__":
    sys.exit(main())
