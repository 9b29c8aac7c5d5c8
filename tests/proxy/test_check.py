"""`chatmend check`: the provider's rejections, the rules' rewrites, exit 0/1/2, --fix."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from rules.chat import RULES
from rules.engine.pipeline import default_steps
from rules.providers.contract import DEFAULT_CONTRACT
from rules.providers.planner import Plan, Planner
from tests.fake_upstream import strict_errors
from tests.transcripts import BROKEN, CLEAN_BODY
from tools.check import CLEAN, INVALID, REPAIRED, check_body, run_check, run_error_check

CHATMEND = Path(sys.executable).parent / "chatmend"
STEPS = default_steps(RULES)


def body(messages: list[Any]) -> bytes:
    return orjson.dumps({"model": "deepseek-chat", "messages": messages})


def run(raw: bytes, *, fix: bool = False, fmt: str = "text") -> tuple[int, bytes, str]:
    out, err = io.BytesIO(), io.StringIO()
    status = run_check(io.BytesIO(raw), STEPS, fix=fix, fmt=fmt, out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def test_clean_body_exits_0() -> None:
    status, out, _ = run(CLEAN_BODY)
    assert status == CLEAN
    assert b"accepted as sent" in out


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_every_broken_kind_is_reported_and_repaired(kind: str) -> None:
    raw = body(BROKEN[kind])
    report = check_body(raw, STEPS)
    assert report.before, "the fixture must really be rejected"
    assert report.status == REPAIRED
    assert report.after == ()
    status, out, _ = run(raw)
    assert status == REPAIRED
    text = out.decode()
    assert report.before[0].message in text  # the provider's own words
    assert "after repair: accepted" in text


def test_fix_writes_the_repaired_body_and_reports_on_stderr() -> None:
    status, out, err = run(body(BROKEN["empty_tool_calls"]), fix=True)
    assert status == REPAIRED
    assert strict_errors(orjson.loads(out)) == []
    assert "empty-tool-calls" in err


def test_json_report() -> None:
    status, out, _ = run(body(BROKEN["unanswered_tool_call"]), fmt="json")
    report = orjson.loads(out)
    assert status == REPAIRED and report["status"] == "repaired"
    assert report["violations"][0]["code"] == "unanswered_tool_call"
    assert report["changes"][0]["rule"] == "unanswered-tool-calls"
    assert report["violations_after"] == []


def test_what_no_rule_can_repair_exits_2() -> None:
    # A call without an id can be answered by no stub: the provider still rejects it.
    messages = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
    ]
    status, out, _ = run(body(messages))
    assert status == INVALID
    assert b"unanswered_tool_call" in out


def test_not_json_exits_2() -> None:
    status, out, _ = run(b"{not json")
    assert status == INVALID
    assert b"body_not_json" in out


@pytest.mark.slow
def test_real_command_reads_stdin_and_honours_config(tmp_path: Path) -> None:
    raw = body(BROKEN["empty_tool_calls"])
    done = subprocess.run(
        [str(CHATMEND), "check", "-", "--fix"], input=raw, capture_output=True, check=False
    )
    assert done.returncode == REPAIRED
    assert strict_errors(orjson.loads(done.stdout)) == []
    config = tmp_path / "c.yaml"
    config.write_text("rules:\n  empty-tool-calls: false\n")
    file = tmp_path / "req.json"
    file.write_bytes(raw)
    done = subprocess.run(
        [str(CHATMEND), "check", str(file), "--config", str(config)],
        capture_output=True,
        check=False,
    )
    assert done.returncode == INVALID, done.stdout
    assert b"empty array" in done.stdout


@pytest.mark.slow
def test_missing_file_exits_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(CHATMEND), "check", str(tmp_path / "nope.json")], capture_output=True, check=False
    )
    assert done.returncode == 2
    assert b"cannot read" in done.stderr


def test_a_crashing_contract_check_never_blocks_the_repair(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    import rules.providers.sanitize
    from rules.providers import apis

    def explode(*args: Any) -> list[Any]:
        raise RuntimeError("boom")

    chat = dataclasses.replace(apis.CHAT_API, check=explode)
    monkeypatch.setitem(apis.APIS, "chat", chat)
    plan = Plan("custom", STEPS, DEFAULT_CONTRACT, verify=True)
    result = rules.providers.sanitize.sanitize_body(body(BROKEN["empty_tool_calls"]), plan)
    assert result.changed
    assert strict_errors(orjson.loads(result.body)) == []
    assert [f.rule for f in result.failures] == ["contract"]


def test_the_profile_is_picked_by_model_or_forced() -> None:
    planner = Planner()
    reasoner = orjson.dumps(
        {"model": "deepseek-reasoner", "messages": BROKEN["unanswered_tool_call"]}
    )
    assert check_body(reasoner, planner).profile == "deepseek-reasoner"
    forced = check_body(reasoner, planner.plans["mistral"])
    assert forced.profile == "mistral"
    # Mistral's own words for the same defect (docs/providers.md#mistral-pairing, mistral-common)
    assert forced.before[0].message == "Not the same number of function calls and responses"
    assert forced.status == REPAIRED and forced.after == ()


@pytest.mark.slow
def test_real_command_with_a_profile(tmp_path: Path) -> None:
    raw = body(BROKEN["unanswered_tool_call"])
    done = subprocess.run(
        [str(CHATMEND), "check", "-", "--profile", "mistral", "--format", "json"],
        input=raw,
        capture_output=True,
        check=False,
    )
    assert done.returncode == REPAIRED, done.stderr
    report = orjson.loads(done.stdout)
    assert report["profile"] == "mistral"
    assert report["violations"][0]["message"].startswith("Not the same number")
    done = subprocess.run(
        [str(CHATMEND), "check", "-", "--profile", "nope"],
        input=raw,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 2
    assert b"invalid choice: 'nope'" in done.stderr


def test_accepted_as_sent_is_never_printed_beside_rewrites() -> None:
    """A rule acting where the contract finds nothing is named as such, not "accepted"."""
    # `tool-call-content` asked to reshape `""` while the default contract accepts it.
    steps = default_steps(RULES, {"tool-call-content": {"enabled": True, "shape": "null"}})
    raw = body(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
    )
    out, err = io.BytesIO(), io.StringIO()
    run_check(io.BytesIO(raw), steps, fix=False, fmt="text", out=out, err=err)
    text = out.getvalue().decode()
    assert "rewrite(s)" in text and "accepted as sent" not in text
    assert "a rule changed something the provider's catalogued errors do not list" in text


def test_a_bare_list_says_an_object_is_expected() -> None:
    out, err = io.BytesIO(), io.StringIO()
    raw = orjson.dumps([{"role": "user", "content": "hi"}])
    run_check(io.BytesIO(raw), default_steps(RULES, {}), fix=False, fmt="text", out=out, err=err)
    assert '{"messages": [...]}' in out.getvalue().decode() + err.getvalue()


EMPTY_ERROR = orjson.dumps(
    {
        "error": {
            "message": "Invalid 'messages[1].tool_calls': empty array. Expected an array with "
            "minimum length 1, but got an empty array instead.",
            "type": "invalid_request_error",
        }
    }
)


def check_error(error: bytes, request: bytes | None = None, **kw: Any) -> tuple[int, str]:
    out = io.BytesIO()
    source = kw.pop("source", Planner("passthrough"))
    status = run_error_check(error, request, source, fmt=kw.pop("fmt", "text"), out=out)
    return status, out.getvalue().decode()


def test_check_error_names_the_class_the_rule_and_the_yaml() -> None:
    status, text = check_error(EMPTY_ERROR)
    assert status == 0
    assert "error class: empty_tool_calls" in text
    assert "repaired by: empty-tool-calls (chat)" in text
    assert "rules:\n  empty-tool-calls: true" in text


def test_check_error_without_the_request_names_a_class_in_its_own_api() -> None:
    """A Messages class is a Messages repair, not its chat twin's (a review's case): the
    request is not there to say its API, the class is."""
    error = orjson.dumps(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` "
                "blocks: toolu_01. Each `tool_result` block must have a corresponding `tool_use` "
                "block in the previous message.",
            },
        }
    )
    status, text = check_error(error)
    assert status == 0
    assert "error class: messages_orphan_tool_result" in text
    assert "(messages)" in text and "(chat)" not in text


def test_check_error_with_the_request_says_whether_the_repair_changes_it() -> None:
    _, text = check_error(EMPTY_ERROR, body(BROKEN["empty_tool_calls"]))
    assert "the repair changes this request" in text
    status, out = check_error(EMPTY_ERROR, body(BROKEN["empty_tool_calls"][:1]), fmt="json")
    assert status == 0
    assert orjson.loads(out) == {
        "error_class": "empty_tool_calls",
        "api": "chat",
        "rules": {"empty-tool-calls": {}},
        "key": "rules",
        "safety": {"empty-tool-calls": "safe"},
        "changes_request": False,
        "withheld": [],
        "profile": "passthrough",
        "already_on": [],
    }


def test_check_error_does_not_advise_enabling_a_rule_already_on() -> None:
    """Issue 40: under deepseek, empty-tool-calls is on; check said to enable it anyway."""
    status, text = check_error(EMPTY_ERROR, source=Planner("deepseek"))
    assert status == 0
    assert "already on under the profile deepseek: empty-tool-calls" in text
    assert "nothing to enable" in text and "rules:\n" not in text
    _, off = check_error(EMPTY_ERROR, source=Planner("passthrough"))
    assert "already on" not in off and "rules:\n  empty-tool-calls: true" in off


def test_check_says_which_side_each_index_counts_on() -> None:
    """Issue 40: a rejection's index counts on the body as sent, a rewrite's on both sides
    (the merge of messages[1] into messages[2] leaves the call at after messages[1]), a
    rejection after repair on the repaired body; never one list's index for another's."""
    call = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    raw = body(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": []},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
        ]
    )
    out, err = io.BytesIO(), io.StringIO()
    run_check(io.BytesIO(raw), Planner("deepseek"), fix=False, fmt="text", out=out, err=err)
    text = out.getvalue().decode()
    assert "rejection(s) the provider would return (indices: the body as sent):" in text
    assert "rewrite(s) (where: as sent -> after repair):" in text
    merged = next(line for line in text.splitlines() if " merged " in line)
    assert merged.strip().startswith("messages[1] -> ")
    # The dropped copy is one of two equal results: which one cannot be told from the bodies,
    # so its index is said on the list its rule received, never read as the one kept.
    dropped = next(line for line in text.splitlines() if "dropped_duplicate_result" in line)
    assert "messages[3] of the list as duplicate-tool-call-ids received it" in dropped, text


def test_check_error_says_what_a_retry_would_change_and_what_it_would_leave_out() -> None:
    """Each rule of the repair with its fix safety; a lossy change the route has not opted in
    to is left out of the retry (recover.lossy), and check says so."""
    error = orjson.dumps(
        {
            "error": {
                "message": "Duplicate value for 'tool_call_id' of call_1 in message[3]",
            }
        }
    )
    request = body(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "ls", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.py again"},
            {"role": "user", "content": "next"},
        ]
    )
    _, out = check_error(error, request, fmt="json")
    report = orjson.loads(out)
    assert "duplicate-tool-call-ids" in report["withheld"]
    _, text = check_error(error)
    assert "duplicate-tool-call-ids: safe: " in text and "lossy: dropped_duplicate_result" in text


def test_check_error_with_options_prints_them_in_the_yaml() -> None:
    kimi = orjson.dumps({"error": {"message": "text content is empty"}})
    _, text = check_error(kimi)
    assert 'tool-call-content: {enabled: true, shape: "omit", kinds: ["absent",' in text


def test_check_error_on_an_unknown_error_exits_2() -> None:
    status, text = check_error(b'{"error": {"message": "Rate limit reached."}}')
    assert status == INVALID
    assert "error class: unclassified" in text


@pytest.mark.slow
def test_check_error_from_the_command_line(tmp_path: Path) -> None:
    error = tmp_path / "error.json"
    error.write_bytes(EMPTY_ERROR)
    done = subprocess.run(
        [str(CHATMEND), "check", "--error", str(error)], capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert b"already on under the profile deepseek: empty-tool-calls" in done.stdout
    done = subprocess.run(
        [str(CHATMEND), "check", "--error", str(error), "--profile", "passthrough"],
        capture_output=True,
        check=False,
    )
    assert b"empty-tool-calls: true" in done.stdout
    done = subprocess.run([str(CHATMEND), "check"], capture_output=True, check=False)
    assert done.returncode == 2
    assert b"--error" in done.stderr


@pytest.mark.parametrize(
    ("profile", "payload", "code", "words"),
    [
        (
            "minimax",
            {"model": "MiniMax-M3", "tools": [{"type": "function", "function": {"name": "ls"}}]},
            "tool_parameters_empty",
            "invalid params, function parameters is empty (2013)",
        ),
        (
            "xai",
            {"model": "grok-4", "tool_choice": "auto"},
            "tool_choice_without_tools",
            "A tool_choice was set on the request but no tools were specified.",
        ),
        (
            "kimi",
            {"model": "kimi-k2.5", "temperature": 0.3},
            "thinking_temperature",
            "invalid temperature: only 1 is allowed for this model",
        ),
    ],
)
def test_request_level_refusals_are_reported_like_message_level_ones(
    profile: str, payload: dict[str, Any], code: str, words: str
) -> None:
    """`chatmend check --profile` names a refusal of the request's own fields (index: none) in
    the provider's words, repairs it, and exits 1 (issue 25)."""
    raw = orjson.dumps({**payload, "messages": [{"role": "user", "content": "hi"}]})
    plan = Planner(default=profile).plan(payload["model"])
    report = check_body(raw, plan)
    assert [(v.code, v.index) for v in report.before] == [(code, None)]
    assert report.status == REPAIRED and report.after == ()
    out, err = io.BytesIO(), io.StringIO()
    status = run_check(io.BytesIO(raw), plan, fix=False, fmt="text", out=out, err=err)
    assert status == REPAIRED
    assert words in out.getvalue().decode()
