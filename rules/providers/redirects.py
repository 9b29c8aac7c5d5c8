"""Renamed rules: an operator's config written under a rule's old name keeps working.

A rule is renamed when its name stops saying what it repairs. Configs in the field name it by
its old name (``rules:`` toggles and options, a route's ``rules:``, ``recover.lossy``) and so
do the learned repairs a replica shared before it was upgraded; a rename must turn none of them
into a start-up error or a repair silently forgotten. So a rename adds one line here, ``old name
-> new name`` (compare ruff's rule redirects): the config reads the old name as the new one and
warns, naming the new one (proxy/config/renamed.py), and the learned repairs read it as the new
one. A redirect is kept for good: it costs a line, and a config that breaks on an upgrade costs
an operator an outage.

tests/rules/test_redirects.py holds the table: every new name is a rule, no old name is one (a
redirect may not shadow a rule), and no redirect points at another redirect.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: A renamed rule's old name -> its current name, one line per rename, oldest first. None yet:
#: no rule has been renamed since rule names became configuration (the first line goes here in
#: the commit that renames, CONTRIBUTING.md#renaming-a-rule).
REDIRECTS: Mapping[str, str] = MappingProxyType({})


def redirected(name: str) -> str | None:
    """The current name of ``name`` if it is a renamed rule's old name, else ``None``."""
    return REDIRECTS.get(name)


def current(name: str) -> str:
    """``name`` under the rule's current name (itself when it was never renamed)."""
    return REDIRECTS.get(name, name)
