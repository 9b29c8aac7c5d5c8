"""The reply rules: repairs of what the upstream sends back (chat completions, streamed or
not), one module each, and ``REPLY_RULES``, their one explicit order.

They run per choice over its steps (``rules.replies.base``), after the relay read them from the
upstream and before the client gets them; the proxy arms them per request
(``rules.replies.pipeline.ReplyRun``) and relays untouched whatever no armed rule changed.
"""

from __future__ import annotations

from rules.engine.order import EVERY, Before, before
from rules.replies import finish_reason, text_tool_calls, think_tags, tool_call_shape
from rules.replies.base import ReplyRule

#: The one ordered tuple of reply rules; each position is justified by the reasons in ``ORDER``
#: (tests/rules/test_order.py holds the tuple to them).
REPLY_RULES: tuple[ReplyRule, ...] = (
    think_tags.RULE,
    tool_call_shape.RULE,
    text_tool_calls.RULE,
    finish_reason.RULE,
)

ORDER: tuple[Before, ...] = (
    before(
        think_tags.NAME,
        EVERY,
        "Thinking out of the content first: a call the model wrote inside its thinking is part "
        "of its reasoning, not an answer the text rule should read.",
    ),
    before(
        tool_call_shape.NAME,
        (text_tool_calls.NAME, finish_reason.NAME),
        "The upstream's own tool-call deltas get their index and id first: the text rule "
        "numbers the calls it makes after them, and leaves a choice alone once they come.",
    ),
    before(
        text_tool_calls.NAME,
        finish_reason.NAME,
        "The finish_reason follows the calls the text rule made: it must have made them.",
    ),
)

#: Each reply rule by its name (the config's ``rules:`` map takes them beside the request rules).
REPLY_RULES_BY_NAME: dict[str, ReplyRule] = {rule.name: rule for rule in REPLY_RULES}
