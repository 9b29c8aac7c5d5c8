"""missing-tool-call-ids: a tool message in a block gets back the id it lost, where only one fits.

What: inside a block (an assistant with calls and the tool messages right after it), a tool
message without a usable ``tool_call_id`` (absent, ``null``, not a string, empty or blank)
takes the id of the call it answers, in two cases only:
- *one left*: exactly one call of the block is unanswered and exactly one of its tool messages
  has no id. It is the only completion of the block, so the id is forced.
- *in step*: the block has as many tool messages as calls, and every tool message that has an
  id carries exactly the id of the call at its position; the k-th message then answers the
  k-th call. Every id present confirms the call order, the reading the catalogue's positional
  repair relies on; with no id present, the count of messages matching the count of calls is
  the only evidence, so results sent out of call order would be paired by position.
Both need every call to have an id, and every tool message of the block that has an id to
answer one of its calls: a foreign or repeated id means the block holds more than answers to
its calls, and nothing is guessed. Apart from that, an id that differs from exactly one call's
id only by surrounding whitespace, when that call is unanswered, is replaced by the call's id.
Anything else is left for orphan-tool-results and unanswered-tool-calls.
Why: OpenAI and Azure answer 400 "Missing parameter 'tool_call_id': messages with role 'tool'
must have a 'tool_call_id'." and Groq "property 'tool_call_id' is missing"
(docs/providers.md#groq-pairing; langchain-ai/langchain#22600, hackclub/ai#22); a Responses-to-chat
relay turned a missing ``call_id`` into ``tool_call_id: ""`` (openai/codex#42088). The catalogue's
repair recovers the id from the assistant's unanswered calls. Hermes drops such results (R19), and a
result whose id carried a stray space was stubbed although it had arrived (E4, #9999). Safety: safe.
An id is written only where it is forced (one message for one call) or where every id present
confirms the positional reading; the way each was found is logged (``by``). The residual risk: a
block whose results all lost their ids and came out of call order is paired by position. A block
that fits neither case loses its id-less messages to orphan-tool-results (logged) rather than
pairing a result with a call by a guess.
"""

from __future__ import annotations

from typing import Any

from rules.chat import scan
from rules.chat.apart import TURNS
from rules.chat.tool_turns import Block, analyse, is_paired
from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.engine.messages import rewrite_at

NAME = "missing-tool-call-ids"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if is_paired(messages):
        return Outcome(messages)  # the common case: every block answers exactly its calls
    fixes: dict[int, tuple[str, dict[str, Any]]] = {}  # index -> (new id, change detail)
    for block in analyse(messages).blocks:
        if block.extra and None in block.answers:
            _recover(messages, block, fixes)
    if not fixes:
        return Outcome(messages)
    changes: list[Change] = []

    def fix(index: int, message: Any) -> Any:
        new, detail = fixes[index]
        changes.append(Change(NAME, index, "recovered_id", {"tool_call_id": new, **detail}))
        return {**message, "tool_call_id": new}

    return Outcome(rewrite_at(messages, sorted(fixes), fix), tuple(changes))


def _recover(
    messages: list[Any], block: Block, fixes: dict[int, tuple[str, dict[str, Any]]]
) -> None:
    """Add to ``fixes`` the ids this block's extra tool messages can take without a guess."""
    answers = list(block.answers)
    idless: list[int] = []
    foreign: list[int] = []
    for j in block.extra:
        rid = messages[j].get("tool_call_id")
        (foreign if type(rid) is str and rid.strip() else idless).append(j)
    if foreign:
        foreign = _respace(messages, block, answers, foreign, fixes)
    if foreign or block.unpairable:
        return  # the block holds more than answers to its calls, or a call nobody can answer
    open_ = [pos for pos, answer in enumerate(answers) if answer is None]
    if not idless or not open_:
        return
    if len(idless) == 1 and len(open_) == 1:
        j = idless[0]
        fixes[j] = (block.ids[open_[0]], {"by": "one_left", "was": _was(messages[j])})
        return
    first = block.start + 1
    if block.end - first != len(block.ids):
        return
    missing = set(idless)
    for pos, answer in enumerate(answers):
        if answer != first + pos and not (answer is None and first + pos in missing):
            return  # out of step: the positions prove nothing
    for j in idless:
        fixes[j] = (block.ids[j - first], {"by": "in_step", "was": _was(messages[j])})


def _respace(
    messages: list[Any],
    block: Block,
    answers: list[int | None],
    foreign: list[int],
    fixes: dict[int, tuple[str, dict[str, Any]]],
) -> list[int]:
    """Match ids that differ from one unanswered call's only by whitespace (hermes E4); return
    the foreign messages left unmatched. Fills ``answers`` for the matched ones."""
    ids = set(block.ids)
    by_stripped: dict[str, list[int]] = {}  # stripped call id -> positions of all calls with it
    for pos, cid in enumerate(block.ids):
        by_stripped.setdefault(cid.strip(), []).append(pos)
    claims: dict[str, list[int]] = {}  # stripped id -> the foreign messages carrying it
    for j in foreign:
        rid: str = messages[j]["tool_call_id"]
        if rid not in ids:  # an exact id of the block here is a second answer, not a typo
            claims.setdefault(rid.strip(), []).append(j)
    matched: set[int] = set()
    for stripped, claimants in claims.items():
        positions = by_stripped.get(stripped)
        if not stripped or len(claimants) != 1 or not positions or len(positions) != 1:
            continue
        pos = positions[0]
        if answers[pos] is not None:
            continue
        j = claimants[0]
        answers[pos] = j
        matched.add(j)
        fixes[j] = (block.ids[pos], {"by": "whitespace", "was": messages[j]["tool_call_id"]})
    return [j for j in foreign if j not in matched]


def _was(message: dict[str, Any]) -> str:
    """What stood in place of the id: ``absent``, ``null``, ``empty``, ``blank`` or its type."""
    if "tool_call_id" not in message:
        return "absent"
    value = message["tool_call_id"]
    if value is None:
        return "null"
    if value == "":
        return "empty"
    if type(value) is str:
        return "blank"  # whitespace only
    return type(value).__name__


RULE = Rule(
    name=NAME,
    summary="Give a tool message without tool_call_id the id of the one call it can answer.",
    defect='a tool message in a block without a usable `tool_call_id` (absent, `null`, `""`): '
    "OpenAI \"Missing parameter 'tool_call_id': messages with role 'tool' must have a "
    "'tool_call_id'.\" (langchain-ai/langchain#22600), Groq \"property 'tool_call_id' is missing\" "
    "(hackclub/ai#22; docs/providers.md#openai-pairing)",
    repair="give it the id of the one call left unanswered, or, when the block's results and calls "
    "are in step, of the call at its position; an id off by surrounding whitespace takes the "
    "call's exact id; anything ambiguous is left alone. An id is written only where it is forced, "
    "or where every id present confirms the call order",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(TURNS.apart(apply)),  # a new turn apart from the history
    scan=scan.scan,
    woken_by=scan.on(scan.UNPAIRED),
)
