"""Where the proxy calls into the stash: before the rules (one lookup) and around the relay.

``ReasoningHooks`` is built once per app. Per request it costs nothing unless the request runs
under a profile whose plan for its API has a rule that recalls (``Rule.recall``: chat's
``reasoning-content``, Messages' ``messages-missing-thinking``): then the body is parsed here
once (``sanitize_body`` reuses that parse); if the rule serves the request (thinking mode) and
the body holds a tool turn (``"tool_calls"``, ``"tool_use"``), the keys it asks for go to the
store in one ``get_many`` and reach the rules in ``RuleContext.given``; and a 200 response gets
the API's observer. No rule is looked up by name (but for counting, in ``report``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

import orjson
from aiohttp import ClientResponse
from multidict import CIMultiDict

from proxy.observe.flow import Flow, Subscriber
from proxy.observe.log import get_logger
from proxy.observe.metrics import Metrics
from proxy.stash import Stash
from proxy.stash.observer import READABLE_ENCODINGS, BodyObserver, readable_accept_encoding
from rules.chat import reasoning_content
from rules.engine.base import RequestFacts, RuleContext, StashQuery
from rules.engine.pipeline import Carried
from rules.messages import missing_thinking
from rules.providers.apis import api_named
from rules.providers.planner import Plan, Planner

log = get_logger()

#: The ``chatmend_limits_total`` label of a response the observer stopped observing.
OBSERVED_LIMIT = "observed_response"
#: Per restoring rule: its actions for a restore and for a placeholder (``report``).
RESTORING = {
    reasoning_content.NAME: ("restored_reasoning", "inserted_placeholder"),
    missing_thinking.NAME: ("restored_thinking", "added_thinking"),
}


@dataclass(slots=True)
class RequestReasoning:
    """What the request side hands to the rules and to the response side."""

    #: The request's scope and what was recalled for it, given to the rules that read it.
    given: RequestFacts
    #: The body parsed for the lookup, for ``sanitize_body`` to reuse (``None``: not parsed).
    payload: dict[str, Any] | None = None
    #: Whether the response is worth observing: the request runs in thinking mode (a model
    #: that does not think produces no reasoning to store). ``True`` where it was not read.
    thinking: bool = True
    #: The request's API (``chat`` or ``messages``): which plans recall, which observer reads.
    api: str = "chat"
    #: The keys its turns want from the store (``ReasoningHooks.read``; ``[]``: none).
    wanted: list[str] = field(default_factory=list)
    #: What the session's last request was given, when this one is that one plus a turn and
    #: its keys were taken from it (``wanted_of``): the values found then are given again, and
    #: only the other keys are asked of the store.
    before: RequestFacts | None = None


#: Runs ``function(body, planner, *args)`` elsewhere and returns its result.
Offload = Callable[..., Awaitable[Any]]


def plan_of(planner: Planner, model: Any, api: str) -> Plan:
    """The plan a request of ``api`` for ``model`` runs under."""
    return planner.for_api(api_named(api), model)


def _wanted(payload: dict[str, Any], planner: Planner, scope: str, api: str) -> list[str]:
    recalling = plan_of(planner, payload.get("model"), api).recalling()
    return [] if recalling is None else recalling[0].keys(payload, recalling[1], scope, 0)


def wanted_of(
    recalling: tuple[StashQuery, RuleContext],
    payload: dict[str, Any],
    scope: str,
    carried: Carried | None,
) -> tuple[list[str], RequestFacts | None]:
    """The keys ``payload``'s turns want: those the session's last request asked for its own
    turns, then those of the turns added since, when this body is that request's plus a turn
    (``carried``: its rules' record, proxy/relay/prefix.py ``Reading.resume``) and that request
    asked under the same options and scope (a turn's keys are its own: ``StashQuery``), with
    the facts that request was given; else every turn's, read anew, and ``None``."""
    query, ctx = recalling
    if carried is not None:
        for rule, was in carried.steps:
            if rule.recall is not query:
                continue
            asked = was.given.wanted
            if asked is not None and was.options is ctx.options and was.given.scope == scope:
                return [*asked, *query.keys(payload, ctx, scope, carried.length)], was.given
            break
    return query.keys(payload, ctx, scope, 0), None


def wanted_keys_of(body: bytes, planner: Planner, scope: str, api: str = "chat") -> list[str]:
    """The stash keys a body's turns want (``[]`` if it is not a JSON object): picklable, for
    a worker process."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    return _wanted(payload, planner, scope, api) if type(payload) is dict else []


class ReasoningHooks(Subscriber):
    """The stash as the server meets it: the lookup before the rules (``before_rules``), the
    observer of a response (``observes``, ``observer``, ``after_relay``), and a subscriber of
    the flow's ``repaired`` (the restores and placeholders counted)."""

    def __init__(self, stash: Stash | None, metrics: Metrics) -> None:
        self.stash = stash
        self.metrics = metrics
        #: Per planner (one per route, replaced on reload) and API: the profiles whose plan
        #: recalls.
        self._profiles: WeakKeyDictionary[Planner, dict[str, frozenset[str]]] = WeakKeyDictionary()

    def profiles(self, planner: Planner, api: str = "chat") -> frozenset[str]:
        """The profiles whose plan for ``api`` has a rule that recalls, computed once per
        planner."""
        known = self._profiles.get(planner)
        if known is None:
            known = self._profiles[planner] = {}
        found = known.get(api)
        if found is None:
            plans = planner.plans_for(api_named(api))
            found = known[api] = frozenset(n for n, plan in plans.items() if plan.recalling())
        return found

    async def before_rules(
        self,
        planner: Planner,
        body: bytes,
        scope: str | None,
        *,
        offload: Offload | None = None,
        api: str = "chat",
        mark: bytes | None,
        parsed: dict[str, Any] | None = None,
    ) -> RequestReasoning | None:
        """The recalled reasoning for a request of ``api`` (``chat`` or ``messages``) whose
        client's credential scope is ``scope`` (``proxy.relay.credentials.request_scope``), or
        ``None`` when nothing is stashed (or the client sent no credential, ``scope`` is
        ``None``: an anonymous request is never stored or recalled): ``read``, then ``recall``.
        ``offload`` runs the parse and the key walk elsewhere (a big body, see proxy/offload):
        the payload is then not kept, ``sanitize_body`` parses it again where it runs."""
        if offload is None:
            reasoning = self.read(planner, body, scope, api=api, mark=mark, parsed=parsed)
            if reasoning is not None and reasoning.wanted:
                await self.recall(reasoning)
            return reasoning
        stash = self.stash
        if stash is None or mark is None or scope is None or not self.profiles(planner, api):
            return None
        reasoning = RequestReasoning(RequestFacts(scope), api=api)
        try:
            # A big body is read in a worker: its response is observed in any case.
            if mark in body:
                keys = await offload(wanted_keys_of, body, planner, scope, api)
                if keys:
                    recalled = await stash.recall(keys)
                    reasoning.given = RequestFacts(scope, recalled, wanted=keys)
        except Exception as exc:  # fail-open, like the rules: the request goes on without it
            log.error("reasoning_recall_failed", error=type(exc).__name__)
        return reasoning

    def read(
        self,
        planner: Planner,
        body: bytes,
        scope: str | None,
        *,
        api: str = "chat",
        mark: bytes | None,
        parsed: dict[str, Any] | None = None,
        carried: Carried | None = None,
    ) -> RequestReasoning | None:
        """``before_rules`` up to the store, on this thread and without waiting: the body parsed
        (``parsed``: already parsed, proxy/relay/prefix.py, then not parsed here; the one parse,
        ``sanitize_body`` reuses it), whether it runs in thinking mode, and the keys its turns
        want from the store (``RequestReasoning.wanted``: ``recall`` fetches them; ``carried``:
        the rules' record of the session's last request, when this body is that one's plus a
        turn, whose keys are not read again). ``mark``: what marks a body of ``api`` holding a
        tool turn (``proxy.relay.served.ServedApi.tool_turn``)."""
        if self.stash is None or mark is None or scope is None or not self.profiles(planner, api):
            return None
        reasoning = RequestReasoning(RequestFacts(scope), api=api)
        try:
            try:
                payload = orjson.loads(body) if parsed is None else parsed
            except orjson.JSONDecodeError:
                return reasoning  # sanitize_body reads it its own way (surrogates, errors)
            if type(payload) is not dict:
                return reasoning
            reasoning.payload = payload
            recalling = plan_of(planner, payload.get("model"), api).recalling()
            # Not served (thinking mode off): nothing to restore, nothing in the response to keep.
            reasoning.thinking = recalling is not None and recalling[0].serves(
                payload, recalling[1]
            )
            if recalling is not None and reasoning.thinking and mark in body:
                # A first turn wants none.
                reasoning.wanted, reasoning.before = wanted_of(recalling, payload, scope, carried)
        except Exception as exc:  # fail-open, like the rules: the request goes on without it
            log.error("reasoning_recall_failed", error=type(exc).__name__)
        return reasoning

    async def recall(self, reasoning: RequestReasoning) -> None:
        """The texts of ``reasoning.wanted`` from the store, given to the rules (the one wait of
        the lookup: nothing else in it waits). A session's request that is its last one plus a
        turn is given again what the last one was given for its turns, and asks the store for
        the rest: the turns it had no text for, and every new turn's keys, even one an old turn
        shares (two turns with the same calls have one key, and the store keeps its newest
        text: given to both, as a lookup of every key gives it)."""
        stash = self.stash
        try:
            if stash is not None and reasoning.wanted:
                before = reasoning.before
                known = {} if before is None else before.recalled
                old = 0 if before is None or before.wanted is None else len(before.wanted)
                wanted = reasoning.wanted
                asked = [key for key in wanted[:old] if key not in known] + wanted[old:]
                recalled = {**known, **await stash.recall(asked)} if asked else dict(known)
                # What was asked goes too: the session's next request resumes the rules when
                # it is given the same values for these keys (rules/engine/resume.py).
                reasoning.given = RequestFacts(
                    reasoning.given.scope, recalled, wanted=reasoning.wanted
                )
        except Exception as exc:  # fail-open, like the rules: the request goes on without it
            log.error("reasoning_recall_failed", error=type(exc).__name__)

    def observes(
        self, planner: Planner, profile: str | None, reasoning: RequestReasoning | None
    ) -> bool:
        """The response to this request will be observed if it is a 200."""
        return (
            self.stash is not None
            and reasoning is not None
            and reasoning.thinking
            and profile in self.profiles(planner, reasoning.api)
        )

    def offer_readable_encodings(self, headers: CIMultiDict[str]) -> None:
        """Narrow the upstream request's ``Accept-Encoding`` to what the observer reads (on an
        observed request only): a client offering ``zstd`` or ``br`` would otherwise get a body
        chatmend cannot read, and its reasoning would never be stored."""
        offered = headers.getall("Accept-Encoding", ())
        if offered:
            joined = ", ".join(offered)
            narrowed = readable_accept_encoding(joined)
            if narrowed != joined:
                headers["Accept-Encoding"] = narrowed

    def observer(
        self,
        planner: Planner,
        profile: str | None,
        reasoning: RequestReasoning | None,
        upstream: ClientResponse,
        *,
        kind: type[BodyObserver],
    ) -> BodyObserver | None:
        """An observer of ``kind`` (the request's API's: ``ServedApi.observer``) for a 200
        response to a request whose profile has the rule."""
        if (
            self.stash is None
            or reasoning is None
            or not reasoning.thinking
            or upstream.status != 200
            or profile not in self.profiles(planner, reasoning.api)
        ):
            return None
        encoding = upstream.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in READABLE_ENCODINGS:
            # The upstream compressed it anyway (chatmend offered it only what it reads).
            log.warning(
                "reasoning_not_observed",
                reason="unreadable_content_encoding",
                encoding=encoding[:32],
            )
            return None
        scope = reasoning.given.scope
        return self.stash.observer_for(
            scope, upstream.content_type, encoding, kind, self._not_observed
        )

    def _not_observed(self, bound: str) -> None:
        """A response past the observer's bounds: counted and logged; the relay went
        on untouched, nothing of it is stored."""
        self.metrics.limits.labels(OBSERVED_LIMIT).inc()
        log.warning("limit_exceeded", limit=OBSERVED_LIMIT, bound=bound)

    async def after_relay(self, observer: BodyObserver | None) -> None:
        """Wait for the observer's writes: the response ends only once they are stored."""
        if observer is not None and observer.pending and self.stash is not None:
            await self.stash.settle(observer.pending)

    def repaired(self, flow: Flow) -> None:
        """Count the restoring rules' restores and placeholders; log ``reasoning_placeholder``
        (message indices and counts only, never text)."""
        changes = () if flow.sanitized is None else flow.sanitized.changes
        if not changes:  # the clean path
            return
        actions: Counter[str] = Counter()
        placed: list[int] = []
        for change in changes:
            restoring = RESTORING.get(change.rule)
            if restoring is not None and change.action in restoring:
                actions[change.action] += 1
                if change.action == restoring[1]:
                    placed.append(change.index)
        if not actions:
            return
        restored = actions["restored_reasoning"] + actions["restored_thinking"]
        if restored:
            self.metrics.reasoning.labels("restored").inc(restored)
        if placed:
            self.metrics.reasoning.labels("placeholder").inc(len(placed))
            log.info(
                "reasoning_placeholder",
                count=len(placed),
                indices=placed,
                restored=restored,
                store=None if self.stash is None else self.stash.store.name,
            )
