"""Reading an upstream's refusal (rules/providers/refusals.py): in bounded time whatever it quotes
(issue 27, item 1), and by its stable parts whatever its wording (issue 26, item 1).

The time bound: the catalogue's texts were lazy-gap regular expressions (``messages\\..*?\\..*?``,
six gaps in one); a model name the upstream quoted back in its model_not_found text made them
backtrack polynomially: 160 characters 4.3 s, 240 characters 30 s, every other client waiting.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from rules.providers.refusals import CATALOGUE, MAX_TEXT, Template, classify, error_text, read_error
from tests.conftest import base_url
from tests.proxy.test_hostile import _assert_responsive, _config, _post, _probe
from tests.proxy.test_operate import serving
from tests.transcripts import USER, chat

Server = Callable[..., Awaitable[TestServer]]


def _model_not_found(name: str) -> bytes:
    """OpenAI's model_not_found, quoting the client's model name back."""
    return orjson.dumps(
        {
            "error": {
                "message": f"The model `{name}` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        }
    )


def _crafted(length: int) -> str:
    """A model name built against the ``unknown_field`` text's six lazy gaps: its first piece,
    a run of dots for the first gaps to try, the middle piece, dots again, and never the last
    piece. 120 characters took 0.37 s with the lazy-gap expressions, 160 several seconds."""
    half = "messages." + "." * (length // 2) + ": property 'messages." + "." * length
    return half[:length]


def test_every_catalogue_text_is_matched_as_literal_pieces() -> None:
    """The structural bound: no catalogue entry is a regular expression, so matching one is a
    forward scan of str.find calls, one per piece."""
    assert len(CATALOGUE) > 100
    assert all(isinstance(template, Template) for template in CATALOGUE)
    assert all(all(isinstance(piece, str) for piece in t.pieces) for t in CATALOGUE)


@pytest.mark.parametrize("length", [120, 160, 240, 420, 4000])
def test_a_crafted_quoted_model_name_is_classified_in_bounded_time(length: int) -> None:
    body = _model_not_found(_crafted(length))
    started = time.perf_counter()
    assert classify(body) == "unclassified"
    assert read_error(body).about == "model"
    # generous for a loaded machine: the lazy-gap expressions took seconds to minutes here
    assert time.perf_counter() - started < 0.5


def test_the_text_classified_is_capped_whatever_the_body_holds() -> None:
    body = _model_not_found(_crafted(250_000))
    assert len(body) > 250_000
    text = error_text(body)
    assert text is not None and len(text) == MAX_TEXT
    started = time.perf_counter()
    for _ in range(10):
        read_error(body)
    assert time.perf_counter() - started < 1.0


def test_a_template_matches_its_pieces_in_order_with_anything_between() -> None:
    template = Template.of("Invalid 'messages[{index}].tool_calls': empty array.", "c")
    assert template.pieces == ("Invalid 'messages[", "].tool_calls': empty array.")
    assert template.found_in("x Invalid 'messages[12].tool_calls': empty array. y")
    assert not template.found_in("].tool_calls': empty array. Invalid 'messages[")
    assert Template.of("a {{literal}} b", "c").pieces == ("a {literal} b",)


class Refusing:
    """An upstream that refuses every chat request with ``body``."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.count = 0

    def app(self) -> web.Application:
        async def refuse(request: web.Request) -> web.Response:
            await request.read()
            self.count += 1
            return web.Response(status=404, body=self.body, content_type="application/json")

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", refuse)
        return app


@pytest.mark.slow
async def test_healthz_answers_while_an_upstream_quotes_a_crafted_name(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """A real `chatmend serve`, the default config: with the lazy-gap expressions, one request
    with a 200-character name kept /healthz waiting 10 s, 420 characters 192 s."""
    upstream = Refusing(_model_not_found(_crafted(420)))
    url = base_url(await aiohttp_server(upstream.app()))
    body = orjson.loads(chat([USER]))
    body["model"] = _crafted(420)

    async def attack() -> list[tuple[int, bytes]]:
        sent = orjson.dumps(body)
        return [await _post(proxy.url + "/v1/chat/completions", sent, {}) for _ in range(5)]

    async with serving(_config(tmp_path, url)) as proxy:
        answers, latencies = await _probe(proxy.url, attack())
    assert [status for status, _ in answers] == [404] * 5
    assert upstream.count == 5
    _assert_responsive(latencies)


# --- the stable parts: wording a provider chose, values filled in ------------------------------

#: (the refusal as a provider worded it, the class, the index, the path it names). The first six
#: are the wordings issue 26 found unrecovered (logged ``unclassified``).
WORDINGS: list[tuple[Any, str, int | None, str | None]] = [
    (
        "Duplicate value for 'tool_call_id' of call_9 in message[1]",
        "duplicate_tool_result",
        1,
        "messages[1]",
    ),
    (
        "Invalid 'messages[1].tool_calls[0].function.arguments': Failed to deserialize the "
        "arguments: EOF while parsing an object at line 1 column 13",
        "invalid_arguments",
        1,
        "messages[1].tool_calls[0].function.arguments",
    ),
    (
        "Invalid 'messages[1].tool_calls[0].type': expected 'function'.",
        "missing_tool_call_type",
        1,
        "messages[1].tool_calls[0].type",
    ),
    (
        "Invalid 'messages[0].role': unknown role 'developer'.",
        "unknown_role",
        0,
        "messages[0].role",
    ),
    ("unknown field(s) ['finish_reason']", "unknown_field", None, None),
    (
        {
            "detail": [
                {
                    "type": "extra_forbidden",
                    "loc": ["body", "messages", 1, "finish_reason"],
                    "msg": "Extra inputs are not permitted",
                    "input": "stop",
                }
            ]
        },
        "unknown_field",
        1,
        "messages[1].finish_reason",
    ),
    # more of the same kind
    (
        "messages.3.tool_calls.0.function.arguments: Input should be a valid string",
        "arguments_not_string",
        3,
        "messages[3].tool_calls[0].function.arguments",
    ),
    (
        "Duplicate value for 'tool_call_id' of 'toolu_01AbC', in messages[4] and messages[7].",
        "duplicate_tool_result",
        4,
        "messages[4]",
    ),
    (
        {"detail": [{"type": "extra_forbidden", "loc": ["body", "messages", 2, "tool_name"]}]},
        "bookkeeping_field",
        2,
        "messages[2].tool_name",
    ),
    (
        "Invalid value for 'messages.[5].content': expected a string, got null.",
        "content_null",
        5,
        "messages[5].content",
    ),
]


def _envelope(refusal: Any) -> bytes:
    if isinstance(refusal, str):
        return orjson.dumps({"error": {"message": refusal, "type": "invalid_request_error"}})
    return orjson.dumps(refusal)


@pytest.mark.parametrize(("refusal", "code", "index", "path"), WORDINGS)
def test_a_refusal_is_read_by_its_stable_parts(
    refusal: Any, code: str, index: int | None, path: str | None
) -> None:
    reading = read_error(_envelope(refusal))
    assert reading.codes[0] == code, reading
    assert reading.index == index
    assert reading.path == path
    assert reading.about is None


def test_anthropic_envelopes_and_gzipped_bodies_are_read() -> None:
    text = "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after"
    anthropic = orjson.dumps(
        {"type": "error", "error": {"type": "invalid_request_error", "message": text}}
    )
    assert read_error(anthropic).index == 2
    assert classify(gzip.compress(_envelope(WORDINGS[2][0]))) == "missing_tool_call_type"
    assert classify(b"\x1f\x8bnot gzip") == "unclassified"


def test_a_named_key_is_pulled_out() -> None:
    assert read_error(_envelope(WORDINGS[4][0])).key == "finish_reason"
    assert read_error(_envelope(WORDINGS[5][0])).key == "finish_reason"


@pytest.mark.parametrize(
    ("refusal", "about"),
    [
        ("This model's maximum context length is 65536 tokens. messages[3] is too big.", "context"),
        ("Incorrect API key provided: sk-****.", "auth"),
        ("The model `messages[1].role` does not exist or you do not have access to it.", "model"),
        ("Rate limit reached for requests", "rate"),
        ("Request too large for messages[0]", "size"),
    ],
)
def test_what_a_refusal_is_about_is_read(refusal: str, about: str) -> None:
    assert read_error(_envelope(refusal)).about == about


def test_every_catalogued_text_filled_in_is_read_as_its_class_first() -> None:
    """The stable-parts layer never outranks a catalogued sentence: each text, its slots
    filled with a number, reads as its own class (or one that shares the very same text), and
    as about nothing else (so it stays recoverable)."""
    shared: dict[tuple[str, ...], set[str]] = {}
    for template in CATALOGUE:
        shared.setdefault(template.pieces, set()).add(template.code)
    for template in CATALOGUE:
        text = "1".join(template.pieces)
        reading = read_error(orjson.dumps({"error": {"message": text}}))
        assert reading.codes[0] in shared[template.pieces], (template.code, reading)
        assert reading.about is None, (template.code, reading)


#: (a refusal naming a tool definition's path, the tool keys it refuses): a key at
#: ``tools.N.<key>`` or ``tools.N.function.<key>`` when the words refuse a key; never what makes
#: the tool, a deeper schema path, or a path whose words refuse a value.
TOOL_PATHS: list[tuple[Any, tuple[str, ...]]] = [
    # abliteration.ai Responses (lidge-jun/opencodex#3204)
    (
        {
            "error": {
                "message": "This object contains an unsupported field.",
                "type": "invalid_request",
                "param": "tools.14.search_content_types",
            }
        },
        ("search_content_types",),
    ),
    ("Unsupported field at tools[2].search_content_types", ("search_content_types",)),
    (
        {
            "detail": [
                {"type": "extra_forbidden", "loc": ["body", "tools", 3, "function", "strict"]}
            ]
        },
        ("strict",),
    ),
    # Command Code (CommandCodeAI/command-code#885): the type's value, not the key
    (
        {
            "error": {
                "message": 'Only `type:"function"` tools are supported on this endpoint.',
                "param": "tools.8.type",
            }
        },
        (),
    ),
    ("tools.0.name: unsupported characters", ()),
    ("tools.0.function.parameters.properties.when.format: unsupported format", ()),
    ("Invalid value at tools.2.search_content_types: expected a list", ()),
    ("Unsupported field at messages[2].search_content_types", ()),
]


@pytest.mark.parametrize(("refusal", "keys"), TOOL_PATHS)
def test_a_key_refused_at_a_tools_path_is_named_for_the_tools_only(
    refusal: Any, keys: tuple[str, ...]
) -> None:
    named = read_error(_envelope(refusal), "input").named
    assert named.tool_keys == keys
    assert not set(keys) & set(named.keys)  # never read as a parameter or an item's key


#: OpenAI's Responses API, an item that asks for one it needs before it (hermes-agent#97442,
#: continuedev/continue#11994, earendil-works/pi#886): the item's id, its type when said, the id
#: it requires; and texts about items that name no such pair.
HERMES_TEXT = (
    "Item 'msg_0afa4002c5d2b2' of type 'message' was provided without its required 'reasoning' "
    "item: 'rs_0afa4002c5d2b2'."
)
REQUIRED_ITEMS: list[tuple[str, tuple[str, str] | None, str | None]] = [
    (HERMES_TEXT, ("msg_0afa4002c5d2b2", "rs_0afa4002c5d2b2"), "message"),
    (
        "Item 'msg_68a1f0c3' was provided without its required 'reasoning' item: 'rs_68a1f0b9'.",
        ("msg_68a1f0c3", "rs_68a1f0b9"),
        None,
    ),
    (
        "Item 'fc_9' of type 'function_call' was provided without its required 'reasoning' item: "
        "'rs_9'.",
        ("fc_9", "rs_9"),
        "function_call",
    ),
    # the other "Item ..." refusals name no item an item requires
    (
        "Item with id 'rs_1' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input.",
        None,
        None,
    ),
    (
        "Item 'rs_1' of type 'reasoning' was provided without its required following item.",
        None,
        None,
    ),
    ("Item 'msg_1' not found.", None, None),
    ("Item with id 'msg_1' not found.", None, None),
    ("Duplicate item found with id msg_1. Remove duplicate items from your input.", None, None),
]


@pytest.mark.parametrize(("text", "order", "kind"), REQUIRED_ITEMS)
def test_an_item_given_without_the_item_it_requires_is_named_by_its_id_and_type(
    text: str, order: tuple[str, str] | None, kind: str | None
) -> None:
    body = {"error": {"message": text, "type": "invalid_request_error", "param": "input"}}
    named = read_error(orjson.dumps(body), "input").named
    assert (named.order, named.order_type) == (order, kind)


def test_the_words_of_an_item_without_its_required_item_keep_their_catalogued_class() -> None:
    """The class is read from the words alone; what the request holds decides the repair (the
    move where it holds both items, the named id dropped where it lacks the one required)."""
    body = {"error": {"message": HERMES_TEXT, "param": "input"}}
    assert read_error(orjson.dumps(body), "input").codes[0] == "responses_reasoning_order"
