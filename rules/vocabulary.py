"""Plain data tables the rules and the provider contracts share: names and sets, never a
predicate (each side writes its own reading of a shape)."""

from __future__ import annotations

#: The chat roles, in the order of the ``roles`` options that list them.
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
