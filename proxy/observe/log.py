"""structlog configuration: JSON lines on stdout, rendered by orjson, fields capped, text the
client wrote only where the request's route logs content, a failing stdout counted and never
fatal.

Privacy is the logger's, not each call site's: a request's flow binds its id once, and, on a route
with ``log_content: true``, the ``CONTENT_ALLOWED`` mark (proxy/observe/flow.py); ``cap_fields``
withholds every ``CONTENT_FIELDS`` field of every other line, however deep, and leaves its size.
The rules write content into a change only where asked (``RuleContext.log_content``); this is the
guarantee that no line carries it otherwise.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import IO, Any

import orjson
import structlog

from rules.engine.named import loggable

#: Loggers of the libraries chatmend runs on. Their records may quote request bytes: aiohttp's
#: parser errors carry the offending header line, an ``Authorization`` value included. So they
#: become ``library_log`` lines with the logger, the code location and the exception type,
#: never the record's text or arguments.
LIBRARY_LOGGERS = ("aiohttp", "asyncio")

#: Longest string a log field keeps (ids, names, roles and paths are client strings; one
#: request could otherwise write a line of megabytes), and most items of a list or mapping.
MAX_FIELD_CHARS = 256
MAX_FIELD_ITEMS = 100
#: Fields exempt from the string cap: opt-in content (``log_content``), capped where it is made.
UNCAPPED = frozenset({"original"})
#: Fields that hold text the client wrote, wherever they stand in a line: a change's arguments
#: as sent (``original``), a dropped ``content`` or ``output``. Logged only on a line whose
#: request's route logs content; elsewhere each is withheld (its size is kept).
CONTENT_FIELDS = frozenset({"original", "content", "output"})
#: A value a named repair replaced or dropped (``rules.engine.named.described``): a short word
#: (``auto``, ``json_object``) is logged as it is; a longer string only like content.
VALUE_FIELD = "value"
#: The mark a request's log context carries when its route logs content; consumed here.
CONTENT_ALLOWED = "_log_content"
_PRIVATE = CONTENT_FIELDS | {VALUE_FIELD}


class Sink:
    """stdout for the log lines, that never fails a request: a write that raises (stdout
    closed, a full disk, a broken pipe) is counted and dropped, and ``failing`` tells
    readiness until a write succeeds again."""

    def __init__(self, file: IO[bytes] | None = None) -> None:
        self.file = file
        self.failures = 0
        self.failing = False

    def write(self, data: bytes) -> int:
        try:
            file = self.file if self.file is not None else sys.stdout.buffer
            written = file.write(data)
        except (OSError, ValueError):  # ValueError: the file is closed
            self.failures += 1
            self.failing = True
            return 0
        self.failing = False
        return written or 0

    def flush(self) -> None:
        try:
            (self.file if self.file is not None else sys.stdout.buffer).flush()
        except (OSError, ValueError):
            self.failures += 1
            self.failing = True


SINK = Sink()


def withheld(value: Any) -> str:
    """What a line says of content it may not carry: its size."""
    size = len(value) if isinstance(value, str) else len(orjson.dumps(value, default=repr))
    return f"...[{size} chars, not logged: log_content is off]"


def _private(key: Any, value: Any) -> bool:
    """Whether a field holds text the client wrote."""
    if key in CONTENT_FIELDS:
        return value is not None
    return key == VALUE_FIELD and isinstance(value, str) and not loggable(value)


def cap(value: Any, depth: int = 0, *, content: bool = True) -> Any:
    """``value`` with long strings cut (their length kept) and long lists and mappings
    shortened (the number left out kept), four levels deep; without ``content``, every field
    that holds text the client wrote withheld."""
    if isinstance(value, str):
        if len(value) <= MAX_FIELD_CHARS:
            return value
        return f"{value[:MAX_FIELD_CHARS]}...[{len(value)} chars]"
    if depth >= 4:
        return value if isinstance(value, int | float | bool | None) else "..."
    if isinstance(value, list | tuple):
        items = [cap(item, depth + 1, content=content) for item in value[:MAX_FIELD_ITEMS]]
        if len(value) > MAX_FIELD_ITEMS:
            items.append(f"...[{len(value) - MAX_FIELD_ITEMS} more]")
        return items
    if isinstance(value, dict):
        capped = {
            cap(key, depth + 1): _field(key, item, depth + 1, content)
            for key, item in list(value.items())[:MAX_FIELD_ITEMS]
        }
        if len(value) > MAX_FIELD_ITEMS:
            capped["..."] = f"{len(value) - MAX_FIELD_ITEMS} more"
        return capped
    return value


def _field(key: Any, value: Any, depth: int, content: bool) -> Any:
    if not content and _private(key, value):
        return withheld(value)
    return value if key in UNCAPPED else cap(value, depth, content=content)


#: Field types ``cap`` leaves as they are (their subclasses go through ``cap``, which leaves
#: them too).
_PLAIN = frozenset({int, float, bool, type(None)})


def cap_fields(
    logger: Any, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: every field through ``cap``, content withheld unless the line's
    request logs content (``CONTENT_ALLOWED``, which it consumes). An event of short strings
    and numbers only, none of them a content field (``request_done``, most lines), is passed on
    as it is: ``cap`` would return each of its values unchanged."""
    content = event.pop(CONTENT_ALLOWED, False) is True
    for key, value in event.items():
        kind = type(value)
        short = len(value) <= MAX_FIELD_CHARS if kind is str else kind in _PLAIN
        if (not short and key not in UNCAPPED) or key in _PRIVATE:
            break
    else:
        return event
    plain = int | float | bool | None
    return {
        key: value
        if isinstance(value, plain) and key not in _PRIVATE
        else _field(key, value, 0, content)
        for key, value in event.items()
    }


class Timestamp:
    """structlog processor: ``timestamp`` in UTC, ISO 8601, exactly as structlog's
    ``TimeStamper(fmt="iso", utc=True)`` writes it (``2026-12-01T23:25:21.073525Z``; no
    fraction when it is zero), the date and time formatted once per second."""

    def __init__(self) -> None:
        #: The second last written and its text: a line then formats only its microseconds.
        self.second: tuple[int, str] = (-1, "")

    def __call__(
        self, logger: Any, method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        seconds, nanos = divmod(time.time_ns(), 1_000_000_000)
        second, text = self.second
        if second != seconds:
            text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
            self.second = (seconds, text)
        micros = nanos // 1000
        event["timestamp"] = f"{text}.{micros:06d}Z" if micros else f"{text}Z"
        return event


def configure_logging(level: int = logging.INFO) -> None:
    """One JSON object per line on stdout: timestamp, level, event, then the event's fields."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,  # ``worker`` under --workers
            structlog.processors.add_log_level,
            Timestamp(),  # structlog's TimeStamper(fmt="iso", utc=True), a quarter of its cost
            cap_fields,
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.BytesLoggerFactory(file=SINK),  # type: ignore[arg-type]
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
