"""The reply rules: repairs of what the upstream sends back (chat completions, streamed or
not), one module each, and ``REPLY_RULES``, their one explicit order.

They run per choice over its steps (``rules.replies.base``), after the relay read them from the
upstream and before the client gets them; the proxy arms them per request
(``rules.replies.pipeline.ReplyRun``) and relays untouched whatever no armed rule changed.
"""

from __future__ import annotations

from rules.replies import finish_reason, text_tool_calls, think_tags, tool_call_shape
from rules.replies.base import ReplyRule

#: The one ordered tuple of reply rules. Each position is justified:
REPLY_RULES: tuple[ReplyRule, ...] = (
    # Thinking out of the content first: a call the model wrote inside its thinking is part of
    #    its reasoning, not an answer the text rule should read.
    think_tags.RULE,
    # The upstream's own tool-call deltas get their index and id first: the text rule
    #    numbers the calls it makes after them, and leaves a choice alone once they come.
    tool_call_shape.RULE,
    # Calls written as text become tool_calls.
    text_tool_calls.RULE,
    # Last: the finish_reason follows the calls the text rule made.
    finish_reason.RULE,
)

#: Each reply rule by its name (the config's ``rules:`` map takes them beside the request rules).
REPLY_RULES_BY_NAME: dict[str, ReplyRule] = {rule.name: rule for rule in REPLY_RULES}
