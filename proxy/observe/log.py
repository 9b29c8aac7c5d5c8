"""structlog configuration: JSON lines on stdout, rendered by orjson, fields capped, text the
client wrote only where the request's route logs content, a failing stdout counted and never
fatal.

Privacy is the logger's, not each call site's: a request's flow binds its id once, and, on a route
with ``log_content: true``, the ``CONTENT_ALLOWED`` mark (proxy/observe/flow.py); the configured
chain's one processor (``Render``, through ``capped``, the law ``cap_fields`` applies as a
processor of its own) withholds every ``CONTENT_FIELDS`` field of every other line, however deep,
and leaves its size. The rules write content into a change only where asked
(``RuleContext.log_content``); this is the guarantee that no line carries it otherwise.

A line costs a few microseconds (docs/performance.md#fixed-cost): the call's keywords are the
line's dict (``Logger``), the context is read from the three or so variables bound, a line with
nothing to cap or withhold is read once and never copied, and the sink writes it in one call.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import MutableMapping
from contextvars import ContextVar
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
    """stdout for the log lines, that never fails a request: a line whose write raises
    (stdout closed, a full disk, a broken pipe) is counted once and dropped, and ``failing``
    tells readiness until a line is written again. The configured chain's logger: a method per
    level, like structlog's ``BytesLogger``."""

    def __init__(self, file: IO[bytes] | None = None) -> None:
        self.file = file
        self.failures = 0
        self.failing = False

    def msg(self, line: bytes) -> None:
        """Write one rendered line and flush it."""
        try:
            file = self.file if self.file is not None else sys.stdout.buffer
            file.write(line + b"\n")  # one write: lines of two threads do not interleave
            file.flush()
        except (OSError, ValueError):  # ValueError: the file is closed
            self.failures += 1
            self.failing = True
            return
        self.failing = False

    debug = info = warning = warn = error = critical = exception = log = msg


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


#: Field types ``cap`` leaves as they are at any depth (exactly these: a subclass goes through
#: ``cap``).
_PLAIN = frozenset({int, float, bool, type(None)})


def cap_fields(
    logger: Any, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: every field through ``cap``, content withheld unless the line's
    request logs content (``CONTENT_ALLOWED``, which it consumes)."""
    return capped(event, event.pop(CONTENT_ALLOWED, False) is True)


def capped(event: MutableMapping[str, Any], content: bool) -> MutableMapping[str, Any]:
    """``event`` with every field through ``cap`` (``content``: whether the line may carry the
    client's text). A line that capping would leave as it is (``request_done``, a
    ``payload_sanitized`` of a few changes: short strings, numbers, short lists and mappings,
    no content to withhold) is passed on as it is, read once and never copied; any other is
    capped field by field."""
    for key, value in event.items():
        if key in _PRIVATE and not content and _private(key, value):
            break
        if key in UNCAPPED:
            continue
        kind = type(value)
        if kind is str:
            if len(value) > MAX_FIELD_CHARS:
                break
        elif kind not in _PLAIN and not _kept(value, 0, content):
            break
    else:
        return event
    return {key: _field(key, value, 0, content) for key, value in event.items()}


def _kept(value: Any, depth: int, content: bool) -> bool:
    """Whether ``cap(value, depth, content=content)`` writes what ``value`` writes. ``False``
    when not sure (a type other than the JSON ones): ``cap`` then decides."""
    kind = type(value)
    if kind is str:
        return len(value) <= MAX_FIELD_CHARS
    if kind in _PLAIN:
        return True
    if kind not in _SIZED or depth >= 4 or len(value) > MAX_FIELD_ITEMS:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or len(key) > MAX_FIELD_CHARS:
                return False
            if not content and key in _PRIVATE and _private(key, item):
                return False
            if key not in UNCAPPED and not _kept(item, depth + 1, content):
                return False
        return True
    return all(_kept(item, depth + 1, content) for item in value)  # a list or a tuple


#: The containers ``_kept`` reads (their subclasses go through ``cap``).
_SIZED = frozenset({dict, list, tuple})


class Timestamp:
    """structlog processor: ``timestamp`` in UTC, ISO 8601, exactly as structlog's
    ``TimeStamper(fmt="iso", utc=True)`` writes it (``2026-12-01T23:25:21.073525Z``; no
    fraction when it is zero), the date and time formatted once per second."""

    def __init__(self) -> None:
        #: The second last written and its text up to the fraction's dot: a line then writes
        #: only its microseconds.
        self.second: tuple[int, str] = (-1, "")

    def __call__(
        self, logger: Any, method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        event["timestamp"] = self.now()
        return event

    def now(self) -> str:
        """The time as the line writes it."""
        seconds, nanos = divmod(time.time_ns(), 1_000_000_000)
        second, text = self.second
        if second != seconds:
            text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
            self.second = (seconds, text)
        micros = nanos // 1000
        return text + str(micros).zfill(6) + "Z" if micros else text[:-1] + "Z"


#: The keys of the request's context (``structlog.contextvars.bind_contextvars``: the flow binds
#: ``request_id``, ``chatmend serve --workers`` binds ``worker``) in the order a line writes
#: them, after the event's own fields and ``event``; any other key bound follows, by name.
CONTEXT_ORDER = ("request_id", "worker")
#: The log level a logger's method writes (structlog's ``add_log_level``).
_LEVEL_NAMES = {"warn": "warning", "exception": "error"}
#: The method ``Logger.log`` calls for a level (structlog's; another level raises ``KeyError``,
#: as in structlog).
_METHODS = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}


class Render:
    """The configured chain, one processor (structlog's ``merge_contextvars``,
    ``add_log_level``, ``Timestamp``, ``cap_fields`` and ``JSONRenderer`` over orjson, in that
    order, in one call): the request's context, ``level``, ``timestamp``, every field capped
    and the content withheld unless the request's route logs content, one JSON line.

    The context is read from the variables structlog keeps per key (a line reads the three or
    so it binds, not every variable of the task's context), in ``CONTEXT_ORDER``."""

    def __init__(self) -> None:
        self.stamp = Timestamp()
        self.json = structlog.processors.JSONRenderer(serializer=orjson.dumps)
        #: structlog's variables (``None`` if it no longer keeps them where this reads: the
        #: context is then merged by ``merge_contextvars``), how many there were when ordered,
        #: and each key (without structlog's prefix) with its variable, in ``CONTEXT_ORDER``.
        self.variables: dict[str, ContextVar[Any]] | None = _structlog_variables()
        self.known = -1
        self.ordered: tuple[tuple[str, ContextVar[Any]], ...] = ()

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        content = self.merge(logger, method, event)
        event["level"] = _LEVEL_NAMES.get(method, method)
        event["timestamp"] = self.stamp.now()
        return self.json(logger, method, capped(event, content))

    def merge(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> bool:
        """Merge the request's context into ``event`` (a field the call names wins, as in
        ``merge_contextvars``); whether the line may carry content (``CONTENT_ALLOWED``)."""
        variables = self.variables
        if variables is None:
            structlog.contextvars.merge_contextvars(logger, method, event)
        else:
            if len(variables) != self.known:  # a key bound for the first time
                self.known, self.ordered = len(variables), _in_order(variables)
            for key, variable in self.ordered:
                value = variable.get(Ellipsis)
                if value is not Ellipsis:
                    event.setdefault(key, value)
        return event.pop(CONTENT_ALLOWED, False) is True


def _structlog_variables() -> dict[str, ContextVar[Any]] | None:
    """structlog's context variables, one per key bound, named with its prefix."""
    variables = getattr(structlog.contextvars, "_CONTEXT_VARS", None)
    return variables if isinstance(variables, dict) else None


def _in_order(variables: dict[str, ContextVar[Any]]) -> tuple[tuple[str, ContextVar[Any]], ...]:
    prefix = structlog.contextvars.STRUCTLOG_KEY_PREFIX
    keyed = [
        (name[len(prefix) :], variable)
        for name, variable in list(variables.items())
        if name.startswith(prefix)
    ]
    rank = {key: n for n, key in enumerate(CONTEXT_ORDER)}
    return tuple(sorted(keyed, key=lambda pair: (rank.get(pair[0], len(rank)), pair[0])))


class Logger(structlog.BoundLoggerBase):
    """The configured loggers' class (structlog's ``make_filtering_bound_logger``, its dispatch
    made short): a line's fields are the call's own keywords (a new dict: nothing to copy), its
    event added, then the processors run over it and the line goes to the sink. A level below
    ``min_level`` does nothing."""

    min_level = logging.NOTSET

    def debug(self, event: str, **fields: Any) -> Any:
        return self._line(logging.DEBUG, "debug", event, fields)

    def info(self, event: str, **fields: Any) -> Any:
        return self._line(logging.INFO, "info", event, fields)

    def warning(self, event: str, **fields: Any) -> Any:
        return self._line(logging.WARNING, "warning", event, fields)

    def error(self, event: str, **fields: Any) -> Any:
        return self._line(logging.ERROR, "error", event, fields)

    def critical(self, event: str, **fields: Any) -> Any:
        return self._line(logging.CRITICAL, "critical", event, fields)

    def exception(self, event: str, **fields: Any) -> Any:
        fields.setdefault("exc_info", True)
        return self._line(logging.ERROR, "error", event, fields)

    def log(self, level: int, event: str, **fields: Any) -> Any:
        if level < self.min_level:
            return None
        return self._line(level, _METHODS[level], event, fields)

    warn = warning
    fatal = critical
    msg = info

    def is_enabled_for(self, level: int) -> bool:
        return level >= self.min_level

    def get_effective_level(self) -> int:
        return self.min_level

    def _line(self, level: int, method: str, event: str, fields: dict[str, Any]) -> Any:
        if level < self.min_level:
            return None
        if self._context:  # what ``bind`` added comes first, as in structlog
            fields = {**self._context, **fields}
        fields["event"] = event
        line: Any = fields
        logger = self._logger
        try:
            for processor in self._processors:
                line = processor(logger, method, line)
        except structlog.DropEvent:
            return None
        if isinstance(line, bytes | str | bytearray):
            return getattr(logger, method)(line)
        if isinstance(line, tuple):
            args, kw = line
            return getattr(logger, method)(*args, **kw)
        if isinstance(line, dict):
            return getattr(logger, method)(**line)
        raise ValueError("the last processor returned no str, bytes, tuple or dict")


def logger_class(level: int) -> type[Logger]:
    """``Logger`` writing ``level`` and above."""
    return type(f"LoggerFrom{level}", (Logger,), {"min_level": level})


def configure_logging(level: int = logging.INFO) -> None:
    """One JSON object per line on stdout: the event's fields, ``event``, the request's context,
    ``level``, ``timestamp`` (docs/observability.md#logs)."""
    structlog.configure(
        processors=[Render()],
        wrapper_class=logger_class(level),
        logger_factory=lambda *args: SINK,
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
    """The proxy's logger (a structlog BoundLogger, bound on first use)."""
    return Lazy(initial)


class Lazy:
    """structlog's lazy logger, its methods kept once taken where structlog keeps the logger
    it bound (``cache_logger_on_first_use``, as ``configure_logging`` sets it): a line then
    calls the bound logger's method directly, not through the proxy's ``__getattr__`` each
    time. Unconfigured (tests capturing lines), every call goes through the proxy."""

    def __init__(self, initial: dict[str, Any]) -> None:
        self._proxy = structlog.get_logger("chatmend", **initial)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy and pickle look for theirs before ``_proxy`` is set
            raise AttributeError(name)
        method = getattr(self._proxy, name)
        if structlog.get_config()["cache_logger_on_first_use"] is True:
            setattr(self, name, method)
        return method
