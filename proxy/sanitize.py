"""Bytes in, bytes out: parse once, run the rules, forward the original bytes if nothing changed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from rules import Change, Rule, RuleContext, RuleFailure, run_rules
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
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        # orjson parses at most 1024 levels of nesting; the proxy refuses deeper bodies.
        too_deep = exc.msg.startswith("depth limit")
        return Sanitized(raw, skipped="json_too_deep" if too_deep else "body_not_json")
    if not isinstance(payload, dict):
        return Sanitized(raw, skipped="body_not_object")
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return Sanitized(
            raw, skipped="messages_missing" if messages is None else "messages_not_list"
        )
    # The freshly parsed payload is already a private deep copy: no clone needed.
    result = run_rules(messages, steps, private=True)
    if not result.changed:
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
        return Sanitized(body, result.changes, (*result.failures, RuleFailure.of("contract", exc)))
    return Sanitized(body, result.changes, result.failures, violations=left)
