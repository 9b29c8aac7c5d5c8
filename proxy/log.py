"""structlog configuration: JSON lines on stdout, rendered by orjson."""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson
import structlog

#: Loggers of the libraries chatmend runs on. Their records may quote request bytes: aiohttp's
#: parser errors carry the offending header line, an ``Authorization`` value included. So they
#: become ``library_log`` lines with the logger, the code location and the exception type,
#: never the record's text or arguments.
LIBRARY_LOGGERS = ("aiohttp", "asyncio")


def configure_logging(level: int = logging.INFO) -> None:
    """One JSON object per line on stdout: timestamp, level, event, then the event's fields."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,  # ``worker`` under --workers
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.BytesLoggerFactory(file=sys.stdout.buffer),
        cache_logger_on_first_use=True,
    )
    handler = LibraryRecords()
    for name in LIBRARY_LOGGERS:
        library = logging.getLogger(name)
        library.handlers[:] = [handler]
        library.setLevel(level)
        library.propagate = False  # or Python's last-resort handler prints the text to stderr


class LibraryRecords(logging.Handler):
    """Render a library's log record as a ``library_log`` event, without its text."""

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        get_logger().log(
            record.levelno,
            "library_log",
            logger=record.name,
            where=f"{record.module}:{record.lineno}",
            error=None if error is None else type(error).__name__,
        )


def get_logger(**initial: Any) -> Any:
    """The proxy's logger (a structlog BoundLogger)."""
    return structlog.get_logger("chatmend", **initial)
