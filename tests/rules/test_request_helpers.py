"""rules/engine/request.py: request fields rewritten copy on write, and the tool-definition
predicates the chat and Messages rules share."""

from __future__ import annotations

import copy

from rules.engine.request import DROP, empty_schema, repeated_names, with_fields


def test_with_fields_replaces_drops_and_adds_without_writing_its_input() -> None:
    request = {"model": "m", "tools": [{"type": "function"}], "tool_choice": "required"}
    snapshot = copy.deepcopy(request)
    out = with_fields(request, {"tool_choice": DROP, "temperature": 1.0, "model": "n"})
    assert out == {"model": "n", "tools": [{"type": "function"}], "temperature": 1.0}
    assert list(out) == ["model", "tools", "temperature"]  # order kept, a new key last
    assert request == snapshot
    assert out["tools"] is request["tools"]  # values it does not replace are shared


def test_repeated_names_keeps_the_first_of_each() -> None:
    assert repeated_names(["Bash", "Read", "Bash", None, None, "Read", "Bash"]) == [2, 5, 6]
    assert repeated_names([]) == []


def test_an_empty_schema_is_absent_null_or_an_empty_object() -> None:
    assert empty_schema(None, absent=True)
    assert empty_schema(None, absent=False)
    assert empty_schema({}, absent=False)
    assert not empty_schema({"type": "object"}, absent=False)
