"""Scaffold a provider profile: ``make profile NAME=<kebab-name> HOST=<host> TITLE="<Provider>"``.

Writes every part of a profile a scaffold can write, each failing until a person fills it in
(CONTRIBUTING.md#add-a-profile): the ``Profile`` record in rules/providers/profiles.py with its
host (the base URL the provider documents, ``URL=`` if it is not ``https://<host>``), the pairing
core for its contract and a placeholder summary, registered in ``PROFILES`` before
``passthrough``; and its section of the provider catalogue, docs/providers.md, before the
unattributed errors, with one subsection per shape (``SHAPES=pairing,fields``: the catalogue's
shapes) holding one placeholder entry each. Every ``TODO`` it writes is one
tests/test_placeholders.py names until it is gone. ``make docs`` then lists the profile in
docs/profiles.md and the section in the catalogue's index; the property tests, the catalogue
rows and the probe take the new profile as they find it in ``PROFILES``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from tools.docs import CATALOGUE_SHAPES

ROOT = Path(__file__).resolve().parent.parent
PROFILES_PY = Path("rules/providers/profiles.py")
CATALOGUE = Path("docs/providers.md")
#: The record is written before this one's, and the section before this catalogue section.
LAST_PROFILE = "PASSTHROUGH"
LAST_SECTION = '<a id="others"></a>\n'

RECORD = """{constant} = Profile(
    "{name}",
    "TODO {title} ({host}): what it refuses, in a line",
    hosts=(Host("{host}", "{url}"),),
    # The rules its refusals need, over each rule's default, each citing its catalogue entry:
    # "unknown-message-fields": True,  # docs/providers.md#{name}-fields
    rules={{}},
    contract=_contract(
        PAIRING,
        # TODO each refusal on record: its check in the provider's own words, citing its entry:
        # unknown_field={{"text": "..."}},  # docs/providers.md#{name}-fields (owner/repo#N)
    ),
)

"""

SECTION = """<a id="{name}"></a>
## {title}

chatmend's profile: [`{name}`](profiles.md#{name}).

What a request to {title} needs:

- TODO one line per refusal: what to change, and the entry below that shows it.

"""

SUBSECTION = """<a id="{name}-{shape}"></a>
### {title}: {heading}

- **TODO the shape refused** ({title}; HTTP 400): "TODO the provider's error text, verbatim"
  Sources: TODO owner/repo#N.
  Repair that avoids it: TODO what to send instead.

"""


def add_record(text: str, constant: str, record: str) -> str:
    """``text`` (profiles.py) with ``record`` before the last profile's and ``constant`` in
    ``PROFILES`` before it."""
    opening = f"{LAST_PROFILE} = Profile(\n"
    listed = f"        {LAST_PROFILE},\n    )\n}}"
    if opening not in text or listed not in text:
        raise SystemExit(f"{PROFILES_PY}: no {LAST_PROFILE} record and PROFILES entry to go before")
    text = text.replace(opening, record + opening, 1)
    return text.replace(listed, f"        {constant},\n{listed}", 1)


def add_section(text: str, section: str) -> str:
    """``text`` (the catalogue) with ``section`` before the unattributed errors."""
    if LAST_SECTION not in text:
        raise SystemExit(f"{CATALOGUE}: no {LAST_SECTION.strip()} section to go before")
    return text.replace(LAST_SECTION, section + LAST_SECTION, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="kebab-case, the provider's name (a profile name)")
    parser.add_argument("host", help="the upstream host that selects it, e.g. api.example.com")
    parser.add_argument("title", nargs="?", help="the provider's name in the catalogue")
    parser.add_argument("--url", help="the base URL it documents (default: https://<host>)")
    parser.add_argument(
        "--shapes", default="pairing", help="catalogue subsections, comma-separated"
    )
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[a-z][a-z0-9-]*", args.name):
        parser.error("NAME must be kebab-case")
    if not re.fullmatch(r"[a-z0-9*.-]+", args.host):
        parser.error("HOST must be a host name (lower case; * as a glob)")
    headings = dict(CATALOGUE_SHAPES)
    shapes = [shape.strip() for shape in args.shapes.split(",") if shape.strip()]
    if not shapes or any(shape not in headings for shape in shapes):
        parser.error(f"SHAPES must be some of {', '.join(headings)}")
    constant = args.name.upper().replace("-", "_")
    profiles, catalogue = ROOT / PROFILES_PY, ROOT / CATALOGUE
    text = profiles.read_text()
    if f'\n    "{args.name}",\n' in text or f"\n{constant} = " in text:
        parser.error(f"{PROFILES_PY} has a profile {args.name} already")
    fields = {
        "name": args.name,
        "title": args.title or args.name.capitalize(),
        "host": args.host,
        "url": args.url or f"https://{args.host.replace('*.', '')}",
        "constant": constant,
    }
    profiles.write_text(add_record(text, constant, RECORD.format(**fields)))
    section = SECTION.format(**fields) + "".join(
        SUBSECTION.format(
            **fields, shape=shape, heading=headings[shape][0].lower() + headings[shape][1:]
        )
        for shape in shapes
    )
    catalogue.write_text(add_section(catalogue.read_text(), section))
    for written in (PROFILES_PY, CATALOGUE):
        print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
