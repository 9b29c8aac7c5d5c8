"""structlog configuration: JSON lines on stdout, rendered by orjson."""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson
import structlog


def configure_logging(level: int = logging.INFO) -> None:
    """One JSON object per line on stdout: timestamp, level, event, then the event's fields."""
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.BytesLoggerFactory(file=sys.stdout.buffer),
        cache_logger_on_first_use=True,
    )


def get_logger(**initial: Any) -> Any:
    """The proxy's logger (a structlog BoundLogger)."""
    return structlog.get_logger("chatmend", **initial)
