"""structlog's ``capture_logs`` with the request's log context merged in, as the server's chain
merges it (``structlog.contextvars.merge_contextvars``): a request's lines carry the
``request_id`` its flow bound once (proxy/observe/flow.py)."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import structlog
from structlog.testing import LogCapture


@contextmanager
def captured_logs() -> Iterator[list[MutableMapping[str, Any]]]:
    """Every log line while the block runs, each with its context (``request_id``)."""
    capture = LogCapture()
    processors = structlog.get_config()["processors"]
    kept = list(processors)
    processors[:] = [structlog.contextvars.merge_contextvars, capture]
    structlog.configure(processors=processors)
    try:
        yield capture.entries
    finally:
        processors[:] = kept
        structlog.configure(processors=processors)
