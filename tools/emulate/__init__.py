"""``chatmend emulate``: a local strict provider (app.py routes each API to its module: chat.py,
responses.py, messages.py; errors.py holds the error envelopes)."""
