"""Hypothesis strategies for the shape rules (developer-role, unknown-message-fields,
image-parts): message-shaped dicts with the roles, keys and image parts those rules look at,
mixed with ``arbitrary_messages()`` junk."""

from __future__ import annotations

from typing import Any, Final

from hypothesis import strategies as st

from tests.strategies import arbitrary_messages, junk_values

ROLES: Final = ("system", "developer", "user", "assistant", "tool", "function", "critic")
#: Keys agents and SDKs leave on messages (hermes E16, docs/providers.md#reasoning) and schema keys.
KEYS: Final = (
    "name",
    "tool_call_id",
    "tool_calls",
    "prefix",
    "timestamp",
    "reasoning_content",
    "reasoning",
    "refusal",
    "api_content",
    "_db_persisted",
    "extra_content",
)


def image_parts() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda url, kind: {"type": kind, "image_url": {"url": url}},
        st.sampled_from(["https://x/1.png", "data:image/png;base64,AAAA"]),
        st.sampled_from(["image_url", "image_url", "input_image"]),
    )


def contents() -> st.SearchStrategy[Any]:
    part = st.one_of(
        image_parts(),
        st.builds(lambda t: {"type": "text", "text": t}, st.sampled_from(["", "x", "look"])),
        junk_values,
    )
    return st.one_of(st.none(), st.sampled_from(["", "hi"]), st.lists(part, max_size=3))


def calls() -> st.SearchStrategy[Any]:
    function = st.fixed_dictionaries(
        {"name": st.sampled_from(["f", "g"]), "arguments": st.just("{}")},
        optional={"parsed": junk_values, "strict": st.booleans()},
    )
    call = st.fixed_dictionaries(
        {"id": st.sampled_from(["a", "b", "c"]), "function": st.one_of(function, junk_values)},
        optional={
            "type": st.sampled_from(["function", None, "custom"]),
            "index": st.integers(0, 3),
            "extra_content": junk_values,
        },
    )
    return st.one_of(st.lists(st.one_of(call, junk_values), max_size=3), junk_values)


@st.composite
def shaped_message(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": draw(st.sampled_from(ROLES))}
    if draw(st.booleans()):
        message["content"] = draw(contents())
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=4, unique=True)):
        if key == "tool_calls":
            message[key] = draw(calls())
        else:
            message[key] = draw(st.one_of(st.none(), st.sampled_from(["x", "call_1"]), junk_values))
    return message


def shaped_messages(max_size: int = 8) -> st.SearchStrategy[list[Any]]:
    """Shape-rule material half the time, ``arbitrary_messages()`` the other half, sometimes
    both in one list."""
    shaped = st.lists(shaped_message(), max_size=max_size)
    mixed = st.builds(lambda a, b: [*a, *b], shaped, arbitrary_messages(max_size=3))
    return st.one_of(shaped, mixed, arbitrary_messages(max_size=max_size))
