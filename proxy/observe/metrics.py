"""Prometheus metrics: what chatmend repaired, what still got rejected, and what it cost.

One registry per app (so tests and several apps in one process never share counters), served at
``GET /metrics`` by chatmend itself. Upstream rejections are classified by
``rules.providers.refusals`` (the catalogue's texts, then the refusal's stable parts, in bounded
time): ``class`` is then the check's code (``empty_tool_calls``), so an operator sees which 400s
still get through; a text no check knows is ``unclassified``.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from rules.providers.refusals import CATALOGUE, classes, classify, error_text

__all__ = ["CATALOGUE", "CONTENT_TYPE", "Metrics", "classes", "classify", "error_text"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


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
        self.response_repairs = Counter(
            "chatmend_response_repairs",
            "Rewrites of upstream answers by the reply rules, by rule and action.",
            ["rule", "action"],
            registry=r,
        )
        self.response_reported = Counter(
            "chatmend_response_reported",
            "Rewrites of upstream answers report mode logged but did not apply.",
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
        self.recovery_retries = Counter(
            "chatmend_recovery_retries",
            "Retries recovery sent, by config route, error class (``escalated``: a refusal that "
            "named a message but matched no class) and result (recovered, failed).",
            ["route", "error_class", "result"],
            registry=r,
        )
        # Learned repairs (proxy/recovery/learned.py).
        self.recovery_learned = Counter(
            "chatmend_recovery_learned",
            "Repairs learned from a recovered refusal, by config route and error class.",
            ["route", "error_class"],
            registry=r,
        )
        self.learned_applied = Counter(
            "chatmend_learned_applied",
            "Requests a learned repair was applied to before sending, by config route and rule.",
            ["route", "rule"],
            registry=r,
        )
        self.learned = Gauge(
            "chatmend_learned_repairs",
            "What is learned now: 1 per config route, model, rule and the error class it "
            "recovered (forgotten on TTL and reload).",
            ["route", "model", "rule", "error_class"],
            registry=r,
            multiprocess_mode="max",
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
        # Requests that met one of chatmend's limits (path, method, header_size,
        # body_size, decoded_size, work_budget, arguments_cost_cap, sanitize_deadline).
        self.limits = Counter(
            "chatmend_limits",
            "Requests that met one of chatmend's limits, by limit.",
            ["limit"],
            registry=r,
        )
        # The offload pool's jobs ended at their deadline, and workers replaced.
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
        # Verified-prefix reuse (proxy/relay/prefix.py): hit rate, bytes not parsed again, size.
        self.prefix_reads = Counter(
            "chatmend_prefix_reads",
            "Repaired-API bodies read through the prefix cache, by result: hit (parsed from the "
            "session's cached prefix on), miss (parsed whole), skip (not a JSON object). Bodies "
            "over offload_body_bytes do not use it.",
            ["result"],
            registry=r,
        )
        self.prefix_resumes = Counter(
            "chatmend_prefix_resumes",
            "Hits that brought the previous request's record (prefix_cache.resume), by how the "
            "rules ran: resumed (over the new turn only) or whole (a rule declined, or could "
            "not say its horizon).",
            ["result"],
            registry=r,
        )
        self.prefix_reused = Counter(
            "chatmend_prefix_reused_bytes",
            "Bytes of request bodies not parsed again: the cached prefixes hits started from.",
            registry=r,
        )
        self.prefix_bytes = Gauge(
            "chatmend_prefix_cache_bytes",
            "What the prefix cache charges now (at most prefix_cache.max_bytes per process).",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.prefix_entries = Gauge(
            "chatmend_prefix_cache_entries",
            "Sessions the prefix cache holds now.",
            registry=r,
            multiprocess_mode="livesum",
        )
        # Under --workers (proxy/relay/owners.py): requests handed to the worker keeping their
        # session, counted by the worker that relayed them (the owner counts them as requests).
        self.handovers = Counter(
            "chatmend_worker_handovers",
            "Requests relayed to the worker keeping their session (--workers), by result: "
            "relayed (that worker answered them), unreachable (it could not be reached: served "
            "where they landed).",
            ["result"],
            registry=r,
        )
        self.log_write_failures = Counter(
            "chatmend_log_write_failures",
            "Log lines that could not be written (the request went on without them).",
            registry=r,
        )
        self._log_failures_seen = 0
        #: The children ``child`` looked up, by metric and label values.
        self._children: dict[tuple[object, ...], Counter] = {}
        self.streams = Gauge(
            "chatmend_streams_in_flight",
            "Responses being relayed right now.",
            registry=r,
            multiprocess_mode="livesum",  # with --workers: the sum over the live workers
        )

    def child(self, metric: Counter, *values: str) -> Counter:
        """``metric.labels(*values)``, looked up in prometheus-client once per label set (its
        lookup costs more than the increment): for the counters met on every request, whose
        label values are few (routes, APIs, statuses, profiles, rules and their actions)."""
        key = (metric, *values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def sync_log_failures(self, total: int) -> None:
        """Bring the counter up to the log sink's own count (kept by ``proxy.observe.log``, which
        has no metrics of its own)."""
        if total > self._log_failures_seen:
            self.log_write_failures.inc(total - self._log_failures_seen)
            self._log_failures_seen = total

    def exposition(self) -> bytes:
        """This app's samples; with ``--workers`` (prometheus-client's multiprocess mode, see
        ``proxy.server.workers``) every worker's, summed."""
        directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if directory is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
