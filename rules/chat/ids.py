"""Deterministic ids: the same input gives the same id on every machine and every run."""

from __future__ import annotations

import hashlib
from typing import Final

_BASE62: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def digest62(text: str, attempt: int = 0) -> str:
    """Base62 of the sha256 of ``text`` (and of ``attempt``, from 1 on): 43 characters of
    ``[0-9A-Za-z]``, the same for the same input on every machine."""
    data = text if attempt == 0 else f"{text}\x00{attempt}"
    number = int.from_bytes(hashlib.sha256(data.encode("utf-8", "surrogatepass")).digest())
    digits: list[str] = []
    while number:
        number, digit = divmod(number, 62)
        digits.append(_BASE62[digit])
    return "".join(reversed(digits)).rjust(43, "0")
