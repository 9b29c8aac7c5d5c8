"""New ids (and names) for one request, the same for every API: deterministic, one-to-one, and
never one the request already holds. A rule that renames says which values do not fit and how a
new one is made; the call and what answers it then get the same new value (each API's walk:
chat's rules rewrite by value, ``rules.messages.remap`` carries a call's new id to its results).

- ``Renames``: the values of a request in order of first appearance, and those that do not fit
  (``see``); ``mapping`` gives each of those a new value.
- ``fresh_from``: a new value from ``fresh(value, attempt)``, attempt 0, 1, ... until one no value
  kept or made holds (``tool-call-ids``, ``function-names``: a hash of the value and the attempt).
- ``Minter``: a new value from a base, ``base`` or ``base_d<n>`` (``messages-tool-use-id-charset``,
  ``messages-duplicate-tool-use-ids``, ``responses-call-ids``, the blank-id rules).
- ``digest62``: base62 of a sha256, the same on every machine and every run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
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


class Renames:
    """A request's values (ids, names) in order of first appearance, and those that do not fit
    (``fits`` says no): what ``mapping`` renames."""

    def __init__(self, fits: Callable[[str], bool]) -> None:
        self.fits = fits
        self._order: dict[str, None] = {}
        self._bad: set[str] = set()

    def see(self, value: str) -> bool:
        """Note ``value``; whether it must change."""
        self._order.setdefault(value)
        if value in self._bad or not self.fits(value):
            self._bad.add(value)
            return True
        return False

    def see_all(self, values: Iterable[str]) -> bool:
        """Note every one of ``values`` (none skipped); whether any must change."""
        changed = False
        for value in values:
            changed = self.see(value) or changed
        return changed

    def __bool__(self) -> bool:
        """Whether any value seen must change."""
        return bool(self._bad)

    def kept(self) -> set[str]:
        """The values seen that fit: they stay as they are."""
        return {value for value in self._order if value not in self._bad}

    def mapping(self, make: Callable[[str], str]) -> dict[str, str]:
        """Each value that does not fit -> ``make(value)``, in order of first appearance."""
        return {value: make(value) for value in self._order if value in self._bad}


def fresh_from(fresh: Callable[[str, int], str], taken: set[str]) -> Callable[[str], str]:
    """A maker of new values: ``fresh(value, 0)``, ``fresh(value, 1)``, ... the first that
    ``taken`` does not hold (then it does)."""

    def make(value: str) -> str:
        attempt = 0
        new = fresh(value, attempt)
        while new in taken:
            attempt += 1
            new = fresh(value, attempt)
        taken.add(new)
        return new

    return make


class Minter:
    """Fresh ids for one request: ``base``, or ``base_d<n>`` with the smallest n >= 2 that no
    id in ``taken`` holds; the id minted joins ``taken``. The search resumes per base where it
    stopped (``taken`` only grows, so no smaller n can have come free): linear over a request,
    where starting at 2 each time made a hostile run of one id quadratic."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self._next: dict[str, int] = {}

    def mint(self, base: str) -> str:
        if base not in self.taken:
            self.taken.add(base)
            return base
        n = self._next.get(base, 2)
        while f"{base}_d{n}" in self.taken:
            n += 1
        self._next[base] = n + 1
        new = f"{base}_d{n}"
        self.taken.add(new)
        return new
