"""``chatmend check``: lint a captured chat-completions, Responses or Anthropic Messages request
offline.

The API is read from the body: an ``input`` and no ``messages`` is a Responses request, checked
under the Responses plan (``--profile`` names a chat profile: with it a Responses body gets the
Responses rules' defaults); a top-level ``system``, or a ``tool_use`` / ``tool_result`` block,
is an Anthropic Messages request, checked under the profile's Messages plan and contract.

It shows what the provider would reject (``rules.providers.contract``), what the rules would
rewrite, and whether the result is accepted; with ``--fix`` it writes the repaired body to stdout
(and the report to stderr). Exit status: 0 clean, 1 repaired, 2 still invalid (or not a chat body).

With ``--error FILE`` it reads a captured provider error body instead: its error class, the
rules that repair it (``rules.providers.contract.repairs``) and the YAML that enables them; given
the request too, whether that repair changes it (what ``recover:`` would retry).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO, TextIO

import orjson

from proxy.observe.metrics import classes
from proxy.recovery.retry import enable_line, plan_retry
from proxy.server import diff
from rules.engine.base import SAFETY_CLASSES
from rules.providers.apis import (
    CHAT_API,
    MESSAGES_API,
    RESPONSES_API,
    RULES_BY_NAME,
    Api,
    api_named,
    safety_of,
)
from rules.providers.contract import Violation
from rules.providers.contract.repairs import repair_for, repair_in
from rules.providers.planner import Plan
from rules.providers.sanitize import (
    PlanSource,
    Sanitized,
    plan_for,
    read_with_surrogates,
    sanitize_body,
)

CLEAN, REPAIRED, INVALID = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Report:
    profile: str
    before: tuple[Violation, ...]
    result: Sanitized
    after: tuple[Violation, ...]
    #: ``chat``, ``responses`` or ``messages``: whose list the indices point into.
    api: str = CHAT_API.name
    #: The body as given (the rewrites' indices are read against it and the repaired one).
    raw: bytes | None = None

    @property
    def status(self) -> int:
        if self.after or self.result.skipped:
            return INVALID
        return REPAIRED if self.result.changed else CLEAN

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": ("clean", "repaired", "invalid")[self.status],
            "profile": self.profile,
            "violations": [v.as_dict() for v in self.before],
            "changes": [{**c.as_dict(), "safety": safety_of(c)} for c in self.result.changes],
            "rule_failures": [
                {"rule": f.rule, "error": f.error, "where": f.where} for f in self.result.failures
            ],
            "not_sanitized": self.result.skipped,
            "violations_after": [v.as_dict() for v in self.after],
        }


def check_body(raw: bytes, source: PlanSource) -> Report:
    """Validate ``raw`` against its profile's contract, repair it, validate the result."""
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError:
        payload = None
        # A Messages body with a lone surrogate (a cut emoji) is still one: read it as the
        # proxy does, so its other rejections are reported too.
        readable = read_with_surrogates(raw)
        if api_of_body(readable) is MESSAGES_API:
            payload = readable
    model = payload.get("model") if isinstance(payload, dict) else None
    api = api_of_body(payload)
    plan = plan_for(source, model, api)
    before = api.check(payload, plan.contract, ())
    result = sanitize_body(raw, plan, api.name)
    try:
        changed = orjson.loads(result.body) if result.changed else None
    except orjson.JSONDecodeError:
        changed = None
    after = before if changed is None else api.check(changed, plan.contract, ())
    return Report(plan.profile, tuple(before), result, tuple(after), api.name, raw)


#: The APIs an error is looked up in when no request comes with it.
CHAT_OR_RESPONSES = (CHAT_API.name, RESPONSES_API.name)
#: The APIs a class may be catalogued for, each its own (``check --error`` without a request).
EVERY_API = (*CHAT_OR_RESPONSES, MESSAGES_API.name)
#: Block types only Anthropic Messages bodies hold.
_MESSAGES_BLOCKS = frozenset({"tool_use", "tool_result"})


def api_of_body(payload: Any) -> Api:
    """Responses for a body with an ``input`` and no ``messages``; Messages for one with a
    top-level ``system`` or a ``tool_use`` / ``tool_result`` block; else chat."""
    if not isinstance(payload, dict):
        return CHAT_API
    if "input" in payload and "messages" not in payload:
        return RESPONSES_API
    messages = payload.get("messages")
    if "system" in payload and isinstance(messages, list):
        return MESSAGES_API
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") in _MESSAGES_BLOCKS:
                return MESSAGES_API
    return CHAT_API


#: What to do about a body the rules did not read (``Sanitized.skipped``).
_SKIP_HINTS = {
    "body_not_object": ' (a JSON object is expected: {"messages": [...]} or {"input": [...]},'
    " not a bare list)",
    "body_not_json": " (the input is not JSON)",
    "messages_missing": ' (the object has no "messages" list: {"messages": [...]})',
}


def render_text(report: Report) -> str:
    """The report in lines. Each index names the side it counts on: a rejection's counts on
    the body as sent, a rewrite's on both (``messages[4] -> after messages[3]``: the view's
    alignment, ``proxy.server.diff``), a rejection after repair on the repaired body."""
    lines: list[str] = [f"profile: {report.profile}"]
    if report.before:
        lines.append(
            f"{len(report.before)} rejection(s) the provider would return "
            "(indices: the body as sent):"
        )
        lines += [f"  {_where(v.index, report.api)} {v.code}: {v.message}" for v in report.before]
    elif report.result.changes:
        # A rule acted where the contract found nothing: never call that "accepted as sent".
        lines.append(
            "no rejection found, yet the rules rewrote it: a rule changed something the "
            "provider's catalogued errors do not list (see the rewrites below)"
        )
    else:
        lines.append("accepted as sent: no rejection found")
    if report.result.skipped:
        hint = _SKIP_HINTS.get(report.result.skipped, "")
        lines.append(f"not repaired: {report.result.skipped}{hint}")
    if report.result.changes:
        lines.append(f"{len(report.result.changes)} rewrite(s) (where: as sent -> after repair):")
        places = _places(report)
        for k, change in enumerate(report.result.changes):
            detail = orjson.dumps(dict(change.detail)).decode() if change.detail else ""
            where = _where(change.index, report.api) if places is None else places[k]
            kind = safety_of(change)
            said = "" if kind == "safe" else f" ({kind})"
            lines.append(f"  {where} {change.rule} {change.action}{said} {detail}".rstrip())
    for failure in report.result.failures:
        lines.append(f"rule failed (skipped): {failure.rule} {failure.error} at {failure.where}")
    if report.result.changed:
        if report.after:
            lines.append(
                f"after repair, still {len(report.after)} rejection(s) "
                "(indices: the repaired body):"
            )
            lines += [
                f"  {_where(v.index, report.api)} {v.code}: {v.message}" for v in report.after
            ]
        else:
            lines.append("after repair: accepted")
    return "\n".join(lines) + "\n"


def _where(index: int | None, api: str = CHAT_API.name) -> str:
    return api_named(api).where(index)


def _places(report: Report) -> list[str] | None:
    """Where each rewrite is, on the body as sent and on the repaired one (the page's own
    reading: ``proxy.server.diff.Places``), or ``None`` if the bodies cannot be aligned."""
    if not report.result.changed or report.raw is None:
        return None
    field = api_named(report.api).field
    try:
        items = orjson.loads(report.raw)[field], orjson.loads(report.result.body)[field]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    if not isinstance(items[0], list) or not isinstance(items[1], list):
        return None
    noted = tuple(
        diff.Noted(c.rule, c.index, c.action, dict(c.detail)) for c in report.result.changes
    )
    try:
        budget = diff.Budget()
        rows = diff.pairs(items[0], items[1], diff.renames_of(noted), budget, diff.movers_of(noted))
        places = diff.Places.of(field, rows, (items[0], items[1]), noted, budget)
    except (diff.OverBudget, orjson.JSONEncodeError):
        return None
    told = [places.where(change) for change in noted]
    told = [t.replace("\u2192", "->") for t in told]
    return [t.replace("before ", "", 1) if t.startswith("before ") else t for t in told]


def run_check(
    source: BinaryIO,
    plans: PlanSource,
    *,
    fix: bool,
    fmt: str,
    out: BinaryIO,
    err: TextIO,
) -> int:
    """The command: read, check, report (to ``err`` with ``--fix``, else to ``out``)."""
    report = check_body(source.read(), plans)
    text = (
        orjson.dumps(report.as_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"
        if fmt == "json"
        else render_text(report)
    )
    if fix:
        err.write(text)
        out.write(report.result.body)
        out.flush()
    else:
        out.write(text.encode())
        out.flush()
    return report.status


def open_source(path: str) -> BinaryIO:
    return sys.stdin.buffer if path == "-" else open(path, "rb")


def run_error_check(
    error: bytes, request: bytes | None, planner: PlanSource, *, fmt: str, out: BinaryIO
) -> int:
    """``check --error``: the class of a captured provider error body, the rules that repair
    it, their fix safety and the YAML that enables them; with the request, the repair recovery
    would send (what the refusal names in it first, then its class) and the rules it would
    leave out (lossy, where the route does not opt in). Exit status: 0 a repair, 2 none."""
    payload: Any = None
    if request is not None:
        try:
            payload = orjson.loads(request)
        except orjson.JSONDecodeError:
            payload = read_with_surrogates(request)
    apis = (api_of_body(payload).name,) if payload is not None else CHAT_OR_RESPONSES
    report: dict[str, Any] = {"error_class": None, "api": None, "rules": {}, "key": "rules"}
    retry = None
    if request is not None and payload is not None:
        sent = sanitize_body(request, planner, apis[0])
        retry = plan_retry(error, request, sent, planner, apis[0])
    # each class in its own API first (without the request: any of the three), then its twin
    # in an API the request may be
    own = (apis[0],) if payload is not None else EVERY_API
    found = [repair for code in classes(error) for api in own if (repair := repair_for(api, code))]
    found = found or [r for code in classes(error) for api in apis if (r := repair_in(api, code))]
    rules: Mapping[str, Mapping[str, Any]] = {}
    if retry is not None:
        report.update(error_class=retry.error_class, api=apis[0])
        rules = retry.rules
    elif found:
        report.update(error_class=found[0].code, api=found[0].api)
        rules = found[0].rules
    else:
        known = classes(error)
        report["error_class"] = known[0] if known else "unclassified"
    report["rules"] = {name: dict(options) for name, options in rules.items()}
    report["safety"] = {name: safety_text(name) for name in rules}
    if rules:
        model = payload.get("model") if isinstance(payload, dict) else None
        plan = plan_for(planner, model, api_named(report["api"]))
        report["profile"] = plan.profile
        report["already_on"] = already_on(plan, rules)
    if request is not None and rules:
        report["changes_request"] = retry is not None
        report["withheld"] = list(retry.withheld) if retry is not None else []
    if fmt == "json":
        out.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        out.write(_error_text(report).encode())
    out.flush()
    return 0 if report["rules"] else INVALID


def already_on(plan: Plan, rules: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The rules of a repair that ``plan`` runs already, with the options the repair names."""
    running = {rule.name: ctx.options for rule, ctx in plan.steps}
    return [
        name
        for name, options in rules.items()
        if name in running and all(running[name].get(k) == v for k, v in options.items())
    ]


def safety_text(rule: str) -> str:
    """A rule's fix safety in a line: its class, or each class with its actions."""
    found = RULES_BY_NAME.get(rule)
    if found is None:
        return "unknown"
    if isinstance(found.safety, str):
        return found.safety
    by_class: dict[str, list[str]] = {}
    for action, kind in found.safety.items():
        by_class.setdefault(kind, []).append(action)
    return "; ".join(
        f"{kind}: {', '.join(sorted(by_class[kind]))}"
        for kind in SAFETY_CLASSES
        if kind in by_class
    )


def _error_text(report: dict[str, Any]) -> str:
    lines = [f"error class: {report['error_class']}"]
    if not report["rules"]:
        if report["error_class"] == "unclassified":
            lines.append("not a rejection chatmend's catalogue knows (no rule to suggest)")
        else:
            lines.append("no rule repairs this class")
        return "\n".join(lines) + "\n"
    lines.append(f"repaired by: {', '.join(report['rules'])} ({report['api']})")
    for rule, kind in report.get("safety", {}).items():
        lines.append(f"  {rule}: {kind}")
    if report.get("withheld"):
        lines.append(
            f"left out of the retry: {', '.join(report['withheld'])} (lossy: a route opts in "
            "with recover.lossy)"
        )
    if report.get("changes_request") is False:
        lines.append(
            "the repair changes nothing in this request (its plan repairs it already, or the "
            "defect is not in it): recover would not retry"
        )
    elif report.get("changes_request"):
        lines.append("the repair changes this request (recover would retry it once)")
    on = report.get("already_on", [])
    if on:
        lines.append(
            f"already on under the profile {report['profile']}: {', '.join(on)} (so the "
            "refused request did not go through chatmend under that profile: sent around it, "
            "through a route with another profile, or with the rule switched off there)"
        )
    off = {rule: options for rule, options in report["rules"].items() if rule not in on}
    if not off:
        lines.append("nothing to enable")
        return "\n".join(lines) + "\n"
    lines.append("enable it (a named route: under routes.<name>.rules):")
    lines.append("rules:")
    lines += [f"  {enable_line(rule, options)}" for rule, options in off.items()]
    return "\n".join(lines) + "\n"
