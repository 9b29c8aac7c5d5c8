"""The server's side of each API record (``rules.providers.apis``): the path that carries it,
whether a stash lookup runs before its rules (and the bytes that mark a body worth one), the
observer that reads its responses, and how its credentials and headers go. The handler looks a
request's record up once, from its path (``served_api``); nothing else compares API names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from proxy.relay import rewrite
from proxy.relay.rewrite import Arm
from proxy.stash.messages_observer import MessagesObserver
from proxy.stash.observer import BodyObserver, ResponseObserver
from rules.providers.apis import CHAT_API, MESSAGES_API, RESPONSES_API, Api


@dataclass(frozen=True, slots=True)
class ServedApi:
    """What one API is to the server."""

    #: The rules-side record: field, registry, contract.
    api: Api
    #: The ending of a POST path that carries a body of this API.
    path_suffix: str
    #: What marks a body holding a tool turn whose stash keys may be wanted; ``None``: no
    #: stash lookup runs before its rules (and its responses are never observed).
    tool_turn: bytes | None
    #: The observer that reads a 200 response of this API for the stash.
    observer: type[BodyObserver]
    #: Its requests' ``anthropic-beta`` values go to the rules and the contract check, and a
    #: configured upstream key goes in ``x-api-key``.
    anthropic_headers: bool = False
    #: The reply rules of its answers (proxy/relay/rewrite.py), armed from a reply plan and the
    #: request; ``None``: its answers are relayed as they come.
    replies: Arm | None = None

    @property
    def name(self) -> str:
        return self.api.name


CHAT = ServedApi(
    CHAT_API, "/chat/completions", b'"tool_calls"', ResponseObserver, replies=rewrite.chat
)
MESSAGES = ServedApi(
    MESSAGES_API,
    "/v1/messages",
    b'"tool_use"',
    MessagesObserver,
    anthropic_headers=True,
    replies=rewrite.messages,
)
RESPONSES = ServedApi(RESPONSES_API, "/responses", None, ResponseObserver)

#: Every served API by name, in the order a path is matched against them.
SERVED: Mapping[str, ServedApi] = {api.name: api for api in (CHAT, MESSAGES, RESPONSES)}


@lru_cache(maxsize=256)  # a few paths, met on every request
def served_api(method: str, path: str) -> ServedApi | None:
    """The API whose body chatmend repairs on this request: ``chat`` (a POST to any path ending
    in /chat/completions), ``messages`` (Anthropic, ending in /v1/messages;
    ``/v1/messages/count_tokens`` and the rest pass through), ``responses`` (ending in
    /responses), else ``None``."""
    if method != "POST":
        return None
    path = path.rstrip("/")
    return next((api for api in SERVED.values() if path.endswith(api.path_suffix)), None)


def served_named(name: str) -> ServedApi:
    """The record of the API called ``name``."""
    return SERVED[name]
