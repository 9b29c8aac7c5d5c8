"""rules/engine/known.py: the answers it remembers are the answers of the functions it stands
for, asked once or many times, and what it holds stays inside its bound."""

from __future__ import annotations

import json
from functools import partial

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.engine import known
from rules.engine.json_repair_passes import parse_strict_object, repair_object
from tests.budget import examples

#: Argument-like text: JSON objects, their broken variants, and anything.
ARGUMENTS = st.one_of(
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=8), max_size=4).map(
        json.dumps
    ),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=4).map(
        lambda d: json.dumps(d)[:-1] + ",}"
    ),
    st.text(alphabet="{}[]\":,ab1 \\'tn", max_size=30),
    st.text(max_size=30),
)


def _orjson_object(raw: str) -> bool:
    try:
        return type(orjson.loads(raw)) is dict
    except orjson.JSONDecodeError:
        return False


@settings(max_examples=examples(1.0), deadline=None)
@given(raw=ARGUMENTS, close=st.booleans(), cap=st.sampled_from((5, 20_000)))
def test_a_remembered_answer_is_the_function_s_answer(raw: str, close: bool, cap: int) -> None:
    for _ in range(2):  # computed, then looked up
        assert known.object_text(raw) is _orjson_object(raw)
        assert known.strict_object(raw) is parse_strict_object(raw)
        assert known.repaired(raw, close_strings=close, max_tokens=cap) == repair_object(
            raw, close_strings=close, max_tokens=cap
        )


def test_a_memo_holds_no_more_than_its_bound() -> None:
    memo: known.Memo[int] = known.Memo(max_chars=10_000)
    for number in range(5_000):
        text = f"text {number} " * 10
        assert memo.get(text, len(text), partial(len, text)) == len(text)
        assert memo.held <= 10_000
    assert 0 < len(memo) < 5_000
    assert memo.get("x" * 20_000, 20_000, lambda: 7) == 7  # answered, never kept
    assert memo.held <= 10_000
