"""What a refusal names, repaired: the generic vocabulary recovery reads before the catalogue's
classes (proxy/recovery/retry.py), the same on every API.

A provider that refuses says what it refuses, in words that vary but name the same things
(``rules.providers.refusals.Named`` reads them). Each entry below checks what the refusal names
against the request itself (a name the request does not carry is no evidence) and gives the repair
of that one thing, with options naming it:

- a **request parameter** the endpoint does not support: dropped (``instructions`` moved into
  ``input``), or renamed where the refusal says what to use instead;
- a **field at a path**: the message, item or block key dropped where the request carries it;
- a **role** the model refuses: the nearest role it accepts, the text kept;
- a **content part type**: a text rendering where one exists, else dropped (lossy: only where
  the route opts in, ``recover.lossy``);
- a **tool type**: Anthropic's optional ``custom`` tag dropped from a client tool; a built-in or
  server tool the endpoint does not take removed (those it lists as accepted stay);
- a **value** the endpoint refuses with the values it allows: the allowed one nearest in
  meaning (``NEAREST``), none when no entry says which;
- an **id** too long or blank: renamed in the call and its result together;
- an **order**: the item named moved right after the item it requires, where the request holds
  both;
- an item's **id** that requires an item no item of the request carries (a reasoning item
  replayed without its id): that id dropped, the item kept.

Every repair here is named by the refusal, so its ``unsafe`` changes may run (``Policy``); the
rule records say which changes are which. Pure: a refusal and a request in, repairs out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from rules.engine.request import CLIENT_TOOL_TYPES, foreign_tool
from rules.providers.apis import CHAT_API, MESSAGES_API, RESPONSES_API
from rules.providers.contract.repairs import Repair
from rules.providers.refusals import Reading
from rules.responses.items import is_reference, item_type

Body = Mapping[str, Any]

#: What a request of each API is made of: never dropped as a parameter.
_PROTECTED: Mapping[str, frozenset[str]] = {
    CHAT_API.name: frozenset({"model", "messages", "stream"}),
    RESPONSES_API.name: frozenset(
        {"model", "input", "previous_response_id", "conversation", "stream"}
    ),
    MESSAGES_API.name: frozenset({"model", "messages", "max_tokens", "system", "stream"}),
}
_PARAMETERS = {
    CHAT_API.name: "unsupported-parameters",
    RESPONSES_API.name: "responses-unsupported-parameters",
    MESSAGES_API.name: "messages-unsupported-parameters",
}
_VALUES = {
    CHAT_API.name: "request-values",
    RESPONSES_API.name: "responses-request-values",
    MESSAGES_API.name: "messages-request-values",
}
_PARTS = {
    CHAT_API.name: "unsupported-part-types",
    RESPONSES_API.name: "responses-unsupported-parts",
    MESSAGES_API.name: "messages-unsupported-blocks",
}
#: Message keys that are the message (never named away).
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "type"})
#: The id keys of calls and results, per API.
_ID_KEYS = frozenset({"id", "tool_call_id", "call_id", "tool_use_id"})

#: A refused value -> the values nearest in meaning, in order of preference (the first one the
#: refusal allows is taken). A thinking switch stays on where it can (``adaptive`` thinks when
#: the model decides); an effort keeps its rank.
NEAREST: Mapping[str, tuple[str, ...]] = {
    "enabled": ("adaptive", "auto", "on", "true"),
    "adaptive": ("enabled", "auto"),
    "auto": ("adaptive", "enabled"),
    "minimal": ("low",),
    "xhigh": ("high", "max"),
    "max": ("high", "xhigh"),
    "none": ("disabled", "minimal", "low"),
    "required": ("auto",),
    "any": ("auto",),
    # a named function forced (``tool_choice`` an object): a call still forced, any tool
    "{object}": ("required", "auto"),
}


def named_repairs(api: str, reading: Reading, payload: Body) -> list[Repair]:
    """The repairs of what ``reading`` names that ``payload`` carries, in order."""
    entries: tuple[Callable[[str, Reading, Body], Repair | None], ...] = (
        _parameter,
        _field,
        _tool_key,
        _cache_key,
        _role,
        _part_type,
        _tool_type,
        _value,
        _blank_id,
        _long_id,
        _item_id,
        _order,
        _required_id,
        _unpersisted,
        _images,
    )
    return [repair for entry in entries if (repair := entry(api, reading, payload)) is not None]


def _named_keys(reading: Reading) -> list[str]:
    """The keys the refusal says are unsupported, unknown or unrecognized; the key of the path
    it names only when it says so of it (an unknown or extra field)."""
    keys = list(reading.named.keys)
    refused = {"unknown_field", "bookkeeping_field"} & set(reading.codes)
    if reading.key is not None and reading.key not in keys and refused:
        keys.append(reading.key)
    return keys


#: Names of one parameter across APIs: a refused one is sent under the other where the refusal
#: says nothing of what to use instead (Mistral takes ``max_tokens`` only).
ALIASES: Mapping[str, str] = {
    "max_completion_tokens": "max_tokens",
    "max_tokens": "max_completion_tokens",
}


def _parameter(api: str, reading: Reading, payload: Body) -> Repair | None:
    """A named key the request carries at its top level, not one that makes the request: each
    dropped (or renamed where the refusal or ``ALIASES`` says to what); of two refused together,
    the last (the first stays); a value of which only the default is taken: the parameter."""
    named = reading.named
    protected = _PROTECTED.get(api, frozenset())
    keys = [key for key in _named_keys(reading) if key in payload and key not in protected]
    at = named.value_at
    if named.default_only and at is not None and at in payload and at not in protected:
        keys = [at]
    if named.together and len(keys) > 1:
        keys = keys[-1:]
    if not keys:
        return None
    drop: list[str] = []
    rename: dict[str, str] = {}
    for key in keys:
        to = named.instead if named.instead is not None and len(keys) == 1 else ALIASES.get(key)
        if to is not None and to not in payload and to not in rename.values():
            rename[key] = to
        else:
            drop.append(key)
    options: dict[str, Any] = {}
    if drop:
        options["drop"] = drop
    if rename:
        options["rename"] = rename
    return Repair("unsupported_parameter", api, {_PARAMETERS[api]: options})


def _items(api: str, payload: Body) -> list[Any]:
    items = payload.get("input" if api == RESPONSES_API.name else "messages")
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _inner(items: list[Any], field: str) -> Iterator[dict[str, Any]]:
    """The objects of each item's list ``field`` (a chat message's calls, a content list)."""
    for item in items:
        values = item.get(field)
        if isinstance(values, list):
            yield from (value for value in values if isinstance(value, dict))


def _field(api: str, reading: Reading, payload: Body) -> Repair | None:
    """A named key the request's messages (items, blocks, calls) carry, not at its top level."""
    names = [key for key in _named_keys(reading) if key not in payload and key not in _MESSAGE_KEYS]
    if not names:
        return None
    items = _items(api, payload)
    on_items = [key for key in names if any(key in item for item in items)]
    inner_field = "tool_calls" if api == CHAT_API.name else "content"
    inner = [
        key
        for key in names
        if key not in on_items and any(key in v for v in _inner(items, inner_field))
    ]
    if api == RESPONSES_API.name:
        inner = []
    if not on_items and not inner:
        return None
    if api == CHAT_API.name:
        rules = {"unsupported-message-keys": {"keys": on_items, "call_keys": inner}}
    elif api == RESPONSES_API.name:
        rules = {"responses-unsupported-item-keys": {"keys": on_items}}
    else:
        rules = {"messages-unsupported-keys": {"keys": on_items, "block_keys": inner}}
    return Repair("unsupported_field", api, rules)


def _role(api: str, reading: Reading, payload: Body) -> Repair | None:
    """A refused value that is the role of a message the request carries: chat's nearest
    accepted role; a Messages ``system`` message to the top-level ``system``."""
    value = reading.named.value
    if value is None or api == RESPONSES_API.name:
        return None
    if not any(item.get("role") == value for item in _items(api, payload)):
        return None
    if api == MESSAGES_API.name:
        if value != "system":
            return None
        return Repair("unknown_role", api, {"messages-system-messages": {}})
    allowed = [role for role in reading.named.allowed if role != value]
    options: dict[str, Any] = {"action": "rename"}
    if allowed:
        options["roles"] = allowed
    rules: dict[str, dict[str, Any]] = {"unknown-roles": options}
    if value == "developer" and (not allowed or "system" in allowed):
        rules = {"developer-role": {}, **rules}
    return Repair("unknown_role", api, rules)


def _part_types(items: list[Any]) -> set[str]:
    found: set[str] = set()
    for part in _inner(items, "content"):
        kind = part.get("type")
        if isinstance(kind, str):
            found.add(kind)
        inner = part.get("content") if kind == "tool_result" else None
        for nested in inner if isinstance(inner, list) else []:
            if isinstance(nested, dict) and isinstance(nested.get("type"), str):
                found.add(nested["type"])
    return found


def _part_type(api: str, reading: Reading, payload: Body) -> Repair | None:
    """A refused value that is the type of a content part the request carries."""
    value = reading.named.value
    if value is None or reading.named.value_at is not None:
        return None
    if value in ("thinking", "redacted_thinking"):
        return None  # the catalogue's thinking classes: moved to reasoning, never rendered here
    if value not in _part_types(_items(api, payload)):
        return None
    return Repair("unsupported_part_type", api, {_PARTS[api]: {"types": [value]}})


def _tool_type(api: str, reading: Reading, payload: Body) -> Repair | None:
    """A refused value that is the ``type`` of the tool the refusal's path names (serde's
    "tools[0]: unknown variant `custom`, expected `web_search_20250305` or ..."): on Messages,
    the optional ``custom`` tag dropped (safe: an untagged tool is a custom tool); any other
    type, the tools of that type removed (the API's server-tools repair, unsafe), every other
    type kept: those the refusal accepts, and, when it lists none, those the request holds.
    Only where a tools path names a tool of that type (``_named_tools``), and the value is
    refused nowhere else (a ``tool_choice.type``): a refusal of another field removes no tool.
    Chat's tools are functions: none here."""
    named = reading.named
    value, tools = named.value, payload.get("tools")
    if value is None or api == CHAT_API.name or not isinstance(tools, list):
        return None
    if value == ("function" if api == RESPONSES_API.name else None):
        return None  # a function is never removed: no repair of the tools gets it accepted
    if named.value_at is not None and not named.value_at.startswith("tools"):
        return None
    if not any(_type_at(tools, at) == value for at in _named_tools(named.tools_at, tools)):
        return None
    if api == MESSAGES_API.name and value == "custom":
        return Repair("tool_type", api, {"messages-custom-tool-type": {}})
    held = [_type_at(tools, at) for at in range(len(tools))]
    kinds = named.allowed or tuple(kind for kind in held if isinstance(kind, str))
    keep = list(dict.fromkeys(kind for kind in kinds if kind != value))
    rule = "messages-server-tools" if api == MESSAGES_API.name else "responses-server-tools"
    return Repair("tool_type", api, {rule: {"keep": keep}})


def _named_tools(named: tuple[int, ...], tools: list[Any]) -> Iterator[int]:
    """The positions of the tools a refusal's paths name; when none is a tool of the request
    (a gateway between, or a request cut short, counts otherwise), every tool's: the path then
    says only that a tool is refused. None when it names no tool."""
    held = [at for at in named if 0 <= at < len(tools)]
    return iter(held if held or not named else range(len(tools)))


def _type_at(tools: list[Any], at: int) -> Any:
    """The ``type`` of the tool at ``at`` (``None``: no such tool, or no type)."""
    tool = tools[at] if 0 <= at < len(tools) else None
    return tool.get("type") if isinstance(tool, dict) else None


#: The classes whose repair removes server tools: a tools path is evidence for them only where
#: the tool it names is one (``server_tool_named``).
SERVER_TOOL_CLASSES = frozenset({"messages_server_tool", "responses_server_tool"})


def server_tool_named(api: str, reading: Reading, payload: Body) -> bool:
    """Whether a refusal read as a server-tool class refuses a server tool of ``payload``: its
    words alone (no path into ``tools``), or a path to a tool that is one (a type other than
    Responses' ``function``; on Messages, a type other than the optional ``custom``) or is no
    object. A path to a client tool or into one (a function, its ``type`` missing, its schema)
    is no evidence against the built-in tools beside it: their repair would remove those, and
    leave the tool refused as it was."""
    tools = payload.get("tools")
    entries, inside = reading.named.tools_at, reading.named.tools_in
    if not entries and not inside:
        return True
    if not isinstance(tools, list):
        return False
    client = CLIENT_TOOL_TYPES.get(api, "custom")
    # a path to a tool's entry or type that the request does not hold names some tool; a path
    # into a tool (its schema, a key) that it does not hold names none of its tools
    named = _named_tools(entries, tools) if entries else (a for a in inside if 0 <= a < len(tools))
    return any(foreign_tool(tools[at], client) for at in named)


def _value(api: str, reading: Reading, payload: Body) -> Repair | None:
    """A refused value at a request field the request holds, with the allowed value nearest in
    meaning (none when ``NEAREST`` does not say which)."""
    named = reading.named
    if named.value_at is None or named.value is None:
        return None
    if named.default_only:
        return None  # the parameter goes (``_parameter``)
    current: Any = payload
    for step in named.value_at.split("."):
        current = current.get(step) if isinstance(current, Mapping) else None
    kind = (
        "{object}"
        if isinstance(current, dict)
        else "{array}"
        if isinstance(current, list)
        else None
    )
    if named.value not in (current, kind):
        return None
    nearest = NEAREST.get(named.value, ())
    allowed = set(named.allowed)
    # the first near value the refusal allows; with no list given, the nearest at all
    choice = next((near for near in nearest if near in allowed or not allowed), None)
    if choice is None:
        return None
    options = {"replace": {named.value_at: {named.value: choice}}, "models": ["*"]}
    return Repair("refused_value", api, {_VALUES[api]: options})


def _id_leaf(reading: Reading) -> bool:
    return reading.path is not None and reading.path.rsplit(".", 1)[-1] in _ID_KEYS


def _blank_id(api: str, reading: Reading, payload: Body) -> Repair | None:
    """An id the refusal finds empty or too short: the blank-id repair of the API."""
    if not _id_leaf(reading) or not reading.named.too_short:
        return None
    rule = {
        CHAT_API.name: "blank-tool-call-ids",
        RESPONSES_API.name: "responses-blank-call-ids",
        MESSAGES_API.name: "messages-blank-tool-use-ids",
    }[api]
    return Repair("blank_id", api, {rule: {}})


def _long_id(api: str, reading: Reading, payload: Body) -> Repair | None:
    """An id over the maximum length the refusal names: renamed to fit, call and result alike."""
    limit = reading.named.max_length
    if limit is None or not _id_leaf(reading):
        return None
    if api == CHAT_API.name and limit >= 9:
        return Repair(
            "id_too_long",
            api,
            {"tool-call-ids": {"format": "max40" if limit >= 40 else "mistral9"}},
        )
    if api == RESPONSES_API.name and limit >= 16 and (reading.path or "").endswith("call_id"):
        return Repair("id_too_long", api, {"responses-call-ids": {"max_length": limit}})
    return None


def _tool_key(api: str, reading: Reading, payload: Body) -> Repair | None:
    """A named key a tool definition carries (not the request, no message): a key the refusal
    names at a tools path (``tools.14.search_content_types``), or one it names in words."""
    named = [key for key in _named_keys(reading) if key not in payload]
    names = list(dict.fromkeys((*reading.named.tool_keys, *named)))
    tools = payload.get("tools")
    defined = [tool for tool in tools if isinstance(tool, dict)] if isinstance(tools, list) else []
    functions = [t["function"] for t in defined if isinstance(t.get("function"), dict)]
    keys = [key for key in names if any(key in tool for tool in (*defined, *functions))]
    if not keys:
        return None
    rule = {
        CHAT_API.name: "unsupported-tool-keys",
        RESPONSES_API.name: "responses-unsupported-tool-keys",
        MESSAGES_API.name: "messages-unsupported-tool-keys",
    }[api]
    return Repair("unsupported_tool_key", api, {rule: {"keys": keys}})


def _cache_key(api: str, reading: Reading, payload: Body) -> Repair | None:
    """A key inside a ``cache_control`` the refusal's path names (Messages)."""
    path = reading.path or ""
    if api != MESSAGES_API.name or ".cache_control." not in path:
        return None
    key = path.rsplit(".", 1)[-1]
    if key in ("cache_control", "type", "ephemeral"):
        return None
    return Repair("cache_control_key", api, {"messages-cache-control": {"keys": [key]}})


def _item_id(api: str, reading: Reading, payload: Body) -> Repair | None:
    """A Responses item's ``id`` refused for its prefix or its length."""
    path = reading.path or ""
    if api != RESPONSES_API.name or not path.startswith("input[") or not path.endswith("].id"):
        return None
    index = reading.index
    items = payload.get("input")
    listed = isinstance(items, list) and index is not None and index < len(items)
    item = items[index] if listed else None  # type: ignore[index]
    named = reading.named
    if named.id_prefix is not None:
        # the item named, or (its index past the list the client sent) the type the prefix is
        kind = item.get("type", "message") if isinstance(item, dict) else None
        kind = kind or _PREFIX_TYPES.get(named.id_prefix)
        if kind is None:
            return None
        prefixes = {kind: named.id_prefix}
        return Repair("item_id", api, {"responses-item-ids": {"prefixes": prefixes}})
    if not isinstance(item, dict) or "id" not in item:
        return None
    if named.max_length is not None:
        return Repair("item_id", api, {"responses-item-ids": {"max_length": named.max_length}})
    return None


#: The item type an id prefix is OpenAI's for.
_PREFIX_TYPES = {
    "fc": "function_call",
    "rs": "reasoning",
    "msg": "message",
    "ws": "web_search_call",
}


def _unpersisted(api: str, reading: Reading, payload: Body) -> Repair | None:
    """An item the refusal says is not stored, with ``store: false`` (Responses)."""
    gone = reading.named.unpersisted
    if api != RESPONSES_API.name or gone is None or payload.get("store") is not False:
        return None
    if not any(item.get("id") == gone for item in _items(api, payload)):
        return None
    return Repair("unpersisted_item", api, {"responses-unpersisted-items": {}})


def _images(api: str, reading: Reading, payload: Body) -> Repair | None:
    """More images than the model takes in one request: the last ones stay (chat; lossy)."""
    limit = reading.named.max_images
    if api != CHAT_API.name or limit is None or limit < 1:
        return None
    return Repair("too_many_images", api, {"image-parts": {"action": "strip", "keep_last": limit}})


def _order(api: str, reading: Reading, payload: Body) -> Repair | None:
    """An item named as given without the item it needs right before it (Responses)."""
    order = reading.named.order
    if api != RESPONSES_API.name or order is None:
        return None
    ids = {item.get("id") for item in _items(api, payload)}
    if order[0] not in ids or order[1] not in ids:
        return None
    return Repair("item_order", api, {"responses-reasoning-order": {"items": {order[0]: order[1]}}})


def _required_id(api: str, reading: Reading, payload: Body) -> Repair | None:
    """An item named as given without the item it requires, where the request holds the item
    with that id (of the type the refusal says, when it says) and no item carries the id it
    requires: the reasoning item was replayed without its id, or not at all, so no move can put
    it back (``_order``). The item's own id is what asks for it: that id goes, the item and its
    text stay (NousResearch/hermes-agent#97442; the fix its client takes, #97445); and so does
    the id of every item replayed in the same shape (after a reasoning item of its own turn
    that has no id: ``responses-item-ids``' ``unpaired``), which the endpoint refuses the same
    way: a client replays each turn so, and one id a retry or a learned repair would leave the
    next one refused. Never an item reference, which is its id (Responses)."""
    order = reading.named.order
    if api != RESPONSES_API.name or order is None:
        return None
    items = _items(api, payload)
    named = [item for item in items if item.get("id") == order[0]]
    if not named or any(item.get("id") == order[1] for item in items):
        return None
    said = reading.named.order_type
    for item in named:
        kind = item_type(item)
        if is_reference(item) or (said is not None and kind != said):
            return None
    return Repair("item_id", api, {"responses-item-ids": {"ids": [order[0]], "unpaired": True}})
