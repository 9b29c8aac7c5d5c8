"""Which rules and which contract a request gets: its profile, chosen by configuration and model.

A ``Plan`` is what one request runs: the profile's name, its ordered steps (rule + context) and
its contract. The ``Planner`` compiles one plan per profile once (at startup), and picks one per
request from the request's ``model``: the operator's ``models`` patterns first (first match
wins), else the default profile; then that profile's own variants (``deepseek`` sends
``deepseek-reasoner*`` models to ``deepseek-reasoner``).

A Responses API request (``/v1/responses``) runs under its profile's Responses plan
(``Planner.responses_for``): the Responses rules (``rules.responses``) with the profile's
``responses`` settings (most profiles have none: the rules' defaults) and the operator's
overrides, checked against the Responses contract plus the profile's ``responses_contract``.
The planner fills the ``direct_openai`` option of ``responses-context-management`` (and of its
check) from the upstream: the operator's setting, if any, wins.

An Anthropic Messages request (``/v1/messages``) runs under its profile's Messages plan
(``Planner.messages``): the profile is picked from the model as for chat, and its ``messages``
settings switch the Messages rules (``rules.messages``), checked against its
``messages_contract``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from copy import copy
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any

from rules.chat import RULES
from rules.engine.base import RequestFacts, Rule, RuleContext, StashQuery
from rules.engine.pipeline import default_steps
from rules.messages import MESSAGES_RULES
from rules.providers.apis import CHAT_API, MESSAGES_API, RESPONSES_API, Api, api_named
from rules.providers.contract import Contract
from rules.providers.contract.responses import RESPONSES_CONTRACT
from rules.providers.profiles import DEFAULT_PROFILE, PROFILES, Profile
from rules.replies.pipeline import NO_REPLIES, ReplyPlan, compile_reply_plan
from rules.responses import RESPONSES_RULES
from rules.responses import context_management as cm

#: A rule's setting: on/off, or ``{"enabled": bool, **options}``.
Setting = bool | Mapping[str, Any]
Step = tuple[Rule, RuleContext]


#: The plans given betas alone, by the plan's id (the plan is held: its id is not reused while
#: the entry stands), the client's scope and the betas: a few per route and client, bounded.
_GIVEN: dict[tuple[int, str, frozenset[str]], tuple[Plan, Plan]] = {}
_MAX_GIVEN = 256


@dataclass(frozen=True, slots=True)
class Plan:
    """The steps and contract one request runs under."""

    profile: str
    steps: Sequence[Step]
    contract: Contract = field(default_factory=dict)
    #: The API the plan repairs: ``chat`` (``messages``), ``responses`` (``input``) or
    #: ``messages`` (Anthropic Messages ``messages``).
    api: str = "chat"
    #: Report mode: every step (enforced ones included), run on a second copy only to report
    #: what the rules in ``reported`` would change; ``None`` when every rule is enforced.
    report: Sequence[Step] | None = None
    #: The rules whose changes are reported, not applied (every rule in global report mode).
    reported: frozenset[str] = frozenset()
    #: Check every rewritten body against ``contract`` at run time (``verify`` in the config):
    #: off by default, since the tests prove the rules leave nothing for it to find.
    verify: bool = False

    def plan(self, model: Any) -> Plan:
        """A plan is its own planner: every model gets it (for tests and ``check --profile``)."""
        return self

    def given(self, given: RequestFacts) -> Plan:
        """This plan with ``given`` (what the server gives the request) in the context of every
        step whose rule reads it (``Rule.gets_facts``), enforced and reported alike; the plan
        itself if none does (a context is rebuilt per step: a few microseconds each).

        Facts of ``betas`` alone give the same plan object each time (per plan, scope and
        betas; ``_GIVEN``): a Claude Code session sends the same ``anthropic-beta`` values with
        every request, and the session's next request resumes the rules only under the very
        steps the last one ran (rules/engine/resume.py). Recalled values, or the keys asked for
        them (``wanted``, which the session's next request reads as its own last request's:
        never another request's), make a new plan."""
        if not any(rule.gets_facts for rule, _ in (*self.steps, *(self.report or ()))):
            return self
        if given.own:
            return self._give(given)
        key = (id(self), given.scope, given.betas)
        known = _GIVEN.get(key)
        if known is not None and known[0] is self:
            return known[1]
        if len(_GIVEN) >= _MAX_GIVEN:
            _GIVEN.clear()
        made = self._give(given)
        _GIVEN[key] = (self, made)
        return made

    def _give(self, given: RequestFacts) -> Plan:
        def give(steps: Sequence[Step]) -> list[Step]:
            return [
                (rule, replace(ctx, given=given) if rule.gets_facts else ctx) for rule, ctx in steps
            ]

        report = None if self.report is None else give(self.report)
        return replace(self, steps=give(self.steps), report=report)

    def recalling(self) -> tuple[StashQuery, RuleContext] | None:
        """The ``Rule.recall`` of the first step (enforced or reported) whose rule asks the
        server for what it kept, with the step's context; ``None`` if no rule does."""
        for rule, ctx in (*self.steps, *(self.report or ())):
            if rule.recall is not None:
                return rule.recall, ctx
        return None


def merge_settings(*layers: Mapping[str, Setting]) -> dict[str, dict[str, Any]]:
    """Overlay rule settings: later layers win, option by option. ``True``/``False`` only
    toggles, keeping the options of the layers under it."""
    merged: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for name, setting in layer.items():
            current = merged.setdefault(name, {})
            if isinstance(setting, bool):
                current["enabled"] = setting
            else:
                current.update(setting)
    return merged


def compile_plan(
    profile: Profile,
    overrides: Mapping[str, Setting] | None = None,
    *,
    log_content: bool = False,
    report: frozenset[str] = frozenset(),
    verify: bool = False,
) -> Plan:
    """The plan for ``profile`` with the operator's rule ``overrides`` on top; the rules named
    in ``report`` run in report mode (their changes are logged, not applied)."""
    settings = merge_settings(profile.rules, overrides or {})
    steps = default_steps(RULES, settings, log_content=log_content)
    return with_report(Plan(profile.name, steps, profile.contract, verify=verify), report)


def with_report(plan: Plan, report: frozenset[str]) -> Plan:
    """``plan`` with the rules in ``report`` moved to report mode (if any of them runs)."""
    reported = frozenset(rule.name for rule, _ in plan.steps if rule.name in report)
    if not reported:
        return plan
    enforced = [step for step in plan.steps if step[0].name not in reported]
    return replace(plan, steps=enforced, report=plan.steps, reported=reported)


def with_repair(plan: Plan, repair: Mapping[str, Mapping[str, Any]]) -> Plan:
    """``plan`` with the rules of ``repair`` enforced (recovery,
    ``rules.providers.contract.repairs``):
    each with its options over the plan's own for that rule (a rule in report mode included),
    else over its defaults, in the one registry order. Report mode is dropped: the plan's
    report was already logged for the request."""
    registry = api_named(plan.api).rules
    enforced = {rule.name: ctx for rule, ctx in plan.steps}
    known = {rule.name: ctx for rule, ctx in (plan.report or ())} | enforced
    log_content = any(ctx.log_content for ctx in known.values())
    steps: list[Step] = []
    for rule in registry:
        ctx = known.get(rule.name)
        if rule.name in repair:
            base = {} if ctx is None else dict(ctx.options)
            fresh = rule.context({**base, **repair[rule.name]}, log_content=log_content)
            if ctx is not None:  # what the proxy gave the request (recalled reasoning) stays
                fresh = replace(fresh, given=ctx.given)
            steps.append((rule, fresh))
        elif rule.name in enforced:
            steps.append((rule, enforced[rule.name]))
    return replace(plan, steps=steps, report=None, reported=frozenset())


def compile_messages_plan(
    profile: Profile,
    overrides: Mapping[str, Setting] | None = None,
    *,
    log_content: bool = False,
    report: frozenset[str] = frozenset(),
    verify: bool = False,
) -> Plan:
    """The Messages plan of ``profile``: its ``messages`` settings with the operator's
    ``overrides`` on top (names unique across rule sets, so one ``rules:`` section serves all),
    checked against its ``messages_contract``."""
    settings = merge_settings(profile.messages, overrides or {})
    steps = default_steps(MESSAGES_RULES, settings, log_content=log_content)
    plan = Plan(profile.name, steps, profile.messages_contract, api="messages", verify=verify)
    return with_report(plan, report)


#: The profile name the Responses plan reports.
RESPONSES = "responses"


def compile_responses_plan(
    overrides: Mapping[str, Setting] | None = None,
    *,
    profile: Profile | None = None,
    direct_openai: bool = False,
    log_content: bool = False,
    verify: bool = False,
) -> Plan:
    """The Responses plan: every Responses rule with the ``profile``'s ``responses`` settings
    (none: the rules' defaults) and the operator's ``overrides`` over the upstream-derived
    ``direct_openai``, and the Responses contract (with the profile's added checks) agreeing
    with them. Its name is ``responses``, or ``responses:<profile>`` for a profile whose
    ``/v1/responses`` endpoint needs more than the defaults."""
    own = profile.responses if profile is not None else {}
    settings = merge_settings({cm.NAME: {"direct_openai": direct_openai}}, own, overrides or {})
    steps = default_steps(RESPONSES_RULES, settings, log_content=log_content)
    options = {o.name: o.default for o in cm.RULE.options}
    options.update({k: v for k, v in settings[cm.NAME].items() if k != "enabled"})
    extra = profile.responses_contract if profile is not None else {}
    contract = {**RESPONSES_CONTRACT, **extra, "responses_context_management": options}
    name = f"{RESPONSES}:{profile.name}" if profile is not None and own else RESPONSES
    return Plan(name, steps, contract, api="responses", verify=verify)


def plan_across(plan: Plan, api: Api) -> Plan:
    """The plan for a request of ``api`` given a plan of another API (``chatmend check
    --profile``): the same profile's Messages or Responses plan (a Messages plan for an unknown
    profile: the default profile's); a chat request under another API's plan gets no rule."""
    if plan.api == api.name:
        return plan
    profile = PROFILES.get(plan.profile)
    compilers = {
        CHAT_API.name: lambda: Plan("custom", ()),
        RESPONSES_API.name: lambda: compile_responses_plan(profile=profile),
        MESSAGES_API.name: lambda: compile_messages_plan(
            PROFILES.get(plan.profile, PROFILES[DEFAULT_PROFILE])
        ),
    }
    return compilers[api.name]()


class Planner:
    """Picks a request's plan from its model; every plan is compiled up front."""

    def __init__(
        self,
        default: str = "deepseek",
        models: Sequence[tuple[str, str]] = (),
        overrides: Mapping[str, Setting] | None = None,
        *,
        log_content: bool = False,
        direct_openai: bool = False,
        report: frozenset[str] = frozenset(),
        verify: bool = False,
    ) -> None:
        self.default = default
        #: (lower-cased glob, profile name): the operator's patterns, first match wins.
        self.models = tuple((pattern.lower(), name) for pattern, name in models)
        self.plans: dict[str, Plan] = {
            name: compile_plan(
                profile, overrides, log_content=log_content, report=report, verify=verify
            )
            for name, profile in PROFILES.items()
        }
        #: Each profile's Messages plan (``/v1/messages`` requests).
        self.messages_plans: dict[str, Plan] = {
            name: compile_messages_plan(
                profile, overrides, log_content=log_content, report=report, verify=verify
            )
            for name, profile in PROFILES.items()
        }
        self._by_model: dict[str, Plan] = {}
        #: Each profile's Responses plan (``/v1/responses`` requests).
        self.responses_plans: dict[str, Plan] = {
            name: with_report(
                compile_responses_plan(
                    overrides,
                    profile=profile,
                    direct_openai=direct_openai,
                    log_content=log_content,
                    verify=verify,
                ),
                report,
            )
            for name, profile in PROFILES.items()
        }
        #: The default profile's Responses plan (a request without a usable model gets it).
        self.responses = self.responses_plans[default]
        #: Each profile's reply plan: the rules over what its upstream sends back
        #: (``rules.replies``), read by the relay for the profile a request ran under.
        self.reply_plans: dict[str, ReplyPlan] = {
            name: compile_reply_plan(
                merge_settings(profile.replies, overrides or {}),
                log_content=log_content,
                report=report,
            )
            for name, profile in PROFILES.items()
        }
        self._by_api: dict[str, Mapping[str, Plan]] = {
            CHAT_API.name: self.plans,
            RESPONSES_API.name: self.responses_plans,
            MESSAGES_API.name: self.messages_plans,
        }

    def plan(self, model: Any) -> Plan:
        if not isinstance(model, str):
            return self._variant(self.default, "")
        cached = self._by_model.get(model)
        if cached is not None:
            return cached
        lowered = model.lower()
        name = next((n for p, n in self.models if fnmatchcase(lowered, p)), self.default)
        plan = self._variant(name, lowered)
        if len(self._by_model) < 1024:  # model names are few; never grow without bound
            self._by_model[model] = plan
        return plan

    def under(self, name: str) -> Planner:
        """This planner with every model under profile ``name`` (``chatmend check --profile``):
        the operator's patterns no longer apply, the profile's variants still do (a router
        profile picks its downstream profile from the model). The compiled plans are shared."""
        other = copy(self)
        other.default, other.models, other._by_model = name, (), {}
        return other

    def responses_for(self, model: Any) -> Plan:
        """The Responses plan of the profile ``plan(model)`` picks."""
        return self.responses_plans[self.plan(model).profile]

    def messages(self, model: Any) -> Plan:
        """The Messages plan of the profile ``plan(model)`` picks."""
        return self.messages_plans[self.plan(model).profile]

    def replies(self, profile: str | None) -> ReplyPlan:
        """The reply plan of the profile a request ran under (none if the rules did not run)."""
        return NO_REPLIES if profile is None else self.reply_plans.get(profile, NO_REPLIES)

    def plans_for(self, api: Api) -> Mapping[str, Plan]:
        """Every profile's plan for requests of ``api``, by profile name."""
        return self._by_api[api.name]

    def for_api(self, api: Api, model: Any) -> Plan:
        """The plan of a request of ``api`` for ``model``: the ``api`` plan of the profile
        ``plan(model)`` picks."""
        return self._by_api[api.name][self.plan(model).profile]

    def _variant(self, name: str, model: str) -> Plan:
        for pattern, variant in PROFILES[name].variants:
            if fnmatchcase(model, pattern):
                return self.plans[variant]
        return self.plans[name]
