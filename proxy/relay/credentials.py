"""Credentials on a route: the client's token checked, the upstream key chatmend holds sent.

By default a route passes the client's ``Authorization`` through untouched. A route that
holds the upstream key itself (``upstream.api_key_env``) requires one of its own bearer tokens
(``client_tokens_env``) from the client, drops every credential header the client sent and
sets the key; a route with tokens but no key (a local upstream that needs none) drops the
client's token too, so it never travels on. Neither the tokens nor the key are ever logged.

The client's credential is also the scope of what chatmend remembers for it (``request_scope``):
the reasoning stash, the prefix cache and the learned repairs. The scope of one request is the
route's upstream and a digest of the credentials the client sent. The key of one turn
(``rules.chat.reasoning_content.turn_key``) hashes this scope with the turn's calls, so two
clients with different API keys never see each other's reasoning, even when their tool-call ids
collide (Kimi's ``functions.ls:0``). The credential itself is never stored: only a sha256 of it,
inside the scope that is hashed again into the key. A request with no credential has no scope:
nothing is remembered for it or recalled (every anonymous client would otherwise share one
scope, and read each other's reasoning).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from multidict import CIMultiDict, CIMultiDictProxy

from proxy.config import RouteConfig
from proxy.relay.served import ServedApi

#: Request headers that carry a credential: none of the client's may reach an upstream whose
#: key chatmend holds (and the reasoning stash scopes its keys by those present). OpenAI,
#: Azure, Anthropic, Gemini (``x-goog-api-key``), Azure API Management.
CREDENTIAL_HEADERS = (
    "authorization",
    "api-key",
    "x-api-key",
    "x-goog-api-key",
    "ocp-apim-subscription-key",
)
#: Query parameters that carry a credential (Gemini's ``?key=``, Azure APIM's).
CREDENTIAL_PARAMS = ("key", "api-key", "api_key", "subscription-key")


def authorized(route: RouteConfig, headers: CIMultiDictProxy[str]) -> bool:
    """Whether the client may use the route: it needs no token, or the request carries one of
    its tokens as ``Authorization: Bearer <token>`` or, from Azure clients, ``api-key: <token>``,
    or, from Anthropic clients (Claude Code's ``ANTHROPIC_API_KEY``), ``x-api-key: <token>``
    (compared in constant time, every token tried)."""
    if not route.client_tokens:
        return True
    scheme, _, given = headers.get("Authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        given = headers.get("api-key", "") or headers.get("x-api-key", "")
    if not given.strip():
        return False
    presented = given.strip().encode()
    matched = False
    for token in route.client_tokens:
        matched |= hmac.compare_digest(presented, token.value.encode())
    return matched


def apply_upstream_credentials(
    route: RouteConfig, headers: CIMultiDict[str], api: ServedApi | None = None
) -> None:
    """Set the route's credential on ``headers`` (chatmend's own copy of the client's): in the
    configured header, or in ``x-api-key`` for an Anthropic Messages request (``api``) or a
    client that sent ``x-api-key`` alone (``count_tokens`` and the other Anthropic paths): the
    Anthropic API and its compatible endpoints read the key there."""
    key = route.upstream.api_key
    if key is None and not route.client_tokens:
        return  # the client's credential passes through
    anthropic_style = (api is not None and api.anthropic_headers) or (
        "x-api-key" in headers and "authorization" not in headers
    )
    for name in CREDENTIAL_HEADERS:
        headers.popall(name, None)
    if key is None:
        return
    header = route.upstream.api_key_header
    if header == "api-key":
        headers["api-key"] = key.value
    elif header == "x-api-key" or anthropic_style:
        headers["x-api-key"] = key.value
    else:
        headers["Authorization"] = f"Bearer {key.value}"


def request_scope(
    upstream: str, headers: Mapping[str, str], query: Mapping[str, str] | None = None
) -> str | None:
    """``upstream`` (the route's upstream base URL) and a digest of every credential the
    client sent (headers, then query parameters), or ``None`` if it sent none."""
    given = [
        (name, value)
        for name in CREDENTIAL_HEADERS
        if (value := headers.get(name)) and value.strip()
    ]
    if query:
        given += [
            (name, value)
            for name in CREDENTIAL_PARAMS
            if (value := query.get(name)) and value.strip()
        ]
    if not given:
        return None
    # One credential: its digest alone, as before (reasoning stashed by older versions stays
    # found); several: every one, named.
    text = given[0][1] if len(given) == 1 else "".join(f"{n}\0{v}\0" for n, v in given)
    return f"{upstream}\n{hashlib.sha256(text.encode('utf-8', 'replace')).hexdigest()}"
