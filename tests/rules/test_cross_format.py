"""Histories that cross formats (issue 20): Codex call ids, Anthropic thinking parts, unknown roles.

The issue's reproductions, byte for byte through ``rules.providers.sanitize.sanitize_body`` under
the ``deepseek`` and ``kimi`` profiles, with the profile's contract reporting nothing on the output;
then three properties over random histories, under every profile:

(a) no tool result is replaced by a stub when a result for its call exists under either id;
(b) no thinking text is lost silently: it is in the forwarded ``reasoning_content`` (or still in
    a content the profile leaves alone), or a Change records its length;
(c) no message with a role the profile's provider refuses reaches it.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from rules.chat.unanswered_tool_calls import DEFAULT_CONTENT as STUB
from rules.chat.unknown_roles import OPENAI_ROLES
from rules.providers.contract import CHECKS_BY_CODE, violations
from rules.providers.planner import Planner
from rules.providers.profiles import PROFILES
from rules.providers.sanitize import sanitize_body
from tests.budget import examples
from tests.rules.test_profiles import PER_PROFILE, pieces
from tests.strategies import THINKING_MARK, Broken, broken_transcripts

PLANNER = Planner()
#: Half the per-profile count: three properties times fourteen profiles, one defect family each.
CROSS = settings(PER_PROFILE, max_examples=examples(0.2))
PROVIDERS = [name for name in PROFILES if name != "passthrough"]
#: A thinking model under each profile family that reads reasoning_content (and one that does not).
MODELS = ("deepseek-v4-flash", "deepseek-chat", "kimi-k2.6", "gpt-5")


def run(profile: str, payload: dict[str, Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """The forwarded messages and the changes, after asserting the contract reports nothing."""
    plan = PLANNER.plans[profile]
    result = sanitize_body(orjson.dumps(payload), plan)
    assert result.failures == ()
    out = orjson.loads(result.body)
    left = violations(out, plan.contract)
    assert left == [], [v.as_dict() for v in left]
    return out["messages"], [change.as_dict() for change in result.changes]


# --- The reproductions ----------------------------------------------------------------


@pytest.mark.parametrize("profile", ["deepseek", "kimi"])
def test_finding_1_the_result_reaches_its_call_under_its_codex_call_id(profile: str) -> None:
    call = {
        "id": "fc_1",
        "call_id": "call_1",
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},
    }
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "valid"},
        {"role": "tool", "tool_call_id": "call_ORPHAN", "content": "stray"},
        {"role": "user", "content": "next"},
    ]
    out, changes = run(profile, {"model": "deepseek-chat", "messages": messages})
    tools = [m for m in out if m["role"] == "tool"]
    assert tools == [{"role": "tool", "tool_call_id": "fc_1", "content": "valid"}]
    assert out[1]["tool_calls"][0]["id"] == "fc_1"
    assert not any(change["action"] == "added_stub" for change in changes)
    dropped = [c for c in changes if c["rule"] == "orphan-tool-results"]
    assert [c["tool_call_id"] for c in dropped] == ["call_ORPHAN"]


@pytest.mark.parametrize("profile", ["deepseek", "kimi"])
def test_finding_1_a_call_with_only_a_call_id_keeps_its_result(profile: str) -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "call_id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "valid"},
        {"role": "user", "content": "next"},
    ]
    out, changes = run(profile, {"model": "deepseek-chat", "messages": messages})
    assert out[1]["tool_calls"][0]["id"] == "call_1"
    assert out[2] == {"role": "tool", "tool_call_id": "call_1", "content": "valid"}
    assert not any(change["action"] in ("added_stub", "dropped_result") for change in changes)


THINKING_TURN = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "The user says hi.", "signature": "sig"},
        {"type": "text", "text": "Hi there"},
    ],
}


@pytest.mark.parametrize(
    ("profile", "model"), [("deepseek", "deepseek-v4-flash"), ("kimi", "kimi-k2.6")]
)
def test_finding_2_thinking_becomes_reasoning_content(profile: str, model: str) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        THINKING_TURN,
        {"role": "user", "content": "next"},
    ]
    out, changes = run(profile, {"model": model, "messages": messages})
    # DeepSeek takes strings only; Kimi takes the text part list as it is (minimal intervention)
    text: Any = "Hi there" if profile == "deepseek" else [{"type": "text", "text": "Hi there"}]
    assert out[1] == {
        "role": "assistant",
        "content": text,
        "reasoning_content": "The user says hi.",
    }
    assert {"rule": "thinking-parts", "action": "moved_thinking", "length": 17}.items() <= {
        **changes[0]
    }.items()


@pytest.mark.parametrize("profile", ["deepseek", "kimi"])
def test_finding_2_a_thinking_only_turn_is_removed_and_logged(profile: str) -> None:
    only = {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}]}
    messages = [{"role": "user", "content": "hi"}, only, {"role": "user", "content": "next"}]
    out, changes = run(profile, {"model": "deepseek-chat", "messages": messages})
    assert [m["role"] for m in out if m["role"] == "assistant"] == []
    assert any(c["action"] == "dropped_thinking" and c["length"] == 3 for c in changes)


@pytest.mark.parametrize("profile", ["openai", "xai"])
def test_finding_2_providers_without_reasoning_content_drop_the_thinking(profile: str) -> None:
    messages = [{"role": "user", "content": "hi"}, THINKING_TURN, {"role": "user", "content": "x"}]
    out, changes = run(profile, {"model": "gpt-5", "messages": messages})
    assert "reasoning_content" not in out[1]
    assert "thinking" not in orjson.dumps(out).decode()
    assert any(c["action"] == "dropped_thinking" and c["length"] == 17 for c in changes)


@pytest.mark.parametrize("profile", ["deepseek", "kimi"])
def test_finding_3_a_session_meta_record_is_removed(profile: str) -> None:
    messages = [
        {"role": "session_meta", "content": {"session_id": "s1"}},
        {"role": "user", "content": "hi"},
    ]
    out, changes = run(profile, {"model": "deepseek-chat", "messages": messages})
    assert out == [{"role": "user", "content": "hi"}]
    assert changes[0]["rule"] == "unknown-roles"
    assert changes[0]["role"] == "session_meta" and changes[0]["index"] == 0


def test_finding_5_deepseek_v4_pads_a_plain_reply_between_tool_call_turns() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": "r"},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "assistant", "content": "Found it."},
        {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "b.txt"},
        {"role": "user", "content": "thanks"},
    ]
    out, _ = run("deepseek", {"model": "deepseek-v4-pro", "messages": messages})
    assistants = [m for m in out if m["role"] == "assistant"]
    assert all(isinstance(m.get("reasoning_content"), str) for m in assistants)
    # Outside thinking mode nothing is added.
    plain, _ = run(
        "deepseek",
        {"model": "deepseek-v4-pro", "thinking": {"type": "disabled"}, "messages": messages},
    )
    assert "reasoning_content" not in plain[3]


# --- Properties over random histories ---------------------------------------------------------


def tool_texts(messages: list[Any]) -> list[str]:
    """The non-empty texts of the tool messages (a text-part list may leave as a string)."""
    return sorted(
        piece
        for m in messages
        if isinstance(m, dict) and m.get("role") == "tool"
        for piece in pieces(m)
    )


@pytest.mark.slow
@CROSS
@given(broken=broken_transcripts(("codex_call_ids",)), model=st.sampled_from(MODELS))
def test_a_no_result_is_stubbed_when_it_exists_under_either_id(broken: Broken, model: str) -> None:
    """(a) Results that answer their call's Codex alias all arrive, and no stub appears."""
    for profile in PROVIDERS:  # every profile judges the same draw
        note(f"profile {profile}")
        _a_no_result_is_stubbed_when_it_exists_under_either_id(profile, broken, model)


def _a_no_result_is_stubbed_when_it_exists_under_either_id(
    profile: str, broken: Broken, model: str
) -> None:
    out, _ = run(profile, {"model": model, "messages": broken.messages})
    assert not any(m.get("content") == STUB for m in out if m.get("role") == "tool"), (
        broken.defects,
        out,
    )
    results = [m for m in out if m.get("role") == "tool"]
    assert len(results) == sum(1 for m in broken.clean if m.get("role") == "tool"), out
    sent = "\n".join(tool_texts(out))  # a text-part list may leave collapsed into a string
    assert all(piece in sent for piece in tool_texts(broken.clean)), (broken.defects, out)


@pytest.mark.slow
@CROSS
@given(
    broken=broken_transcripts(("thinking_parts", "split_assistant", "codex_call_ids")),
    model=st.sampled_from(MODELS),
)
def test_b_no_thinking_text_is_lost_silently(broken: Broken, model: str) -> None:
    """(b) Each thinking text is forwarded (as reasoning_content, or in a content the profile
    leaves alone), or the thinking-parts Changes account for it by count and length."""
    for profile in PROVIDERS:  # every profile judges the same draw
        note(f"profile {profile}")
        _b_no_thinking_text_is_lost_silently(profile, broken, model)


def _b_no_thinking_text_is_lost_silently(profile: str, broken: Broken, model: str) -> None:
    payload = {"model": model, "messages": broken.messages}
    plan = PLANNER.plans[profile]
    result = sanitize_body(orjson.dumps(payload), plan)
    out = orjson.loads(result.body)["messages"]
    forwarded = orjson.dumps(out).decode()
    sent = [
        part["thinking"]
        for m in broken.messages
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for part in m["content"]
        if isinstance(part, dict) and part.get("type") == "thinking"
    ]
    missing = [text for text in sent if orjson.dumps(text).decode()[1:-1] not in forwarded]
    logged = [c for c in result.changes if c.rule == "thinking-parts"]
    assert all(text.startswith(THINKING_MARK) for text in sent)
    counted = sum(c.detail["parts"] for c in logged if c.action != "dropped_redacted_thinking")
    assert len(missing) <= counted, (missing, [c.as_dict() for c in logged], out)
    lengths = sum(c.detail["length"] for c in logged if c.action != "dropped_redacted_thinking")
    assert sum(len(text) for text in missing) <= lengths + 2 * len(missing)


@pytest.mark.slow
@CROSS
@given(broken=broken_transcripts(("unknown_role", "codex_call_ids", "orphan_result")))
def test_c_no_unknown_role_reaches_a_provider_that_refuses_it(broken: Broken) -> None:
    """(c) Every role that leaves is one the profile's provider accepts, and every record with
    another role is logged with its role."""
    for profile in PROVIDERS:  # every profile judges the same draw
        note(f"profile {profile}")
        _c_no_unknown_role_reaches_a_provider_that_refuses_it(profile, broken)


def _c_no_unknown_role_reaches_a_provider_that_refuses_it(profile: str, broken: Broken) -> None:
    plan = PLANNER.plans[profile]
    options = dict(next(ctx.options for rule, ctx in plan.steps if rule.name == "unknown-roles"))
    accepted = set(options["roles"]) | set(options["keep"])
    assert accepted <= set(OPENAI_ROLES)
    out, changes = run(profile, {"model": "deepseek-chat", "messages": broken.messages})
    assert {m["role"] for m in out if isinstance(m, dict)} <= accepted
    refused = [
        m["role"]
        for m in broken.messages
        if isinstance(m, dict) and isinstance(m.get("role"), str) and m["role"] not in accepted
    ]
    removed = [c["role"] for c in changes if c["rule"] == "unknown-roles"]
    assert sorted(removed) == sorted(refused)


# --- The contract agrees with the rules ----------------------------------------------------------


@pytest.mark.parametrize("profile", PROVIDERS)
def test_each_profiles_role_list_is_its_contracts(profile: str) -> None:
    """The rule removes exactly what the profile's unknown_role check refuses."""
    plan = PLANNER.plans[profile]
    options = next(ctx.options for rule, ctx in plan.steps if rule.name == "unknown-roles")
    check = {**CHECKS_BY_CODE["unknown_role"].options, **plan.contract["unknown_role"]}
    assert sorted(options["roles"]) == sorted(check["roles"])


def test_the_deepseek_contract_refuses_a_bare_plain_turn_of_a_tool_loop() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    loop = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": "r"},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "assistant", "content": "Found it."},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "You're welcome."},
    ]
    contract = PROFILES["deepseek"].contract
    found = violations({"model": "deepseek-v4-flash", "messages": loop}, contract)
    assert [(v.code, v.index) for v in found] == [("reasoning_content_missing", 3)]
    off = {"model": "deepseek-v4-flash", "thinking": {"type": "disabled"}, "messages": loop}
    assert violations(off, contract) == []
    kimi = violations({"model": "kimi-k2.6", "messages": loop}, PROFILES["kimi"].contract)
    assert "reasoning_content_missing" not in {v.code for v in kimi}  # tool-call turns only
