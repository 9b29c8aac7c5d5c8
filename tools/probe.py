"""``chatmend probe URL``: which catalogued shapes a live endpoint refuses, and the built-in
profile that fits it best.

A small battery: one clean request (the control: refused, and nothing else can be read) and the
examples of every catalogued chat check (``Check.examples``, on each check's record: one per
option value the profiles set; docs/providers.md cites each check's source), each with
``max_tokens: 1`` and ``stream: false``; a check only some models get (``Check.probe_models``) is
sent for those. Every answer is read as recovery reads it (``rules.providers.refusals``); each
profile's contract predicts, for the same bodies, which are refused, with what status and
what text; the profile whose predictions match best is named, with the YAML to use it.

Cost: one request per example and the control, their prompts (about four characters per token)
and at most one output token per accepted request; ``chatmend probe`` prints it first, and asks
before spending on a host that is not loopback unless given ``--yes``. It follows no redirect:
an answer that points elsewhere stops it (the battery, and the key, would go to a host nobody
agreed to). It never prints a password the URL carries, and says which credential it sends: the
URL's user and password (HTTP Basic) when it has them, else the key from ``--key-env``
(``Authorization: Bearer``), never both.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import aiohttp
import orjson
from yarl import URL

from rules.providers.contract import CHECKS_BY_CODE, Check, Violation, violations
from rules.providers.profiles import PROFILES
from rules.providers.refusals import error_text, read_error

#: The model ``chatmend probe`` sends when given no ``--model``: one the provider of the profile
#: the URL's host picks serves on its chat-completions endpoint (``Profile.hosts``; a host no
#: profile lists, loopback included, gets the default profile's). A profile whose models are
#: the operator's own names (Azure deployments) has none: ``--model`` is then required.
MODELS: Mapping[str, str | None] = {
    "deepseek": "deepseek-chat",
    "kimi": "kimi-k2-0905-preview",
    "mistral": "mistral-small-latest",
    "groq": "llama-3.3-70b-versatile",
    "cerebras": "llama-3.3-70b",
    "qwen": "qwen-plus",
    "glm": "glm-4.6",
    "minimax": "MiniMax-M2",
    "gemini-openai": "gemini-2.5-flash",
    "xai": "grok-3-mini",
    "openai": "gpt-4o-mini",
    "azure": None,
    "anthropic": "claude-sonnet-4-5",
    "openrouter": "deepseek/deepseek-chat",
}


def default_model(url: str) -> tuple[str | None, str]:
    """The model to probe ``url`` with when ``--model`` is not given, and the profile whose
    model it is (the one the URL's host picks, as ``serve`` would)."""
    from proxy.config import profile_for_upstream

    profile, _ = profile_for_upstream(url)
    return MODELS.get(profile), profile


#: The control: a request every provider accepts.
CLEAN: dict[str, Any] = {"messages": [{"role": "user", "content": "Say ok."}]}


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request of the battery and its answer."""

    shape: str
    status: int
    #: The refusal's text as read (empty for an accepted request).
    text: str = ""
    #: The classes chatmend reads in the refusal.
    codes: tuple[str, ...] = ()

    @property
    def refused(self) -> bool:
        return self.status >= 400


def shapes() -> dict[str, Check]:
    """Every shape of the battery and its check: each catalogued chat check's examples
    (``Check.examples``), named by the check's code (``code#2`` for its second, ...)."""
    return {
        code if number == 0 else f"{code}#{number + 1}": check
        for code, check in CHECKS_BY_CODE.items()
        for number in range(len(check.examples))
    }


def _example(shape: str, check: Check) -> Mapping[str, Any]:
    number = int(shape.partition("#")[2] or 1) - 1
    return check.examples[number].request


def bodies(model: str) -> dict[str, bytes]:
    """The battery for ``model``: the control first, then every shape that applies to it (a
    check bound to some models, ``Check.probe_models``, only for those)."""
    name = model.lower().rsplit("/", 1)[-1]
    battery: dict[str, Mapping[str, Any]] = {"clean": CLEAN}
    for shape, check in shapes().items():
        if not check.probe_models or any(fnmatchcase(name, g) for g in check.probe_models):
            battery[shape] = _example(shape, check)
    return {
        shape: orjson.dumps({**body, "model": model, "max_tokens": 1, "stream": False})
        for shape, body in battery.items()
    }


def cost(battery: dict[str, bytes]) -> tuple[int, int]:
    """(requests, estimated prompt tokens) the battery spends."""
    return len(battery), sum(math.ceil(len(body) / 4) for body in battery.values())


def endpoint(url: str) -> str:
    """The chat-completions URL of a base URL (``.../v1`` or the bare host)."""
    base = url.rstrip("/")
    return base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")


def shown(url: str) -> str:
    """``url`` as it may be printed: a password it carries written ``***`` (read from the text
    itself: a ``Location`` is the server's, and need not parse), and text that is not printable
    as a Python literal."""
    scheme, sep, rest = url.partition("://")
    authority_end = min((rest.find(c) for c in "/?#" if c in rest), default=len(rest))
    userinfo, at, host = rest[:authority_end].rpartition("@")
    if sep and at and ":" in userinfo:
        user = userinfo.split(":", 1)[0]
        url = f"{scheme}://{user}:***@{host}{rest[authority_end:]}"
    return url if url.isprintable() else ascii(url)


class Redirected(Exception):
    """An answer that points elsewhere (3xx): the probe does not follow it."""

    def __init__(self, shape: str, status: int, location: str) -> None:
        super().__init__(shape, status, location)
        self.shape, self.status, self.location = shape, status, location


def credential(url: str, key: str | None, key_env: str) -> tuple[str, str | None]:
    """Which credential the probe sends, said in words, and the key to send as a bearer token
    (``None``: the URL's own user and password, or nothing)."""
    parsed = URL(url)
    if parsed.user is not None or parsed.password is not None:
        unused = f"; ${key_env} is set but not sent" if key else ""
        return f"the user and password in the URL (HTTP Basic){unused}", None
    if key:
        return f"the key in ${key_env} (Authorization: Bearer)", key
    return f"none (${key_env} is not set, and the URL carries none)", None


def is_loopback(url: str) -> bool:
    host = URL(url).host or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def run(
    url: str, battery: dict[str, bytes], *, key: str | None = None, timeout: float = 60.0
) -> list[Outcome]:
    """Send the battery one request at a time and read each answer (``key``: a bearer token;
    a redirect raises ``Redirected``, and is never followed)."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    outcomes = []
    limit = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(timeout=limit) as http:
        for shape, body in battery.items():
            target = endpoint(url)
            async with http.post(
                target, data=body, headers=headers, allow_redirects=False
            ) as response:
                answer = await response.content.read(256 * 1024)
                if 300 <= response.status < 400:
                    location = response.headers.get("Location", "")
                    raise Redirected(shape, response.status, location)
                if response.status < 400:
                    outcomes.append(Outcome(shape, response.status))
                    continue
                reading = read_error(answer)
                text = _text(answer)
                outcomes.append(Outcome(shape, response.status, text, reading.codes))
    return outcomes


def _text(answer: bytes) -> str:
    return " ".join((error_text(answer) or "").split())


@dataclass(frozen=True, slots=True)
class Fit:
    profile: str
    score: int
    #: Shapes whose refusal (or acceptance) the profile predicts.
    agreed: int


def _predicted(body: bytes, profile: str) -> Violation | None:
    found = violations(orjson.loads(body), PROFILES[profile].contract)
    return found[0] if found else None


def fits(battery: dict[str, bytes], outcomes: Sequence[Outcome]) -> list[Fit]:
    """Every profile with how well its contract predicts ``outcomes``, best first (ties in
    the order docs/profiles.md lists the profiles). A shape scores 2 when refused (or accepted)
    as predicted; a refusal 1 more for the predicted status, 2 more for the predicted text
    (else 1 for the predicted class read in it)."""
    scored = []
    for profile in PROFILES:
        score = agreed = 0
        for outcome in outcomes:
            if outcome.shape == "clean":
                continue
            predicted = _predicted(battery[outcome.shape], profile)
            if (predicted is not None) != outcome.refused:
                continue
            agreed += 1
            score += 2
            if predicted is None:
                continue
            score += predicted.status == outcome.status
            if predicted.message == outcome.text:
                score += 2
            elif predicted.code in outcome.codes:
                score += 1
        scored.append(Fit(profile, score, agreed))
    order = {name: index for index, name in enumerate(PROFILES)}
    return sorted(scored, key=lambda fit: (-fit.score, order[fit.profile]))


def report(url: str, battery: dict[str, bytes], outcomes: Sequence[Outcome]) -> str:
    """The table, the best fit and the YAML to use it."""
    lines = [f"{'shape':<28} {'status':<6} {'read as':<28} text"]
    for outcome in outcomes:
        own = outcome.shape.partition("#")[0]
        read_as = "-" if not outcome.refused else "?"
        if outcome.codes:  # the shape's own class when the refusal carries it
            read_as = own if own in outcome.codes else outcome.codes[0]
        text = outcome.text if len(outcome.text) <= 70 else outcome.text[:67] + "..."
        lines.append(f"{outcome.shape:<28} {outcome.status:<6} {read_as:<28} {text}".rstrip())
    refused = sum(outcome.refused for outcome in outcomes)
    ranked = fits(battery, outcomes)
    best = ranked[0]
    shapes = len(outcomes) - 1
    lines += [
        "",
        f"{refused} of {len(outcomes)} requests refused.",
        f"best fit: {best.profile} ({best.agreed} of {shapes} shapes as its contract predicts;"
        f" {PROFILES[best.profile].summary})",
    ]
    tied = [fit.profile for fit in ranked[1:] if fit.score == best.score]
    if tied:
        lines.append(f"as good: {', '.join(tied)}")
    runner_up = next((fit for fit in ranked[1:] if fit.score < best.score), None)
    if runner_up is not None:
        lines.append(f"next: {runner_up.profile} ({runner_up.agreed} of {shapes})")
    lines += [
        "",
        "# chatmend.yaml",
        "upstream:",
        f"  url: {url.rstrip('/')}",
        f"profile: {best.profile}",
        "",
    ]
    return "\n".join(lines)


def probe(
    url: str,
    *,
    model: str | None,
    key: str | None,
    yes: bool,
    say: Callable[[str], object],
    ask: Callable[[str], str],
    key_env: str = "OPENAI_API_KEY",
) -> int:
    """``chatmend probe``: 0 when the endpoint was probed, 1 when the operator declined, 2 when
    the control was refused (a wrong model or key: nothing else can be read), an answer
    pointed elsewhere (a redirect, not followed) or the endpoint could not be reached; no
    ``model`` given: the model of the profile the URL's host picks (``default_model``)."""
    if model is None:
        model, profile = default_model(url)
        if model is None:
            say(
                f"chatmend probe: the host picks the profile {profile}, whose model names are "
                "your own (deployments): pass --model.\n"
            )
            return 2
        say(f"(no --model: {model}, a model of the profile {profile} the host picks)\n")
    battery = bodies(model)
    requests, tokens = cost(battery)
    said, bearer = credential(url, key, key_env)
    say(
        f"chatmend probe: {requests} requests to {shown(endpoint(url))} (model {model}, "
        f"max_tokens: 1): about {tokens} prompt tokens and at most {requests} output tokens.\n"
        f"credentials: {said}.\n"
    )
    if not yes and not is_loopback(url):
        answer = ask("Send them? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            say("nothing sent.\n")
            return 1
    try:
        outcomes = asyncio.run(run(url, battery, key=bearer))
    except (aiohttp.ClientError, TimeoutError) as exc:
        say(f"cannot reach {shown(endpoint(url))}: {type(exc).__name__}; nothing read.\n")
        return 2
    except Redirected as moved:
        say(
            f"the {moved.shape} request was answered {moved.status} with a redirect to "
            f"{shown(moved.location) or '(no Location)'}: chatmend probe follows no redirect "
            "(the battery, and the key, would go to a host you did not name); probe that URL "
            "itself if you trust it.\n"
        )
        return 2
    control = outcomes[0]
    if control.refused:
        say(
            f"the control request was refused ({control.status}: {control.text}): check the "
            "URL, --model and the key; nothing else can be read.\n"
        )
        return 2
    parsed = URL(url)
    plain = url if parsed.user is None and parsed.password is None else str(parsed.with_user(None))
    say(report(plain, battery, outcomes))  # the config's upstream URL takes no credentials
    return 0
