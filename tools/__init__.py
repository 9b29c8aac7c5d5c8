"""chatmend's developer tools: the emulators (``chatmend emulate``), the probe, the offline
check, the docs generator and the scaffolds (``make rule``, ``make profile``). Never imported by
the server (tests/test_house.py), never in the image (Dockerfile): run from a clone."""
