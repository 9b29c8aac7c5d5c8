"""messages-cache-control: ``cache_control`` markers in the shape and the number the endpoint
takes.

What: request level. Each key named in option ``keys`` is removed from every ``cache_control``
object (on a tool, a system block, a message's block, a tool result's own block): a ``ttl`` an
endpoint does not know. With option ``max_markers`` above 0, markers past that many (counted
over tools, then system blocks, then messages, as the cache reads them) lose their
``cache_control`` from the first one on: the last ones, nearest to the new turn, stay. Nothing
else changes. The change counts what was removed and where.
Why: Anthropic "A maximum of 4 blocks with cache_control may be provided. Found 5." when two
clients each add their breakpoints (griffinmartin/opencode-claude-auth#123); Bedrock through
LiteLLM "messages.0.content.3.text.cache_control.ephemeral.ttl: Extra inputs are not permitted"
for Claude Code's one-hour cache (anthropics/claude-code#12122; docs/providers.md#anthropic-fields).
Safety: unsafe: the request asks for less caching (a shorter TTL, fewer breakpoints); no text
changes.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried
from rules.engine.named import names
from rules.engine.request import with_fields

NAME = "messages-cache-control"

KEYS: Option[list[str]] = Option(
    "keys", [], "Keys removed from every cache_control object (names: `ttl`)."
)
MAX_MARKERS = Option(
    "max_markers", 0, "The most cache_control markers kept, the last ones (0: all)."
)

#: A marker's place: (field, index, block, inner block) with -1 where there is none.
Place = tuple[str, int, int, int]


def _places(messages: list[Any], request: Any) -> list[Place]:
    """Every block or tool carrying ``cache_control``, in the cache's order."""
    places: list[Place] = []
    for field in ("tools", "system"):
        values = request.get(field)
        for index, value in enumerate(values if isinstance(values, list) else []):
            if isinstance(value, dict) and isinstance(value.get("cache_control"), dict):
                places.append((field, index, -1, -1))
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        for position, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("cache_control"), dict):
                places.append(("messages", index, position, -1))
            inner = block.get("content") if block.get("type") == "tool_result" else None
            for nested, part in enumerate(inner if isinstance(inner, list) else []):
                if isinstance(part, dict) and isinstance(part.get("cache_control"), dict):
                    places.append(("messages", index, position, nested))
    return places


def _options(ctx: RuleContext) -> tuple[frozenset[str], int]:
    """The keys removed and the most markers kept (0: all)."""
    limit = MAX_MARKERS.of(ctx)
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else 0
    return frozenset(names(KEYS.of(ctx))), limit


def resume(messages: list[Any], ctx: RuleContext, before: int | None) -> tuple[Outcome, int] | None:
    """The rule over ``messages`` after others, ``before`` the markers in those when it changed
    nothing (``-1`` when it did, ``None`` at the list's start); and the same after them. It
    changes nothing while the markers are at most ``max_markers`` and none holds a key removed;
    ``None`` otherwise (which markers go, and the change's counts, read the whole request:
    ``Horizon``, rules/engine/resume.py)."""
    if before is None:
        outcome = apply(messages, ctx)
        return outcome, -1 if outcome.changes else len(_places(messages, {}))
    if before < 0:
        return None
    keys, limit = _options(ctx)
    found = _places(messages, {})
    if limit and len(_places([], ctx.request)) + before + len(found) > limit:
        return None
    if keys and any(keys & set(_get(messages, {}, place)["cache_control"]) for place in found):
        return None
    return Outcome(messages), before + len(found)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    keys, limit = _options(ctx)
    if not keys and not limit:
        return Outcome(messages)
    places = _places(messages, ctx.request)
    surplus = set(places[: len(places) - limit]) if limit and len(places) > limit else set()
    trimmed: list[Place] = []
    edits: dict[Place, Any] = {}
    for place in places:
        marker = _get(messages, ctx.request, place)["cache_control"]
        if place in surplus:
            edits[place] = None
        elif keys & set(marker):
            edits[place] = {k: v for k, v in marker.items() if k not in keys}
            trimmed.append(place)
    if not edits:
        return Outcome(messages)
    out, fields = _apply_edits(messages, ctx.request, edits)
    changes: list[Change] = []
    if trimmed:
        detail = {"keys": sorted(keys), "count": len(trimmed)}
        changes.append(Change(NAME, -1, "dropped_cache_keys", detail))
    if surplus:
        detail = {"count": len(surplus), "kept": limit}
        changes.append(Change(NAME, -1, "dropped_markers", detail))
    return Outcome(
        out, tuple(changes), request=with_fields(ctx.request, fields) if fields else None
    )


def _get(messages: list[Any], request: Any, place: Place) -> dict[str, Any]:
    field, index, position, nested = place
    if field != "messages":
        found: dict[str, Any] = request[field][index]
        return found
    block = messages[index]["content"][position]
    return block if nested < 0 else block["content"][nested]  # type: ignore[no-any-return]


def _marked(block: dict[str, Any], marker: Any) -> dict[str, Any]:
    """``block`` with ``marker`` as its cache_control (``None``: without one)."""
    rest = {k: v for k, v in block.items() if k != "cache_control"}
    return rest if marker is None else {**rest, "cache_control": marker}


def _apply_edits(
    messages: list[Any], request: Any, edits: dict[Place, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The messages and the request fields with each edit made (copies of what changed)."""
    fields: dict[str, Any] = {}
    out = list(messages)
    for place, marker in edits.items():
        field, index, position, nested = place
        if field != "messages":
            values = fields.setdefault(field, list(request[field]))
            values[index] = _marked(values[index], marker)
            continue
        message = out[index]
        content = list(message["content"])
        block = content[position]
        if nested < 0:
            content[position] = _marked(block, marker)
        else:
            inner = list(block["content"])
            inner[nested] = _marked(inner[nested], marker)
            content[position] = {**block, "content": inner}
        out[index] = {**message, "content": content}
    touched = any(place[0] == "messages" for place in edits)
    return (out if touched else messages), fields


RULE = Rule(
    name=NAME,
    summary="Keep cache_control markers to the keys and the number the endpoint takes.",
    defect='request level: "A maximum of 4 blocks with cache_control may be provided. Found 5." '
    '(griffinmartin/opencode-claude-auth#123), "cache_control.ephemeral.ttl: Extra inputs are not '
    'permitted" (anthropics/claude-code#12122; docs/providers.md#anthropic-fields)',
    repair="remove each key in option `keys` from every cache_control; past option "
    "`max_markers`, the first markers go (the last ones stay). No text changes",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=carried(resume),  # nothing to do while the markers are few and plain
    options=(KEYS, MAX_MARKERS),
    reads_request=True,
)
