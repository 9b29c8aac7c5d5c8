"""The server: the app and what it holds (app.py, appkeys.py), one request's trip top to bottom
(trip.py), the page at /chatmend/ (page.py, diff.py), hot reload and ``--workers``."""
