"""The scope a request's reasoning is stored under: the route and the client's credential.

The key of one turn (``rules.chat.reasoning_content.turn_key``) hashes this scope with the turn's
calls, so two clients with different API keys never see each other's reasoning, even when their
tool-call ids collide (Kimi's ``functions.ls:0``). The credential itself is never stored: only
a sha256 of it, inside the scope that is hashed again into the key. A request with no
credential has no scope: its reasoning is never stored or recalled (every anonymous client
would otherwise share one scope, and read each other's reasoning).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from proxy.credentials import CREDENTIAL_HEADERS, CREDENTIAL_PARAMS


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
