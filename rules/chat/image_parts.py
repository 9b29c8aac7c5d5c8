"""image-parts: image content parts only where the upstream takes them.

What: a content part whose ``type`` is in the option ``types`` (``image_url`` by default) is an
image. With ``action: strip`` (the default, for text-only upstreams) every image, in any message,
becomes the text part ``{"type": "text", "text": <placeholder>}`` in place. With ``action:
relocate`` (for upstreams that take images from users only) the images of every non-user
message (system, developer, assistant, tool, function) become the text part ``moved`` in place,
and a new user message carries them (after the option ``carrier`` text part, if not empty) right
after the message, or, when the message is a tool result or an assistant with calls, after the
whole run of tool messages that follows: a call's results stay right after it. The images of one
block (an assistant and its results) travel in one user message, in order. User images stay.
Parts that are no object, non-list contents and messages with an unknown role are left alone.
Why: DeepSeek has no vision and its deserializer rejects an image part outright: "Failed to
deserialize the JSON body into the target type: messages[1]: data did not match any variant of
untagged enum ChatCompletionRequestContent" (docs/providers.md#content, browser-use/web-ui#99;
docs/providers.md#hermes-r31/E28 strip images and keep tool messages, with placeholder
text, so pairing holds). OpenAI accepts images only from users: "Invalid 'messages[234]'. Image URLs
are only allowed for messages with role 'user', but this message with role 'tool' contains an
image URL." (docs/providers.md#openai-content, OpenHands/OpenHands#7700; "... with role 'assistant'
...", openai/openai-node#1030); the fix is a text-only tool message for pairing and a user message
with the images after the block of tool messages (docs/providers.md#openai-content, wave-agent#1368,
OpenHands/OpenHands#10200; docs/providers.md#repairs ``relocate_images``; GPT-5.2 accepts but
ignores tool images, docs/providers.md#question-5). Safety: ``relocate`` is safe: every image still
reaches the model, one message later, and the text left in place says where it went. ``strip`` is
unsafe: the image is gone (an upstream without vision could not have used it; the placeholder tells
the model one was there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from rules.chat import scan
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried
from rules.engine.messages import rewrite_at
from rules.vocabulary import IMAGE_PART_TYPES, NOT_USER_ROLES

NAME = "image-parts"

DEFAULT_PLACEHOLDER: Final = "[image omitted]"
DEFAULT_MOVED: Final = "[image moved to the next user message]"
DEFAULT_CARRIER: Final = "[chatmend] Images from the messages above:"
DEFAULT_TYPES: Final = IMAGE_PART_TYPES

#: The roles whose images ``relocate`` moves (OpenAI's: only ``user`` may carry images).
NOT_USER: Final = NOT_USER_ROLES


#: The rule's options (the record below lists them; read them through these).
ACTION = Option(
    "action",
    "strip",
    "strip: every image becomes a placeholder text part (no vision); relocate: images "
    "outside user messages move into a user message after the message (or its tool block)",
    ("strip", "relocate"),
)
PLACEHOLDER = Option(
    "placeholder", DEFAULT_PLACEHOLDER, "the text part that replaces an image (strip)"
)
MOVED = Option("moved", DEFAULT_MOVED, "the text part left where an image was moved from")
CARRIER = Option(
    "carrier",
    DEFAULT_CARRIER,
    'the text part before the moved images in the new user message ("": none)',
)
TYPES = Option("types", list(DEFAULT_TYPES), "content part types counted as images")
KEEP_LAST = Option(
    "keep_last",
    0,
    "strip: how many of the request's last images stay (an upstream that takes so many per "
    "request); 0: none",
)


def image_types(options: Mapping[str, Any]) -> frozenset[str]:
    """The part types counted as images (option ``types``; never ``text``, the type the
    placeholders have), tolerant of an odd value."""
    types = TYPES.of(options)
    if not isinstance(types, list | tuple | set | frozenset):
        return frozenset(DEFAULT_TYPES)
    return frozenset(t for t in types if isinstance(t, str) and t != "text")


def count_images(message: Any, types: frozenset[str]) -> int:
    """How many image parts ``message``'s content list holds (0 for anything else)."""
    content = message.get("content") if type(message) is dict else None
    if type(content) is not list:
        return 0
    return sum(1 for part in content if type(part) is dict and part.get("type") in types)


def moves_images(message: Any, types: frozenset[str]) -> bool:
    """True if ``relocate`` takes images out of ``message`` (a known non-user role)."""
    role = message.get("role") if type(message) is dict else None
    return type(role) is str and role in NOT_USER and count_images(message, types) > 0


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    types = image_types(ctx.options)
    if ACTION.of(ctx) == "relocate":
        return _relocate(messages, types, ctx.options)
    suspects = [index for index, m in enumerate(messages) if count_images(m, types)]
    if not suspects:
        return Outcome(messages)  # the common case: no image anywhere
    text = str(PLACEHOLDER.of(ctx))
    keep = KEEP_LAST.of(ctx)
    if isinstance(keep, int) and not isinstance(keep, bool) and keep > 0:
        return _strip_before_last(messages, suspects, types, text, keep)
    changes = tuple(
        Change(NAME, index, "replaced_images", {"count": count_images(messages[index], types)})
        for index in suspects
    )
    out = rewrite_at(messages, suspects, lambda index, m: _replaced(m, types, text)[0])
    return Outcome(out, changes)


def _strip_before_last(
    messages: list[Any], suspects: list[int], types: frozenset[str], text: str, keep: int
) -> Outcome:
    """Every image but the request's last ``keep`` replaced by the placeholder."""
    left = keep
    stripped: dict[int, int] = {}  # message index -> how many of its first images go
    for index in reversed(suspects):
        count = count_images(messages[index], types)
        kept = min(left, count)
        left -= kept
        if count > kept:
            stripped[index] = count - kept
    if not stripped:
        return Outcome(messages)

    def strip(index: int, message: dict[str, Any]) -> Any:
        budget = stripped[index]
        parts: list[Any] = []
        for part in message["content"]:
            if budget and type(part) is dict and part.get("type") in types:
                parts.append({"type": "text", "text": text})
                budget -= 1
            else:
                parts.append(part)
        return {**message, "content": parts}

    changes = tuple(
        Change(NAME, index, "replaced_images", {"count": count, "kept_last": keep})
        for index, count in sorted(stripped.items())
    )
    return Outcome(rewrite_at(messages, sorted(stripped), strip), changes)


def _replaced(message: dict[str, Any], types: frozenset[str], text: str) -> tuple[Any, list[Any]]:
    """A copy of ``message`` with every image part replaced by a text part, and the images."""
    parts: list[Any] = []
    images: list[Any] = []
    for part in message["content"]:
        if type(part) is dict and part.get("type") in types:
            images.append(part)
            parts.append({"type": "text", "text": text})
        else:
            parts.append(part)
    return {**message, "content": parts}, images


def _relocate(messages: list[Any], types: frozenset[str], options: Mapping[str, Any]) -> Outcome:
    sources = [index for index, m in enumerate(messages) if moves_images(m, types)]
    if not sources:
        return Outcome(messages)
    text = str(MOVED.of(options))
    carrier = str(CARRIER.of(options))
    # Where each source's images go: before ``at``, past the tool messages after it.
    groups: dict[int, list[int]] = {}
    for index in sources:
        at = index + 1
        while at < len(messages) and _is_tool(messages[at]):
            at += 1
        groups.setdefault(at, []).append(index)
    out: list[Any] = []
    changes: list[Change] = []
    carried: list[Any] = []
    start = 0
    for at, members in groups.items():
        for index in members:
            out.extend(messages[start:index])
            fixed, images = _replaced(messages[index], types, text)
            out.append(fixed)
            carried.extend(images)
            changes.append(Change(NAME, index, "moved_images", {"count": len(images), "to": at}))
            start = index + 1
        out.extend(messages[start:at])
        start = at
        parts = [{"type": "text", "text": carrier}] if carrier else []
        out.append({"role": "user", "content": [*parts, *carried]})
        detail = {"role": "user", "count": len(carried), "from": members}
        changes.append(Change(NAME, at, "inserted_message", detail))
        carried = []
    out.extend(messages[start:])
    return Outcome(out, tuple(changes))


def _is_tool(message: Any) -> bool:
    return type(message) is dict and message.get("role") == "tool"


def resume(messages: list[Any], ctx: RuleContext, before: int | None) -> tuple[Outcome, int] | None:
    """The rule over ``messages`` after ``before`` messages (``None``: the list's start), and
    the count after them (``Horizon``, rules/engine/resume.py). ``strip`` decides each message
    alone; with ``keep_last`` the request's last images stay, so a new turn with an image may
    change the old ones: it declines. ``relocate`` looks past a message only over the tool
    messages after it: a new turn that starts with one declines; the new turn's positions in
    the changes are counted in the whole list."""
    offset = 0 if before is None else before
    after = offset + len(messages)
    if before is None or not messages:
        return apply(messages, ctx), after
    types = image_types(ctx.options)
    if ACTION.of(ctx) == "relocate":
        if _is_tool(messages[0]):
            return None
        outcome = _relocate(messages, types, ctx.options)
        return Outcome(outcome.messages, tuple(_counted(c, offset) for c in outcome.changes)), after
    keep = KEEP_LAST.of(ctx)
    if isinstance(keep, int) and not isinstance(keep, bool) and keep > 0:
        if any(count_images(message, types) for message in messages):
            return None
        return Outcome(messages), after
    return apply(messages, ctx), after


def _counted(change: Change, offset: int) -> Change:
    """A ``relocate`` change over a new turn with its positions counted in the whole list."""
    detail = dict(change.detail)
    if "to" in detail:
        detail["to"] += offset
    if "from" in detail:
        detail["from"] = [index + offset for index in detail["from"]]
    return Change(change.rule, change.index, change.action, detail)


RULE = Rule(
    name=NAME,
    summary="Replace images for text-only upstreams, or move them into user messages.",
    defect='image parts a text-only upstream cannot parse: DeepSeek "data did not match any '
    'variant of untagged enum ChatCompletionRequestContent" (browser-use/web-ui#99); images '
    "outside user messages: OpenAI \"Image URLs are only allowed for messages with role 'user', "
    "but this message with role 'tool' contains an image URL.\" (OpenHands/OpenHands#7700; "
    "docs/providers.md#openai-content)",
    repair="option `action`: `strip` (each image part becomes the text part `placeholder`; tool "
    "messages are kept) or `relocate` (images of system, assistant and tool messages become the "
    "text `moved`, and one new user message carries them after the `carrier` text, right after the "
    "message or after its whole tool block, so results stay right after their call); option "
    "`types` names the part types counted as images. Unsafe with `strip` (the image is gone); "
    "`relocate` keeps every image",
    safety={
        "moved_images": "safe",
        "inserted_message": "unsafe",
        "replaced_images": "lossy",
    },
    default=False,
    apply=apply,
    horizon=carried(resume),  # relocate looks over a tool block; keep_last over later images
    scan=scan.scan,
    woken_by=scan.on(scan.LIST_CONTENT, scan.DICT_CONTENT),
    options=(
        ACTION,
        PLACEHOLDER,
        KEEP_LAST,
        MOVED,
        CARRIER,
        TYPES,
    ),
)
