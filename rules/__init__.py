"""chatmend's repair rules: pure functions over a request's messages, in rooms.

- ``rules.engine``: what every rule is built on, knowing no API: the ``Rule`` record and its
  options (``base``), the fail-open pipeline (it walks each rule's declared ``scan`` once),
  copy-on-write helpers (``messages``), the pairing law, replays, lone surrogates, the
  arguments repair, one id-renaming helper (``ids``), a registry's declared order (``order``)
  and what the server gives the rules (``RequestFacts``).
- ``rules.vocabulary``: plain data tables the rules and the contracts share.
- ``rules.chat``: the chat-completions rules, one module each, and ``RULES``, their one order,
  with ``ORDER``, the reasons for it;
  the chat walks (``scan``: its signals, ``tool_turns``, ``merge``, ``request``,
  ``message_fields``).
- ``rules.responses``: the Responses API rules and ``RESPONSES_RULES`` (``items``: the item
  vocabulary and the call/output pairing).
- ``rules.messages``: the Anthropic Messages rules and ``MESSAGES_RULES`` (``blocks``,
  ``scan``, ``remap``: the Messages walks they share).
- ``rules.providers``: the record of each API (``apis``), what each provider refuses
  (``contract``), the profiles that configure the rules for it (``profiles``) and the planner
  that turns a route's settings into a plan; the table of renamed rules (``redirects``).

Imports go downward only: providers -> chat/responses/messages -> engine; no rule imports
another rule's module. Nothing here does I/O.
"""
