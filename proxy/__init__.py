"""chatmend's server, in wings, each a package whose name says what it holds, from the floor up
(tests/test_house.py keeps the order: a module imports its own wing and those below it, never
one above, and no two modules import each other):

- ``config``: the YAML, environment and flags read into frozen records, and their validation;
- ``observe``: the log, the metrics, the traces and the capture the page shows: the flow's
  record (``observe/flow.py``) and the subscribers to its named events;
- ``stash``: reasoning continuity (what a thinking model said, kept for its next request);
- ``relay``: reading a body, routing, credentials, the prefix cache, the worker processes, the
  upstream connection and streaming its answer back;
- ``recovery``: a refusal repaired and retried once, and what it teaches the next requests;
- ``server``: the app, the request's trip top to bottom (``server/trip.py``), the page, reload
  and the worker processes of ``--workers``.

``cli.py`` (the ``chatmend`` command, also ``python -m proxy``) stands above them all: it starts
the server, and the developer tools (tools/) for the commands that are theirs. The repairs
themselves are pure, in rules/.
"""
