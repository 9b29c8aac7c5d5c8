"""Learned repairs: a repair that recovered a refusal, applied before sending to the later
requests of the same client, route, upstream, API and model, so a stuck session pays one
refusal, not one per request.

Scoped like the reasoning stash (proxy/relay/credentials.py): the key holds the client's credential
scope (a digest of the credential it sent, never the credential), so what one client's refusal
taught never changes another client's request; a request without a credential has no scope, and
nothing is learned for it or applied to it. Never wider than what was refused: the model of the
refused request, the repair's own rules (each acts only where its defect is), and a rule's model
gate opened by the repair (``models: ["*"]``) opened for that model only.

What is learned is the whole repair that recovered the request, as it ran
(``proxy.recovery.retry.Retry.plan``: the rules that changed the body and those that stood with
them, with their options), never a part of it: a stub for an unanswered call is never applied
without the move that puts a displaced result back first. A later recovery on the same key adds its
own repair. Nothing is learned or applied on a route in ``mode: report``.

Bounded: at most ``MAX_ENTRIES`` keys (the oldest learned goes first), each forgotten
``learn_ttl`` seconds after it was learned (``recover.learn_ttl``; 0: nothing is learned), and
everything forgotten on a config reload (the routes, profiles and rules it was learned against
may have changed), in-flight recoveries included: a request carries the ``epoch`` it started
in, and what it learns after a reload is dropped. Only bodies repaired on the event loop get a
learned repair (those over ``offload_body_bytes`` are repaired in a worker with the route's own
plan, and are never recovered either).

With the reasoning stash in Redis (``reasoning.store: redis``) the learned repairs are shared by
the replicas through one Redis hash (``<prefix>learned``): a replica writes what it learns and
reads the others' every ``REFRESH_SECONDS``; a Redis failure only means a replica learns on its
own for a while.

What is learned is shown in ``chatmend_learned_repairs{route,model,rule,error_class}`` (how
many clients it is learned for) and by ``chatmend learned URL``; learning is logged
(``recovery_learned``) and counted (``chatmend_recovery_learned_total``), applying it counted
(``chatmend_learned_applied_total``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from proxy.observe.log import get_logger
from proxy.observe.metrics import Metrics
from rules.providers.apis import api_named
from rules.providers.planner import Plan, with_repair
from rules.providers.redirects import current
from rules.providers.sanitize import PlanSource, plan_for

log = get_logger()

#: How many (route, upstream, API, model) keys are remembered at most.
MAX_ENTRIES = 1024
#: How long a model name may be to be learned for (a longer one is not remembered).
MAX_MODEL_CHARS = 256
#: How often a replica reads the others' learned repairs from Redis.
REFRESH_SECONDS = 5.0

Key = tuple[str, str, str, str, str]  # route, upstream URL, API, model, client scope
Rules = Mapping[str, Mapping[str, Any]]
#: The labels of ``chatmend_learned_repairs``: route, model, rule, error class.
Shown = tuple[str, str, str, str]


@dataclass(slots=True)
class Entry:
    rules: dict[str, dict[str, Any]]
    error_class: str
    #: ``time.time()`` after which the entry is forgotten.
    expires: float
    #: The plan with the learned rules enforced, per planner (compiled on first use).
    plans: dict[int, Plan] = field(default_factory=dict)


class LearnedRepairs:
    """The learned repairs of one app (one process)."""

    def __init__(self, metrics: Metrics, *, max_entries: int = MAX_ENTRIES) -> None:
        self.metrics = metrics
        self.max_entries = max_entries
        self._entries: OrderedDict[Key, Entry] = OrderedDict()
        #: route -> how many keys are learned for it: the clean path's only lookup.
        self._routes: dict[str, int] = {}
        #: The gauge's label sets -> how many keys (clients) show each.
        self._shown: dict[Shown, int] = {}
        #: Bumped by every reload (``forget_all``): a recovery that started before it learns
        #: nothing.
        self.epoch = 0
        self.redis: Any = None
        self.redis_key = ""

    # --- the request path ----------------------------------------------------------------

    def on_route(self, route: str) -> bool:
        """Whether anything is learned for ``route`` (a dict lookup: all a request pays when
        nothing is)."""
        return route in self._routes

    def source(
        self,
        *,
        route: str,
        upstream: str,
        api: str,
        model: Any,
        scope: str | None,
        planner: PlanSource,
    ) -> PlanSource:
        """The plan a request of ``model`` from the client ``scope`` runs under: ``planner``'s,
        with what was learned for this key enforced; ``planner`` itself when nothing is."""
        if not isinstance(model, str) or scope is None:
            return planner
        key = (route, upstream, api, model, scope)
        entry = self._entries.get(key)
        if entry is None:
            return planner
        if entry.expires <= time.time():
            self._forget(key)
            return planner
        plan = entry.plans.get(id(planner))
        if plan is None:
            plan = entry.plans[id(planner)] = _enforced(
                plan_for(planner, model, api_named(api)), entry.rules
            )
        for rule in entry.rules:
            self.metrics.learned_applied.labels(route, rule).inc()
        return plan

    def learn(
        self,
        *,
        route: str,
        upstream: str,
        api: str,
        model: Any,
        scope: str | None,
        rules: Rules,
        error_class: str,
        ttl: float,
        epoch: int,
    ) -> None:
        """Remember ``rules`` (the whole repair that recovered a refusal) for this key, ``ttl``
        seconds: not for a request without a credential (``scope`` ``None``), nor one that
        started before the last reload (``epoch``)."""
        if ttl <= 0 or not isinstance(model, str) or len(model) > MAX_MODEL_CHARS:
            return
        if scope is None or epoch != self.epoch:
            reason = "no_credential" if scope is None else "reloaded"
            log.info("recovery_not_learned", route=route, api=api, reason=reason)
            return
        key = (route, upstream, api, model, scope)
        entry = self._entries.get(key)
        known = dict(entry.rules) if entry is not None else {}
        added = {
            name: narrowed(options, model) for name, options in rules.items() if name not in known
        }
        merged = {**known, **added}
        self._put(key, Entry(merged, error_class, time.time() + ttl))
        if not added and entry is not None:
            return
        self.metrics.recovery_learned.labels(route, error_class).inc()
        log.info(
            "recovery_learned",
            route=route,
            api=api,
            model=model,
            rules=list(added),
            error_class=error_class,
            ttl_seconds=ttl,
        )
        if self.redis is not None:
            task = asyncio.get_running_loop().create_task(self._publish(key))
            _PENDING.add(task)
            task.add_done_callback(_PENDING.discard)

    def forget_all(self) -> None:
        """Forget everything (a config reload), and what recoveries in flight would learn."""
        self.epoch += 1
        for key in list(self._entries):
            self._forget(key)
        if self.redis is not None:
            with contextlib.suppress(RuntimeError):  # no running loop: nothing shared to clear
                task = asyncio.get_running_loop().create_task(self._clear())
                _PENDING.add(task)
                task.add_done_callback(_PENDING.discard)

    def entries(self) -> list[tuple[Key, Entry]]:
        """What is learned now (expired entries dropped)."""
        now = time.time()
        for key in [key for key, entry in self._entries.items() if entry.expires <= now]:
            self._forget(key)
        return list(self._entries.items())

    # --- bookkeeping ---------------------------------------------------------------------

    def _put(self, key: Key, entry: Entry) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._unshow(key, old)
        else:
            self._routes[key[0]] = self._routes.get(key[0], 0) + 1
        self._entries[key] = entry
        for rule in entry.rules:
            shown = (key[0], key[3], rule, entry.error_class)
            self._shown[shown] = self._shown.get(shown, 0) + 1
            self.metrics.learned.labels(*shown).set(self._shown[shown])
        while len(self._entries) > self.max_entries:
            self._forget(next(iter(self._entries)))

    def _forget(self, key: Key) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        self._unshow(key, entry)
        count = self._routes.get(key[0], 0) - 1
        if count > 0:
            self._routes[key[0]] = count
        else:
            self._routes.pop(key[0], None)

    def _unshow(self, key: Key, entry: Entry) -> None:
        for rule in entry.rules:
            shown = (key[0], key[3], rule, entry.error_class)
            left = self._shown.get(shown, 0) - 1
            if left > 0:
                self._shown[shown] = left
                self.metrics.learned.labels(*shown).set(left)
                continue
            self._shown.pop(shown, None)
            with contextlib.suppress(KeyError):
                self.metrics.learned.remove(*shown)

    # --- sharing through Redis -----------------------------------------------------------

    def share(self, client: Any, prefix: str) -> None:
        """Share through Redis (``client``: a ``redis.asyncio.Redis``)."""
        self.redis = client
        self.redis_key = prefix + "learned"

    async def _publish(self, key: Key) -> None:
        entry = self._entries.get(key)
        if entry is None:
            return
        value = {"rules": entry.rules, "class": entry.error_class, "expires": entry.expires}
        try:
            await self.redis.hset(self.redis_key, orjson.dumps(key), orjson.dumps(value))
        except Exception as exc:
            log.warning("learned_share_failed", operation="write", error=type(exc).__name__)

    async def _clear(self) -> None:
        try:
            await self.redis.delete(self.redis_key)
        except Exception as exc:
            log.warning("learned_share_failed", operation="clear", error=type(exc).__name__)

    async def refresh(self) -> None:
        """Read what the replicas learned (dropping what expired, at most ``max_entries``)."""
        if self.redis is None:
            return
        try:
            found = await self.redis.hgetall(self.redis_key)
        except Exception as exc:
            log.warning("learned_share_failed", operation="read", error=type(exc).__name__)
            return
        now = time.time()
        expired: list[bytes] = []
        for raw_key, raw_value in list(found.items())[: self.max_entries * 2]:
            try:
                key = tuple(orjson.loads(raw_key))
                value = orjson.loads(raw_value)
                expires = float(value["expires"])
                rules = {current(str(k)): dict(v) for k, v in value["rules"].items()}
                error_class = str(value["class"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
                continue
            if len(key) != 5 or not all(isinstance(part, str) for part in key):
                continue
            if expires <= now:
                expired.append(raw_key)
                continue
            typed: Key = (key[0], key[1], key[2], key[3], key[4])
            mine = self._entries.get(typed)
            if mine is None or mine.expires < expires or set(rules) - set(mine.rules):
                merged = {**rules, **(mine.rules if mine else {})}
                latest = max(expires, mine.expires if mine else 0.0)
                self._put(typed, Entry(merged, error_class, latest))
        if expired:
            with contextlib.suppress(Exception):
                await self.redis.hdel(self.redis_key, *expired)

    async def run_refresh(self, every: float = REFRESH_SECONDS) -> None:
        """Refresh every ``every`` seconds until cancelled."""
        while True:
            await self.refresh()
            await asyncio.sleep(every)


#: Publishing tasks in flight (kept so they are not collected before they ran).
_PENDING: set[asyncio.Task[None]] = set()


def narrowed(options: Mapping[str, Any], model: str) -> dict[str, Any]:
    """A repair's options as learned for ``model``: a model gate the repair opened for every
    model (``models: ["*"]``) opens for this one (its name matched literally, as the rules
    match it: lower-cased)."""
    out = dict(options)
    if out.get("models") == ["*"]:
        out["models"] = [_literal(model.lower())]
    return out


def _literal(name: str) -> str:
    """``name`` as an ``fnmatch`` pattern that matches only itself."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in name)


def _enforced(plan: Plan, rules: Rules) -> Plan:
    """``plan`` with ``rules`` enforced (``with_repair``), its other rules' report mode kept."""
    enforced = with_repair(plan, rules)
    report = tuple(step for step in (plan.report or ()) if step[0].name not in rules)
    return replace(enforced, report=report or None, reported=plan.reported - set(rules))


def learned_table(exposition: str) -> list[dict[str, str]]:
    """What ``chatmend_learned_repairs`` shows in a ``/metrics`` text: one row per route,
    model, rule and error class learned (``chatmend learned``)."""
    from prometheus_client.parser import text_string_to_metric_families

    rows = []
    for family in text_string_to_metric_families(exposition):
        if family.name != "chatmend_learned_repairs":
            continue
        for sample in family.samples:
            if sample.value >= 1:
                labels = sample.labels
                rows.append({key: labels.get(key, "") for key in _COLUMNS})
    return sorted(rows, key=lambda row: tuple(row.values()))


_COLUMNS = ("route", "model", "rule", "error_class")


def format_table(rows: list[dict[str, str]]) -> str:
    """``rows`` as aligned columns (``nothing learned`` when empty)."""
    if not rows:
        return "nothing learned\n"
    widths = {key: max(len(key), *(len(row[key]) for row in rows)) for key in _COLUMNS}
    lines = ["  ".join(key.ljust(widths[key]) for key in _COLUMNS).rstrip()]
    lines += ["  ".join(row[key].ljust(widths[key]) for key in _COLUMNS).rstrip() for row in rows]
    return "\n".join(lines) + "\n"
