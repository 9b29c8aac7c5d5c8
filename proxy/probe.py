"""``chatmend probe URL``: which catalogued shapes a live endpoint refuses, and the built-in
profile that fits it best.

A small battery: one clean request (the control: refused, and nothing else can be read) and one
minimal request per catalogued shape a profile's contract refuses (``SHAPES``: one per check
code, docs/providers.md cites each check's source), each with ``max_tokens: 1`` and
``stream: false``. Every answer is read as recovery reads it (``proxy.classify``); each
profile's contract predicts, for the same bodies, which are refused, with what status and
what text; the profile whose predictions match best is named, with the YAML to use it.

Cost: ``len(SHAPES) + 1`` requests, their prompts (about four characters per token) and at most
one output token per accepted request; ``chatmend probe`` prints it first, and asks before
spending on a host that is not loopback unless given ``--yes``. It follows no redirect: an
answer that points elsewhere stops it (the battery, and the key, would go to a host nobody
agreed to). It never prints a password the URL carries, and says which credential it sends:
the URL's user and password (HTTP Basic) when it has them, else the key from ``--key-env``
(``Authorization: Bearer``), never both.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import aiohttp
import orjson
from yarl import URL

from proxy.classify import error_text, read_error
from rules.providers.contract import Violation, violations
from rules.providers.profiles import PROFILES

#: The control: a request every provider accepts.
CLEAN: dict[str, Any] = {"messages": [{"role": "user", "content": "Say ok."}]}

#: Check code -> a minimal request that breaks that check (and as little else as it can).
SHAPES: dict[str, dict[str, Any]] = {
    "arguments_not_string": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": {"a": 1}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "bookkeeping_field": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "abcDEF123",
                "content": "ok",
                "tool_name": "read_file",
            },
            {"role": "user", "content": "Thanks."},
        ]
    },
    "content_missing": {
        "messages": [
            {"role": "user"},
            {"role": "assistant", "content": "?"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "content_not_string": {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be terse."}]},
            {"role": "user", "content": [{"type": "text", "text": "Read it."}]},
        ]
    },
    "content_null": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {"role": "assistant", "content": "Ok."},
            {"role": "user", "content": None},
        ]
    },
    "content_object": {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}]},
    "conversation_start": {"messages": [{"role": "assistant", "content": "Hello."}]},
    "duplicate_tool_call_id": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "duplicate_tool_result": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "empty_assistant": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "empty_tool_calls": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {"role": "assistant", "content": "Hm.", "tool_calls": []},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "empty_tools": {
        "messages": [{"role": "user", "content": "Read the file."}],
        "tools": [],
        "tool_choice": "auto",
    },
    "first_not_user": {
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "function_name_invalid": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ],
        "tools": [{"type": "function", "function": {"name": "read file", "parameters": {}}}],
    },
    "image_not_user": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "abcDEF123",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
                ],
            },
            {"role": "user", "content": "Thanks."},
        ]
    },
    "image_unsupported": {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            }
        ]
    },
    "invalid_arguments": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a"'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "missing_tool_call_id": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "missing_tool_call_type": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "abcDEF123", "function": {"name": "read_file", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "multiple_system": {
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "Read the file."},
        ]
    },
    "multiple_text_elements": {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "!"}],
            }
        ]
    },
    "no_content_element": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "no_user_message": {
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "assistant", "content": "Hello."},
        ]
    },
    "orphan_tool_result": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {"role": "tool", "tool_call_id": "zzzZZZ999", "content": "ok"},
            {"role": "assistant", "content": "?"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "reasoning_content_missing": {
        "thinking": {"type": "enabled"},
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ],
    },
    "roles_not_alternating": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {"role": "user", "content": "Also the tests."},
        ]
    },
    "successive_assistant": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {"role": "assistant", "content": "A."},
            {"role": "assistant", "content": "B."},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "successive_user": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {"role": "user", "content": "Also the tests."},
        ]
    },
    "system_not_first": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {"role": "assistant", "content": "Ok."},
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "thinking_part": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Read it first.", "signature": "sig"},
                    {"type": "text", "text": "Done."},
                ],
            },
            {"role": "user", "content": "Thanks."},
        ]
    },
    "thinking_tool_choice": {
        "messages": [{"role": "user", "content": "Read the file."}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "read_file", "parameters": {"type": "object"}},
            }
        ],
        "tool_choice": "required",
        "thinking": {"type": "enabled"},  # thinking mode whatever the model probed
    },
    "tool_choice_without_tools": {
        "messages": [{"role": "user", "content": "Say ok."}],
        "tool_choice": "auto",
    },
    "tool_parameters_empty": {
        "messages": [{"role": "user", "content": "Say ok."}],
        "tools": [{"type": "function", "function": {"name": "read_file"}}],
    },
    "duplicate_tool_names": {
        "messages": [{"role": "user", "content": "Say ok."}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "read_file", "parameters": {"type": "object"}},
            },
            {
                "type": "function",
                "function": {"name": "read_file", "parameters": {"type": "object"}},
            },
        ],
    },
    "tool_schema_anyof_type": {
        "messages": [{"role": "user", "content": "Say ok."}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read_file",
                    "parameters": {
                        "type": "object",
                        "properties": {"path": {"type": "string", "anyOf": [{"minLength": 1}]}},
                    },
                },
            }
        ],
    },
    "thinking_type": {
        "messages": [{"role": "user", "content": "Say ok."}],
        "thinking": {"type": "enabled"},
    },
    "empty_text_part": {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": ""}, {"type": "text", "text": "Say ok."}],
            }
        ]
    },
    "thinking_temperature": {
        "messages": [{"role": "user", "content": "Say ok."}],
        "temperature": 0.5,
        "thinking": {"type": "enabled"},  # thinking mode whatever the model probed
    },
    "thought_signature_missing": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
        ]
    },
    "tool_call_content_empty": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "tool_call_id_format": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "call_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                "content": "ok",
            },
            {"role": "user", "content": "Thanks."},
        ]
    },
    "tool_message_name": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok", "name": "write_file"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "trailing_assistant": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {"role": "assistant", "content": "Sure, I"},
        ]
    },
    "unanswered_tool_call": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "user", "content": "Thanks."},
        ]
    },
    "unexpected_role_order": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "abcDEF123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "unknown_field": {
        "messages": [
            {"role": "user", "content": "Read the file."},
            {"role": "assistant", "content": "Done.", "finish_reason": "stop"},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "unknown_role": {
        "messages": [
            {"role": "developer", "content": "Be terse."},
            {"role": "session_meta", "content": {"session_id": "s1"}},
            {"role": "user", "content": "Read the file."},
        ]
    },
}


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


#: Shapes whose check applies only to some models (globs): sent only when the probed model is
#: one of them (Google validates thought signatures for Gemini 3 only).
MODEL_BOUND: dict[str, tuple[str, ...]] = {
    "thought_signature_missing": ("gemini-3*",),
    "thinking_type": ("minimax-m3*",),  # MiniMax-M3 refuses the type M1/M2 take
}


def bodies(model: str) -> dict[str, bytes]:
    """The battery for ``model``: the control first, then every shape that applies to it."""
    battery = {"clean": CLEAN, **SHAPES}
    name = model.lower().rsplit("/", 1)[-1]
    return {
        shape: orjson.dumps({**body, "model": model, "max_tokens": 1, "stream": False})
        for shape, body in battery.items()
        if shape not in MODEL_BOUND or any(fnmatchcase(name, g) for g in MODEL_BOUND[shape])
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
        read_as = outcome.codes[0] if outcome.codes else ("-" if not outcome.refused else "?")
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
    model: str,
    key: str | None,
    yes: bool,
    say: Callable[[str], object],
    ask: Callable[[str], str],
    key_env: str = "OPENAI_API_KEY",
) -> int:
    """``chatmend probe``: 0 when the endpoint was probed, 1 when the operator declined, 2 when
    the control was refused (a wrong model or key: nothing else can be read), an answer
    pointed elsewhere (a redirect, not followed) or the endpoint could not be reached."""
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
