"""What chatmend says about a request, as a subscriber of its flow (proxy/observe/flow.py): its
metrics and its log lines, one place for each event. Nothing here changes a body or decides where
it goes; the one thing it adds to an answer is ``X-Chatmend-Client-Index`` (a 4xx to a rewritten
body, not yet sent)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from proxy.observe.flow import Flow, Subscriber, ms
from proxy.observe.log import MAX_FIELD_ITEMS, get_logger
from proxy.observe.metrics import Metrics, classify
from rules.engine.base import Change
from rules.providers.apis import api_named, safety_of
from rules.providers.provenance import explain
from rules.providers.sanitize import Sanitized

log = get_logger()

#: On a 4xx to a rewritten body whose error text cites an index: ``messages[2]=messages[3];
#: rules=a,b`` (the index chatmend sent = the client's; ``inserted`` for a message it added).
CLIENT_INDEX_HEADER = "X-Chatmend-Client-Index"
#: Why a repaired body went as it came anyway, each counted as a limit: nested past what orjson
#: writes (255 levels), or a signed block with a duplicate key.
LIMITED_SKIPS = frozenset({"unserializable", "duplicate_signed_keys"})


class Accounting(Subscriber):
    """The metrics and the log lines of every request."""

    def __init__(self, meter: Metrics) -> None:
        self.meter = meter

    def request_read(self, flow: Flow) -> None:
        """A body the rules will not read (an encoding chatmend does not decode, or broken):
        it goes as it came."""
        if flow.unread is not None:
            log.info("payload_not_sanitized", reason=flow.unread)

    def limited(self, flow: Flow, limit: str, fields: Mapping[str, object]) -> None:
        """Count and log a request that met one of chatmend's limits."""
        self.meter.limits.labels(limit).inc()
        log.warning("limit_exceeded", limit=limit, **fields)

    def repaired(self, flow: Flow) -> None:
        """Count and log what the rules did to a body."""
        result = flow.sanitized
        if result is None or _untouched(result):  # the clean path: nothing to count or log
            return
        # Counted per (rule, action), not per change: a body with 100,000 changes costs a few
        # increments.
        meter = self.meter
        made = result.tally()
        for (rule, action), count in made.items():
            meter.child(meter.rewrites, rule, action).inc(count)
        capped = {c.rule for c in result.changes if "over_cost_cap" in c.detail}
        for rule in sorted(capped):
            self.limited(flow, "arguments_cost_cap", {"rule": rule})
        reported = Counter((c.rule, c.action) for c in result.reported)
        for (rule, action), count in reported.items():
            meter.reported.labels(rule, action).inc(count)
        self._failures(flow, result)
        for violation in result.violations:
            meter.violations.labels(flow.profile, violation.code).inc()
        if result.skipped in LIMITED_SKIPS:
            # The rules ran and repaired it, but the repair cannot be sent: counted.
            self.limited(flow, result.skipped, {})
        elif result.skipped:
            log.info("payload_not_sanitized", reason=result.skipped)
        self._logged(flow, result, made, reported)

    def _failures(self, flow: Flow, result: Sanitized) -> None:
        for failure in result.failures:
            self.meter.rule_failures.labels(failure.rule).inc()
            if failure.error == "WorkBudgetExceeded":  # a hostile shape: the rule was skipped
                self.limited(flow, "work_budget", {"rule": failure.rule})
            log.error("rule_failed", rule=failure.rule, error=failure.error, where=failure.where)

    def _logged(
        self,
        flow: Flow,
        result: Sanitized,
        made: Mapping[tuple[str, str], int],
        reported: Mapping[tuple[str, str], int],
    ) -> None:
        """The lines of a repaired body; ``made`` and ``reported`` count its changes by rule
        and action, listed or not (``Sanitized.tally``), in the order they were first made."""
        path = flow.request.path
        if result.changed:
            _changes("payload_sanitized", path, result.profile, result.changes, made)
        if result.reported:
            # Report mode: what the rules would have changed; the body went as the rules left
            # it without them (the original bytes, in global report mode).
            _changes("payload_reported", path, result.profile, result.reported, reported)
        if result.violations:
            # What the provider will still reject: a rule switched off, or a defect no rule
            # repairs.
            log.warning(
                "contract_violation",
                profile=result.profile,
                count=len(result.violations),
                codes=dict(Counter(v.code for v in result.violations)),
                violations=[v.as_dict() for v in result.violations],
            )

    def response_started(self, flow: Flow) -> None:
        meter = self.meter
        if flow.upstream_ms is not None:
            meter.upstream_seconds.observe(flow.upstream_ms / 1000)
        meter.streams.inc()

    def response_ended(self, flow: Flow) -> None:
        self.meter.streams.dec()

    def upstream_failed(self, flow: Flow, error: str | None, fields: Mapping[str, object]) -> None:
        log.warning("upstream_failed", error=error, **fields)

    def answered(self, flow: Flow) -> None:
        """Count a 4xx by its error class; when chatmend had rewritten the body, log what was
        applied and, when the provider's text cites an index of the list chatmend sent, the
        client's index for it (also in the ``X-Chatmend-Client-Index`` header of an answer not
        yet sent). The body stays as it is."""
        if flow.replied or flow.reply_reported:
            self._replied(flow)
        response = flow.response
        if response is None or not 400 <= response.status < 500:
            return
        refusal = flow.refusal
        self.meter.rejections.labels(str(response.status), classify(refusal)).inc()
        sent, original = flow.sanitized, flow.original
        if sent is None or not sent.changed or original is None:
            return  # (a body the rules changed is one of an API they repair: flow.api names it)
        field = api_named(flow.api).field
        # The whole body: the index may be in the message or in a field beside it (``param``).
        text = refusal.decode("utf-8", "replace") if refusal else None
        mapped = explain(original, sent.body, field, text)
        client = None if mapped is None or mapped[1] is None else f"{field}[{mapped[1]}]"
        log.warning(
            "upstream_rejected_rewritten",
            status=response.status,
            error_class=classify(refusal),
            rules=list(flow.rules),
            changes=flow.changes,
            cited=None if mapped is None else f"{field}[{mapped[0]}]",
            client_index=None if mapped is None else mapped[1],
            inserted_by_chatmend=mapped is not None and mapped[1] is None,
        )
        if mapped is not None and not response.prepared:
            value = f"{field}[{mapped[0]}]={client or 'inserted'}; rules={','.join(flow.rules)}"
            response.headers[CLIENT_INDEX_HEADER] = value

    def _replied(self, flow: Flow) -> None:
        """Count and log what the reply rules did to the answer (``response_repaired``: rule,
        choice or block, format, calls, tool names, characters held, and ``held_ms``, the
        longest a stream's events waited; never text or arguments)."""
        meter = self.meter
        for (rule, action), count in Counter((c.rule, c.action) for c in flow.replied).items():
            meter.child(meter.response_repairs, rule, action).inc(count)
        for (rule, action), n in Counter((c.rule, c.action) for c in flow.reply_reported).items():
            meter.response_reported.labels(rule, action).inc(n)
        for event, changes in (
            ("response_repaired", flow.replied),
            ("response_reported", flow.reply_reported),
        ):
            if changes:
                log.info(
                    event,
                    path=flow.request.path,
                    profile=flow.profile,
                    count=len(changes),
                    rules=dict(Counter(change.rule for change in changes)),
                    changes=[change.as_dict() for change in changes[:MAX_FIELD_ITEMS]],
                    held_ms=flow.reply_held_ms,
                )

    def done(self, flow: Flow) -> None:
        """The request's one ``request_done`` line and its counters."""
        meter = self.meter
        meter.child(meter.requests, flow.route, flow.api, str(flow.status), flow.profile).inc()
        if flow.overhead_ms is not None:
            meter.overhead_seconds.observe(flow.overhead_ms / 1000)
        request = flow.request
        log.info(
            "request_done",
            client_request_id=flow.client_request_id,
            method=request.method,
            path=request.path,
            status=flow.status,
            duration_ms=ms(flow.started),
            upstream_ms=flow.upstream_ms,
            sanitize_ms=flow.sanitize_ms,
            changes=flow.changes,
            outcome=flow.outcome,
            prefix=flow.prefix,
        )


def _untouched(result: Sanitized) -> bool:
    """Whether the rules left nothing to say: no change made or reported, no failure, no
    violation, no skip."""
    return not (
        result.changes
        or result.omitted
        or result.reported
        or result.failures
        or result.violations
        or result.skipped
    )


def _changes(
    event: str,
    path: str,
    profile: str | None,
    changes: tuple[Change, ...],
    counted: Mapping[tuple[str, str], int],
) -> None:
    """The line of a body's changes: how many, per rule (``counted``: per rule and action, the
    listed ``changes`` and those only counted), and the first ones described."""
    rules: dict[str, int] = {}
    for (rule, _), count in counted.items():
        rules[rule] = rules.get(rule, 0) + count
    count = sum(rules.values())
    # The first changes, as the log would cap the list (proxy.observe.log): never 100,000 dicts
    # built.
    shown = MAX_FIELD_ITEMS if count <= MAX_FIELD_ITEMS else MAX_FIELD_ITEMS - 1
    # Each unsafe or lossy change says so (``Rule.safety``): what it changed or dropped is in
    # its detail (ids, counts, names; content only where the route logs content, which the
    # log's processor enforces).
    listed: list[Any] = [_described(change) for change in changes[:shown]]
    if count > len(listed):
        listed.append(f"...[{count - len(listed)} more]")
    log.info(event, path=path, profile=profile, count=count, rules=rules, changes=listed)


def _described(change: Change) -> dict[str, Any]:
    described = change.as_dict()  # a new dict
    kind = safety_of(change)
    if kind != "safe":
        described["safety"] = kind
    return described
