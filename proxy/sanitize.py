"""Bytes in, bytes out: parse once, run the rules, forward the original bytes if nothing changed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from rules import Change, Rule, RuleContext, RuleFailure, lone_surrogates, run_rules
from rules.contract import Violation, violations


@dataclass(frozen=True, slots=True)
class Sanitized:
    """The body to forward and what happened to it."""

    body: bytes
    changes: tuple[Change, ...] = ()
    failures: tuple[RuleFailure, ...] = ()
    #: Why the rules did not run (the body is then as it came), else ``None``: ``body_not_json``,
    #: ``json_too_deep`` (nested past orjson's 1024 levels), ``body_not_object``,
    #: ``messages_missing``, ``messages_not_list``, ``unserializable``.
    skipped: str | None = None
    #: What the provider contract still rejects in a rewritten body. Checked only after a
    #: rewrite: an untouched body passed every rule's prescan, which the tests hold to the same
    #: contract, and checking it again would cost one more pass on every clean request.
    violations: tuple[Violation, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def sanitize_body(raw: bytes, steps: Sequence[tuple[Rule, RuleContext]]) -> Sanitized:
    """Repair a chat-completions request body.

    Whatever cannot be handled is forwarded as it came, with the reason in ``skipped``:
    the upstream then answers the client exactly as it would have without chatmend.
    """
    early: tuple[Change, ...] = ()  # what was repaired before the rules ran
    try:
        payload = orjson.loads(raw)
        # orjson decodes only valid UTF-8 and paired surrogates: no string can hold a lone
        # one, so the rule that looks for them has nothing to find.
        steps = [step for step in steps if step[0].name != lone_surrogates.NAME]
    except orjson.JSONDecodeError as exc:
        # orjson parses at most 1024 levels of nesting; the proxy refuses deeper bodies.
        if exc.msg.startswith("depth limit"):
            return Sanitized(raw, skipped="json_too_deep")
        repaired = _with_lone_surrogates(raw, steps) if "surrogate" in exc.msg else None
        if repaired is None:
            return Sanitized(raw, skipped="body_not_json")
        payload, early = repaired
    if not isinstance(payload, dict):
        return Sanitized(raw, skipped="body_not_object")
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return Sanitized(
            raw, skipped="messages_missing" if messages is None else "messages_not_list"
        )
    # The freshly parsed payload is already a private deep copy: no clone needed.
    result = run_rules(messages, steps, private=True)
    if not result.changed and not early:
        return Sanitized(raw, failures=result.failures)
    payload["messages"] = result.messages
    try:
        body = orjson.dumps(payload)
    except TypeError:
        # e.g. a value orjson cannot write back; never forward something half-done.
        return Sanitized(raw, failures=result.failures, skipped="unserializable")
    try:
        left = tuple(violations(payload))
    except Exception as exc:  # the check is a report: it must never block a repaired body
        failures = (*result.failures, RuleFailure.of("contract", exc))
        return Sanitized(body, (*early, *result.changes), failures)
    return Sanitized(body, (*early, *result.changes), result.failures, violations=left)


def _with_lone_surrogates(
    raw: bytes, steps: Sequence[tuple[Rule, RuleContext]]
) -> tuple[Any, tuple[Change, ...]] | None:
    """A body orjson refused, read by the standard library (which keeps lone surrogates, from
    escapes or from surrogate bytes), with its fields outside ``messages`` repaired; the
    messages are left to the lone-surrogates rule. ``None`` if it is not JSON after all, or if
    the rule is off (the body then goes as it came)."""
    if not any(rule.name == lone_surrogates.NAME for rule, _ in steps):
        return None
    try:
        payload = json.loads(raw, parse_constant=_reject_constant, parse_float=_finite)
    except (ValueError, RecursionError):
        return None
    if not isinstance(payload, dict):
        return payload, ()
    rest = {key: value for key, value in payload.items() if key != "messages"}
    fixed, paths = lone_surrogates.repair_value(rest)
    if not paths:
        return payload, ()
    if "messages" in payload:
        fixed["messages"] = payload["messages"]
    detail = {"count": len(paths), "paths": paths}
    return fixed, (Change(lone_surrogates.NAME, -1, "replaced", detail),)


def _reject_constant(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity are not JSON: such a body is not ours to fix


def _finite(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        raise ValueError(literal)  # 1e400: written back it would be null, a changed value
    return value
