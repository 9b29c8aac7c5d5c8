"""missing-thought-signatures: each step of the current Gemini turn opens with a signed call.

What: for a Gemini model that validates thought signatures (option ``models``), in the current
turn (the assistant tool-call messages after the last ``user`` message), the first tool call of
each step (each assistant message with ``tool_calls``) that carries no
``extra_content.google.thought_signature`` gets Google's documented validator skip,
``"skip_thought_signature_validator"`` (option ``signature``). A signature the client sent is
never touched (``bookkeeping-keys`` keeps ``extra_content`` under ``gemini-openai``); a call
whose ``extra_content`` or ``google`` is not an object is left alone; earlier turns are not
validated and stay as sent.
Why: Gemini 3 "Function call is missing a thought_signature in functionCall parts. This is
required for tools to work correctly, ..." (docs/providers.md#gemini-reasoning,
Gitlawb/openclaude#67: OpenClaude replaying Claude-shaped history to gemini-3.1-pro-preview
through the OpenAI-compatible endpoint). Google's thought-signature guide
(https://ai.google.dev/gemini-api/docs/thought-signatures) documents the dummy signature for
histories not produced by Gemini or that lost theirs; continuedev/continue#8865 and vercel/ai
(@ai-sdk/google 3.0.80) send it on the first call of a step.
Safety: safe. The calls, their ids and arguments are as sent; the model reasons without the
lost signature either way (Google: possibly degraded, not refused). The log names the call ids.
"""

from __future__ import annotations

from typing import Any

from rules.chat.message_fields import call_id
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried
from rules.engine.messages import rewrite_at
from rules.engine.thinking import model_matches

NAME = "missing-thought-signatures"
#: Google's documented value that skips signature validation.
SKIP = "skip_thought_signature_validator"

SIGNATURE = Option("signature", SKIP, "What an unsigned first call of a step gets.")
MODELS = Option(
    "models",
    ["gemini-3*"],
    "Gemini models that validate thought signatures on replayed calls (globs, router prefix "
    "ignored).",
)


def signed(call: Any) -> bool | None:
    """Whether a call carries a signature; ``None`` for a call the rule leaves alone (not an
    object, or an ``extra_content``/``google`` that is not an object)."""
    if type(call) is not dict:
        return None
    extra = call.get("extra_content", {})
    google = extra.get("google", {}) if type(extra) is dict else None
    if type(google) is not dict:
        return None
    value = google.get("thought_signature")
    return type(value) is str and value != ""


def current_steps(messages: list[Any]) -> list[int]:
    """The assistant tool-call messages after the last user message."""
    steps: list[int] = []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if type(message) is not dict:
            continue
        if message.get("role") == "user":
            break
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and type(calls) is list and calls:
            steps.append(index)
    steps.reverse()
    return steps


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if not model_matches(ctx.request.get("model"), MODELS.of(ctx)):
        return Outcome(messages)
    found = [i for i in current_steps(messages) if signed(messages[i]["tool_calls"][0]) is False]
    if not found:
        return Outcome(messages)
    signature = SIGNATURE.of(ctx)
    signature = signature if type(signature) is str and signature else SKIP
    changes: list[Change] = []

    def fix(index: int, message: dict[str, Any]) -> dict[str, Any]:
        calls = list(message["tool_calls"])
        call = calls[0]
        extra = call.get("extra_content", {})
        google = {**extra.get("google", {}), "thought_signature": signature}
        calls[0] = {**call, "extra_content": {**extra, "google": google}}
        changes.append(Change(NAME, index, "added_signature", {"id": call_id(call)}))
        return {**message, "tool_calls": calls}

    return Outcome(rewrite_at(messages, found, fix), tuple(changes))


def resume(
    messages: list[Any], ctx: RuleContext, before: bool | None
) -> tuple[Outcome, bool] | None:
    """The rule over ``messages`` after a list whose current turn it signed or not (``before``;
    ``None``: the list's start), and the same after them. A user message in them ends that turn,
    and what was signed in it would not be: it declines then."""
    if before is not None and messages and before and any(map(_is_user, messages)):
        return None
    outcome = apply(messages, ctx)
    if before is None or any(map(_is_user, messages)):
        return outcome, bool(outcome.changes)
    return outcome, before or bool(outcome.changes)


def _is_user(message: Any) -> bool:
    return type(message) is dict and message.get("role") == "user"


RULE = Rule(
    name=NAME,
    summary="Give the first unsigned call of each step of the current Gemini turn Google's "
    "validator skip.",
    defect="a replayed tool call of the current turn without its thought signature: Gemini 3 "
    '"Function call is missing a thought_signature in functionCall parts." '
    "(Gitlawb/openclaude#67; docs/providers.md#gemini-reasoning)",
    repair="the first call of each step of the current turn that has none gets "
    '`extra_content.google.thought_signature: "skip_thought_signature_validator"`, the value '
    "Google documents for history it did not sign; a signature the client sent is kept as sent",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=carried(resume),  # the current turn: after the last user message
    options=(SIGNATURE, MODELS),
    reads_request=True,
)
