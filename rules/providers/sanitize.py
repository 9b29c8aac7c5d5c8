"""Bytes in, bytes out: parse once, run the rules, forward the original bytes if nothing changed.

Pure, as the rest of ``rules/``: the server (proxy/server/trip.py), its worker processes
(proxy/relay/offload.py), recovery, ``chatmend check`` and the library all repair a body here."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

import orjson

from rules.chat import lone_surrogates
from rules.engine.base import Change, RequestFacts, Rule, RuleContext
from rules.engine.pipeline import (
    NOT_WALKED,
    Carried,
    PipelineResult,
    RuleFailure,
    Walked,
    run_rules,
)
from rules.engine.resume import resume_rules
from rules.engine.text import repair_value
from rules.messages import lone_surrogates as messages_lone_surrogates
from rules.providers.apis import CHAT_API, Api, api_named
from rules.providers.contract import Violation
from rules.providers.planner import Plan, Planner, plan_across
from rules.providers.writing import client_layout
from rules.responses import lone_surrogates as responses_lone_surrogates


class Layout(Protocol):
    """How a body's list is written in its bytes (the server's prefix cache,
    proxy/relay/prefix.py, or the body read alone, rules/providers/writing.py):
    ``write_spanned`` gives the bytes ``orjson.dumps(payload)`` gives, but for the messages no
    rule replaced, copied from ``raw`` as the client wrote them."""

    def write_spanned(
        self, raw: bytes, payload: Mapping[str, Any], field: str, closed: Closed | None
    ) -> tuple[bytes, int, int]:
        """The bytes, and where the items of the list are in them (``-1, -1``: not known);
        ``closed``: the list's first messages are those of the previous request's
        repaired list, written as the bytes given (``None``: the client's own)."""
        ...

    def unchecked(self, raw: bytes) -> bytes:
        """What of ``raw`` the signed-duplicates check has still to read (``_write``): a JSON
        text of every object of ``raw`` but the messages an earlier body's check read."""
        ...

    def signed_checked(self) -> None:
        """Say that ``raw`` holds no signed object that repeats a key."""
        ...


#: The bytes of a resumed list's first messages, as the previous request's body wrote them
#: (``None``: the client's bytes, no rule changed them), how many messages they are, and how
#: many of the client's messages they were made from.
Closed = tuple[bytes | memoryview | None, int, int]


#: What picks a request's rules and contract: a planner (by model), one plan, or bare steps
#: (run under the default contract).
PlanSource = Planner | Plan | Sequence[tuple[Rule, RuleContext]]

#: The rules that repair lone surrogates, skipped for bodies orjson could read.
_SURROGATE_RULES = frozenset(
    {lone_surrogates.NAME, responses_lone_surrogates.NAME, messages_lone_surrogates.NAME}
)


@dataclass(frozen=True, slots=True)
class Sanitized:
    """The body to forward and what happened to it."""

    body: bytes
    changes: tuple[Change, ...] = ()
    failures: tuple[RuleFailure, ...] = ()
    #: Why the rules did not run (the body is then as it came), else ``None``: ``body_not_json``,
    #: ``json_too_deep`` (nested past orjson's 1024 levels), ``body_not_object``,
    #: ``messages_missing``, ``messages_not_list`` (Responses: ``input_missing``,
    #: ``input_not_list``; a string ``input`` is not skipped), ``unserializable`` (nested past
    #: the 255 levels orjson writes), ``duplicate_signed_keys`` (a Messages body whose signed
    #: block repeats a key: written back it would change under its signature).
    skipped: str | None = None
    #: What the provider contract still rejects in a rewritten body, when the plan says
    #: ``verify`` (off by default: the property tests hold every profile's rules to its
    #: contract, and the check re-reads the whole rewritten body). Never run on a clean body.
    violations: tuple[Violation, ...] = ()
    #: The profile the request ran under (``None`` if the rules did not run).
    profile: str | None = None
    #: Report mode: what the rules in report mode would have changed (not applied).
    reported: tuple[Change, ...] = ()
    #: Changes made but not listed in ``changes`` (``capped``: a worker process sends back at
    #: most so many), counted by ``(rule, action)``.
    omitted: tuple[tuple[str, str, int], ...] = ()
    #: What the next request of the session resumes from (``sanitize_body(carry=True)``,
    #: rules/engine/resume.py), if the rules could leave it.
    carried: Carried | None = None
    #: The rules ran over what the request added to the previous one only.
    resumed: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def change_count(self) -> int:
        """Every change made, listed or not."""
        return len(self.changes) + sum(count for _, _, count in self.omitted)

    def tally(self) -> Counter[tuple[str, str]]:
        """The changes made, counted by ``(rule, action)``, listed or not."""
        counts = Counter((change.rule, change.action) for change in self.changes)
        for rule, action, count in self.omitted:
            counts[rule, action] += count
        return counts


def capped(result: Sanitized, limit: int) -> Sanitized:
    """``result`` with at most ``limit`` changes listed; the rest counted in ``omitted``."""
    if len(result.changes) <= limit:
        return result
    rest = Counter((change.rule, change.action) for change in result.changes[limit:])
    omitted = tuple((rule, action, count) for (rule, action), count in rest.items())
    return replace(result, changes=result.changes[:limit], omitted=omitted)


def sanitize_body(
    raw: bytes,
    source: PlanSource,
    api: str = "chat",
    *,
    parsed: dict[str, Any] | None = None,
    given: RequestFacts | None = None,
    walked: Walked = NOT_WALKED,
    layout: Layout | None = None,
    resume: Carried | None = None,
    carry: bool = False,
) -> Sanitized:
    """Repair a request body under the plan ``source`` picks for its model: a chat-completions
    body (``api="chat"``, its ``messages``) or a Responses body (``api="responses"``, its
    ``input``; a string ``input`` is left as it is, the request-level rules still run).

    ``parsed`` is ``orjson.loads(raw)`` if the caller already parsed it (proxy/relay/prefix.py): it
    is used instead of a second parse, and is the caller's no more; ``walked`` is what a walk of
    its list knows, ``layout`` how the list is written in ``raw`` (a repaired body is written
    from it), ``resume`` what the session's previous request left (``Sanitized.carried``;
    ``carry``: leave it) when this body is that one's plus messages with the same other fields
    (the caller checks it): the rules then run over the new messages only. ``given`` (what the
    proxy recalled for the request, and its ``anthropic-beta`` values) goes to the rules.

    What cannot be handled goes as it came (the reason in ``skipped``), as without chatmend.
    """
    # 1. Parse, once: a body chatmend cannot read goes as it came.
    read = _parse(raw, parsed)
    if isinstance(read, str):
        return Sanitized(raw, skipped=read)
    payload, readable = read
    # 2. The plan for its model, with what the proxy recalled for it.
    record = api_named(api)
    plan = plan_for(source, payload.get("model"), record)
    if given is not None and not given.empty:
        plan = plan.given(given)
    prepared = _prepare(raw, payload, readable, plan, record)
    if isinstance(prepared, str):
        return Sanitized(raw, skipped=prepared)
    payload, items, listed, steps, early = prepared
    reported = _report(raw, plan, record.field) if plan.report is not None and readable else ()
    # 3. The rules (the parsed payload is a private copy already), resumed if they can be.
    whole = readable and items is listed  # the list itself, read by orjson: a run to resume
    result = _rules(listed, steps, payload, walked, resume if whole else None, carry=carry)
    carried = result.carried if whole and carry else None
    done = partial(Sanitized, failures=result.failures, reported=reported, resumed=result.resumed)
    done = partial(done, profile=plan.profile)
    if not result.changed and not early:
        return done(raw, carried=carried)
    # 4. Written back, and checked against the contract when the plan says ``verify``.
    if result.request is not None:
        payload = dict(result.request)
    if isinstance(items, list):
        payload[record.field] = result.messages
    closed = _closed(resume) if result.resumed and resume is not None else None
    written = _write_spanned(raw, payload, api_named(plan.api), layout, closed, sent=items)
    if isinstance(written, str):
        return done(raw, skipped=written)
    sent = done(written[0], (*early, *result.changes), carried=_leave(carried, *written))
    return _checked(sent, payload, plan, given) if plan.verify else sent


def _rules(
    listed: list[Any],
    steps: Sequence[tuple[Rule, RuleContext]],
    payload: dict[str, Any],
    walked: Walked,
    resume: Carried | None,
    *,
    carry: bool,
) -> PipelineResult:
    """The steps over ``listed``: resumed from ``resume`` if it can be trusted
    (rules/engine/resume.py), else over the whole list (``carry``: recorded)."""
    if resume is not None:
        resumed = resume_rules(listed, steps, resume, request=payload, walked=walked)
        if resumed is not None:
            return resumed
    return run_rules(listed, steps, private=True, request=payload, walked=walked, record=carry)


def _closed(resume: Carried) -> Closed | None:
    """How the previous request's repaired list is written (``Layout.write_spanned``), or
    ``None`` when it was not kept (the list is then written whole)."""
    if resume.clean:
        return None, len(resume.messages), resume.length
    if resume.written is None:
        return None
    body, start, end = resume.written
    return memoryview(body)[start:end], len(resume.messages), resume.length


def _leave(carried: Carried | None, body: bytes, start: int, end: int) -> Carried | None:
    """``carried`` with the body written for it, for the next request to copy from."""
    if carried is None or carried.clean:
        return carried
    if start < 0:
        return None  # its list is not where the next request could find it
    return carried.but((body, start, end), carried.charge)


def _write_spanned(
    raw: bytes,
    payload: dict[str, Any],
    api: Api,
    layout: Layout | None,
    closed: Closed | None,
    *,
    sent: Any = None,
) -> tuple[bytes, int, int] | str:
    """``_write``, and where the list's items are in the bytes (``-1, -1``: not known).
    ``layout``: how the list is written in ``raw``; when none is given, a body in another
    writing than orjson's is read for it (rules/providers/writing.py), ``sent`` being its list
    as parsed, so that the messages no rule replaced keep the client's bytes."""
    if layout is None:
        layout = client_layout(raw, sent, api.field)
    if layout is None:
        written = _write(raw, payload, api)
        return written if isinstance(written, str) else (written, -1, -1)
    spans: list[tuple[int, int]] = []

    def write(value: dict[str, Any]) -> bytes:
        body, start, end = layout.write_spanned(raw, value, api.field, closed)
        spans.append((start, end))
        return body

    written = _write(raw, payload, api, write, layout)
    if isinstance(written, str):
        return written
    return (written, *spans[0]) if spans else (written, -1, -1)


def _checked(
    sent: Sanitized, payload: dict[str, Any], plan: Plan, given: RequestFacts | None
) -> Sanitized:
    """``sent`` with what the plan's contract still rejects in the rewritten ``payload``."""
    try:
        betas = given.betas if given is not None else frozenset()  # for the checks that read them
        left = api_named(plan.api).check(payload, plan.contract, betas)
        return replace(sent, violations=tuple(left))
    except Exception as exc:  # the check is a report: it must never block a repaired body
        return replace(sent, failures=(*sent.failures, RuleFailure.of("contract", exc)))


Prepared = tuple[
    dict[str, Any], Any, list[Any], Sequence[tuple[Rule, RuleContext]], tuple[Change, ...]
]


def _prepare(
    raw: bytes, payload: dict[str, Any], readable: bool, plan: Plan, record: Api
) -> Prepared | str:
    """The payload, its list field as sent, the list the rules run over, the steps to run and
    what was repaired before them (lone surrogates outside the list); or why the body goes as
    it came (``skipped``)."""
    field = record.field
    steps = plan.steps
    early: tuple[Change, ...] = ()
    if readable:
        # orjson decodes only valid UTF-8 and paired surrogates: the rule has nothing to find.
        steps = _readable_steps(steps)
    elif not any(rule.name in _SURROGATE_RULES for rule, _ in steps):
        return "body_not_json"  # the rule is off: it goes as it came
    else:
        payload, early = _repair_fields(payload, field)
    items = payload.get(field)
    if record.string_field and isinstance(items, str):
        return payload, items, [], steps, early  # a string holds no item: request-level rules
    if isinstance(items, list):
        return payload, items, items, steps, early
    return f"{field}_missing" if items is None else f"{field}_not_list"


#: The steps of a plan without the surrogate rules, by the plan's steps (``_readable_steps``).
_READABLE: dict[int, tuple[Sequence[Any], list[Any]]] = {}


def _readable_steps(steps: Sequence[Any]) -> list[Any]:
    """``steps`` without the rules that repair lone surrogates (a body orjson read holds none),
    computed once per plan: plans are few and long-lived; the memo is bounded anyway, and never
    holds a plan given one request's own facts (``RequestFacts.own``: new each request, and it
    holds the texts and keys)."""
    known = _READABLE.get(id(steps))
    if known is not None and known[0] is steps:
        return known[1]
    kept = [step for step in steps if step[0].name not in _SURROGATE_RULES]
    if any(ctx.given.own for _, ctx in steps):
        return kept  # one request's: what was recalled for it is not kept here
    if len(_READABLE) >= 64:
        _READABLE.clear()
    _READABLE[id(steps)] = (steps, kept)
    return kept


def _write(
    raw: bytes,
    payload: dict[str, Any],
    api: Api,
    write: Callable[[dict[str, Any]], bytes] | None = None,
    layout: Layout | None = None,
) -> bytes | str:
    """The repaired payload as bytes, or why it goes as it came: ``unserializable`` (nested
    deeper than the 255 levels orjson writes, though it reads 1024: never forward something
    half-done; the proxy counts it as ``limit_exceeded``), ``duplicate_signed_keys`` (written
    back, a signed block with a duplicate key would keep only its last value under a signature
    that may cover the first). ``write`` writes the payload as ``orjson.dumps`` would, from
    the client's bytes of what no rule changed (``proxy.relay.prefix.Layout.write``); the
    ``layout`` it writes from says what an earlier body's check read already."""
    try:
        body = orjson.dumps(payload) if write is None else write(payload)
    except TypeError:
        return "unserializable"
    if api.signed:
        if signed_duplicates(raw if layout is None else layout.unchecked(raw)):
            return "duplicate_signed_keys"
        if layout is not None:
            layout.signed_checked()  # the next body of the session reads only what it adds
    return body


def _parse(raw: bytes, parsed: dict[str, Any] | None) -> tuple[dict[str, Any], bool] | str:
    """The body as a JSON object, and whether orjson could read it (else the standard library
    read it, keeping its lone surrogates); or why it is not one (``skipped``)."""
    try:
        payload = orjson.loads(raw) if parsed is None else parsed
        readable = True  # orjson read it: no string can hold a lone surrogate
    except orjson.JSONDecodeError as exc:
        # orjson parses at most 1024 levels of nesting; the proxy refuses deeper bodies. Its
        # wording: "depth limit exceeded" (3.11 on), "recursion depth exceeded" before.
        if "depth" in exc.msg:
            return "json_too_deep"
        payload = read_with_surrogates(raw) if "surrogate" in exc.msg else None
        if payload is None:
            return "body_not_json"
        readable = False
    return (payload, readable) if isinstance(payload, dict) else "body_not_object"


def _report(raw: bytes, plan: Plan, field: str) -> tuple[Change, ...]:
    """What the report-mode rules would change: every step runs on a second parse of the body
    (the enforced run owns the first), and their changes are kept."""
    assert plan.report is not None
    payload = orjson.loads(raw)
    items = payload.get(field)
    steps = [step for step in plan.report if step[0].name not in _SURROGATE_RULES]
    result = run_rules(
        items if isinstance(items, list) else [], steps, private=True, request=payload
    )
    return tuple(change for change in result.changes if change.rule in plan.reported)


def plan_for(source: PlanSource, model: Any, api: Api = CHAT_API) -> Plan:
    """The plan ``source`` gives an ``api`` request for ``model``. A chat plan given for a
    Responses or Messages request (``chatmend check --profile``) gives way to the same profile's
    plan for that API; bare steps run under the API's core contract."""
    if isinstance(source, Planner):
        return source.for_api(api, model)
    if isinstance(source, Plan):
        return plan_across(source, api)
    return Plan("custom", source, api.core, api=api.name)


def read_with_surrogates(raw: bytes) -> Any:
    """A body orjson refused, read by the standard library (which keeps lone surrogates, from
    escapes or from surrogate bytes); ``None`` if it is not JSON after all."""
    try:
        return json.loads(raw, parse_constant=_reject_constant, parse_float=_finite)
    except (ValueError, RecursionError):
        return None


def _repair_fields(
    payload: dict[str, Any], field: str = "messages"
) -> tuple[dict[str, Any], tuple[Change, ...]]:
    """The payload with lone surrogates replaced in its fields outside the ``field`` list
    (that is left to the lone-surrogates rules; a non-list ``field`` is repaired here)."""
    listed = isinstance(payload.get(field), list)
    rest = {key: value for key, value in payload.items() if not (listed and key == field)}
    fixed, paths = repair_value(rest)
    if not paths:
        return payload, ()
    if listed:
        fixed[field] = payload[field]
    detail = {"count": len(paths), "paths": paths}
    return fixed, (Change(lone_surrogates.NAME, -1, "replaced", detail),)


class _Duplicate(Exception):
    pass


def _no_signed_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len(pairs) > 1:
        keys = [key for key, _ in pairs]
        if "signature" in keys and len(set(keys)) != len(keys):
            raise _Duplicate
    return dict(pairs)


#: How a ``signature`` key could be written other than plainly: a lower-case ASCII letter
#: escaped (``"\u0073ignature"``), which no JSON writer does on its own.
_ESCAPED_LETTER = re.compile(rb"\\u00[67][0-9a-fA-F]")


def signed_duplicates(raw: bytes) -> bool:
    """Some object of the body that carries a ``signature`` repeats a key (``{"thinking": "a",
    "signature": "s", "thinking": "b"}``). One standard-library parse, only for a Messages body
    the rules rewrote that could hold a signature at all (its key written plainly or with an
    escaped letter)."""
    if b'"signature"' not in raw and _ESCAPED_LETTER.search(raw) is None:
        return False
    try:
        json.loads(raw, object_pairs_hook=_no_signed_duplicates)
    except _Duplicate:
        return True
    except (ValueError, RecursionError):
        return False
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity are not JSON: such a body is not ours to fix


def _finite(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        raise ValueError(literal)  # 1e400: written back it would be null, a changed value
    return value
