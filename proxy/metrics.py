"""Prometheus metrics: what chatmend repaired, what still got rejected, and what it cost.

One registry per app (so tests and several apps in one process never share counters), served at
``GET /metrics`` by chatmend itself. Upstream rejections are classified by matching the
provider's error text against the catalogue's texts (every check's, every profile's override):
``class`` is then the check's code (``empty_tool_calls``), so an operator sees which 400s still
get through; a text no check knows is ``unclassified``.
"""

from __future__ import annotations

import os
import re
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from rules.providers.contract import CHECKS
from rules.providers.contract.messages import MESSAGES_CHECKS
from rules.providers.contract.responses import CHECKS as RESPONSES_CHECKS
from rules.providers.profiles import PROFILES

CONTENT_TYPE = CONTENT_TYPE_LATEST
_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def _pattern(template: str) -> re.Pattern[str]:
    """A check's text template as a regex: the ``{field}`` slots match anything."""
    pieces = re.split(r"\{[a-z_]*\}", template.replace("{{", "{").replace("}}", "}"))
    return re.compile(".*?".join(re.escape(piece) for piece in pieces), re.DOTALL)


def _catalogue() -> list[tuple[re.Pattern[str], str]]:
    """Every (text, code) pair: chat, Responses and Messages checks, and every profile's
    override. Two
    checks may share a text (deepseek-reasoner's successive users and assistants): both stay,
    in check order, so recovery can try each."""
    texts: dict[tuple[str, str], None] = {}
    for check in (*CHECKS, *RESPONSES_CHECKS, *MESSAGES_CHECKS):
        texts[check.text, check.code] = None
    for profile in PROFILES.values():
        for code, overrides in (*profile.contract.items(), *profile.messages_contract.items()):
            if "text" in overrides:
                texts[overrides["text"], code] = None
    # longest first (stable): a specific text wins over a generic one it contains
    return [(_pattern(text), code) for text, code in sorted(texts, key=lambda t: -len(t[0]))]


CATALOGUE = _catalogue()


def error_text(body: bytes) -> str | None:
    """The message of an error body: OpenAI's ``error.message``, Mistral's ``message``, or the
    first of Gemini's list."""
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(data, list) and data:
        data = data[0]
    if not isinstance(data, dict):
        return None
    error = data.get("error", data)
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else None


def classify(body: bytes | None) -> str:
    """The catalogue code whose text the rejection carries, or ``unclassified``."""
    text = error_text(body) if body else None
    if text is None:
        return "unclassified"
    return next((code for pattern, code in CATALOGUE if pattern.search(text)), "unclassified")


def classes(body: bytes | None) -> list[str]:
    """Every catalogue code whose text the rejection carries, the most specific first (empty:
    not a catalogued rejection)."""
    text = error_text(body) if body else None
    if text is None:
        return []
    found: list[str] = []
    for pattern, code in CATALOGUE:
        if code not in found and pattern.search(text):
            found.append(code)
    return found


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "chatmend_requests",
            "Requests by config route, API (chat, responses, messages, other), status and profile.",
            ["route", "api", "status", "profile"],
            registry=r,
        )
        self.rewrites = Counter(
            "chatmend_rewrites",
            "Rewrites applied, by rule and action.",
            ["rule", "action"],
            registry=r,
        )
        self.reported = Counter(
            "chatmend_reported_rewrites",
            "Rewrites report mode logged but did not apply.",
            ["rule", "action"],
            registry=r,
        )
        self.rule_failures = Counter(
            "chatmend_rule_failures", "Rules that raised and were skipped.", ["rule"], registry=r
        )
        self.violations = Counter(
            "chatmend_contract_violations",
            "What a profile's contract still rejected after the rules.",
            ["profile", "code"],
            registry=r,
        )
        self.rejections = Counter(
            "chatmend_upstream_rejections",
            "Upstream 4xx answers, classified by error text.",
            ["status", "class"],
            registry=r,
        )
        self.recovered = Counter(
            "chatmend_recovered",
            "Requests a rejected 400 was recovered for (repaired, retried once, accepted), by "
            "config route, the rule that repaired it and the error class.",
            ["route", "rule", "error_class"],
            registry=r,
        )
        self.upstream_seconds = Histogram(
            "chatmend_upstream_seconds",
            "Time until the upstream's response headers.",
            registry=r,
            buckets=_SECONDS,
        )
        self.overhead_seconds = Histogram(
            "chatmend_overhead_seconds",
            "chatmend's own time per request, upstream excluded.",
            registry=r,
            buckets=_SECONDS,
        )
        self.reloads = Counter(
            "chatmend_config_reloads",
            "Config reloads (SIGHUP), by result: ok or failed.",
            ["result"],
            registry=r,
        )
        # The reasoning stash (proxy/stash): turns stored from responses, reasoning restored
        # into requests or replaced by a placeholder, and store failures (each a miss).
        self.reasoning = Counter(
            "chatmend_reasoning",
            "Reasoning stash events: stored, restored, placeholder.",
            ["outcome"],
            registry=r,
        )
        self.reasoning_store_errors = Counter(
            "chatmend_reasoning_store_errors",
            "Reasoning store failures (treated as misses), by store and operation.",
            ["store", "operation"],
            registry=r,
        )
        # Issue 15: requests that met one of chatmend's limits (path, method, header_size,
        # body_size, decoded_size, work_budget, arguments_cost_cap, sanitize_deadline).
        self.limits = Counter(
            "chatmend_limits",
            "Requests that met one of chatmend's limits, by limit.",
            ["limit"],
            registry=r,
        )
        # Issue 27: the offload pool's jobs ended at their deadline, and workers replaced.
        self.offload_interrupted = Counter(
            "chatmend_offload_interrupted",
            "Offloaded repairs ended in their worker at their deadline (the body went as it came).",
            registry=r,
        )
        self.offload_replaced = Counter(
            "chatmend_offload_replaced",
            "Offload worker processes replaced: died (killed or crashed mid-job), stuck (did "
            "not stop after its job's deadline, killed) or failed (a job or answer that could "
            "not be pickled).",
            ["reason"],
            registry=r,
        )
        self.log_write_failures = Counter(
            "chatmend_log_write_failures",
            "Log lines that could not be written (the request went on without them).",
            registry=r,
        )
        self._log_failures_seen = 0
        self.streams = Gauge(
            "chatmend_streams_in_flight",
            "Responses being relayed right now.",
            registry=r,
            multiprocess_mode="livesum",  # with --workers: the sum over the live workers
        )

    def sync_log_failures(self, total: int) -> None:
        """Bring the counter up to the log sink's own count (kept by ``proxy.log``, which has
        no metrics of its own)."""
        if total > self._log_failures_seen:
            self.log_write_failures.inc(total - self._log_failures_seen)
            self._log_failures_seen = total

    def exposition(self) -> bytes:
        """This app's samples; with ``--workers`` (prometheus-client's multiprocess mode, see
        ``proxy.workers``) every worker's, summed."""
        directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if directory is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
