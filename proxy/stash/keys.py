"""The scope a request's reasoning is stored under: the route and the client's credential.

The key of one turn (``rules.reasoning_content.turn_key``) hashes this scope with the turn's
calls, so two clients with different API keys never see each other's reasoning, even when their
tool-call ids collide (Kimi's ``functions.ls:0``). The credential itself is never stored: only
a sha256 of it, inside the scope that is hashed again into the key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from proxy.credentials import CREDENTIAL_HEADERS


def request_scope(upstream: str, headers: Mapping[str, str]) -> str:
    """``upstream`` (the route's upstream base URL) and a digest of the client's credential."""
    credential = ""
    for name in CREDENTIAL_HEADERS:
        value = headers.get(name)
        if value:
            credential = value
            break
    digest = hashlib.sha256(credential.encode("utf-8", "replace")).hexdigest()
    return f"{upstream}\n{digest}"
