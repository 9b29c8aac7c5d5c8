"""Coverage-guided fuzzing of ``sanitize_body`` with atheris/libFuzzer (``make fuzz``).

Not part of ``make test``: ``make fuzz`` installs atheris (a binary wheel) and runs this for
``FUZZ_SECONDS`` (default 60); libFuzzer flags pass through, e.g.
``make fuzz ARGS="-max_total_time=600 -jobs=2"``. Every input goes through the same checks as
the hypothesis tests (``tests/test_fuzz_sanitizer.py:check``); a failure leaves the input in a
``crash-*`` file (in the temporary directory it prints) to turn into a regression test. The
seed corpus comes from the hand-written transcripts and the scaling shapes.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson


def _seeds() -> list[bytes]:
    from tests.bodies import SCALING_SHAPES, scaled_body
    from tests.transcripts import BROKEN, CLEAN_BODY

    seeds = [CLEAN_BODY, b"{}", b'{"messages": []}', b"[" * 1025]
    seeds += [orjson.dumps({"model": "m", "messages": messages}) for messages in BROKEN.values()]
    seeds += [scaled_body(shape, 20) for shape in SCALING_SHAPES]
    return seeds


def main(argv: list[str]) -> None:
    atheris: Any = importlib.import_module("atheris")  # installed by `make fuzz` only
    with atheris.instrument_imports():
        import rules
        import rules.providers.sanitize
    from tests.test_fuzz_sanitizer import check

    assert rules.providers.sanitize.sanitize_body is not None

    def one_input(data: bytes) -> None:
        check(data)

    work = Path(tempfile.mkdtemp(prefix="chatmend-fuzz-"))
    corpus = work / "corpus"
    corpus.mkdir()
    for number, seed in enumerate(_seeds()):
        (corpus / f"seed-{number}").write_bytes(seed)
    flags = argv[1:]
    if not any(flag.startswith("-artifact_prefix=") for flag in flags):
        flags.append(f"-artifact_prefix={work}/")  # crash-* files, not in the repository
    print(f"fuzz: corpus and crash files in {work}", flush=True)
    atheris.Setup([argv[0], *flags, str(corpus)], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
