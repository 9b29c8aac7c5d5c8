"""`make profile` (tools/new_profile.py): the scaffold writes a profile's record (its host, the
pairing core, a placeholder summary) into PROFILES before passthrough, and its catalogue section
before the unattributed errors, in a copy of the tree; the catalogue's index then lists it, and
every part it writes holds a placeholder the suite refuses until it is filled in."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_placeholders import left
from tools import docs, new_profile

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for path in (new_profile.PROFILES_PY, new_profile.CATALOGUE):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    monkeypatch.setattr(new_profile, "ROOT", tmp_path)
    return tmp_path


def test_the_scaffold_writes_the_record_and_the_catalogue_section(tree: Path) -> None:
    argv = ["acme", "api.acme.example", "Acme AI", "--shapes", "pairing,fields"]
    assert new_profile.main(argv) == 0
    source = (tree / new_profile.PROFILES_PY).read_text()
    record = source.split("ACME = Profile(\n", 1)[1].split("\n)\n", 1)[0]
    assert '    "acme",\n' in record
    assert 'hosts=(Host("api.acme.example", "https://api.acme.example"),)' in record
    assert "contract=_contract(\n        PAIRING," in record
    assert source.index("ACME = Profile(") < source.index("PASSTHROUGH = Profile(")
    assert "        ACME,\n        PASSTHROUGH,\n    )\n}" in source
    compile(source, "profiles.py", "exec")
    catalogue = (tree / new_profile.CATALOGUE).read_text()
    assert catalogue.index('<a id="acme"></a>') < catalogue.index('<a id="others"></a>')
    listed = {
        anchor: (title, profile, shapes)
        for anchor, title, profile, shapes in docs.catalogue_providers(catalogue)
    }
    assert listed["acme"] == ("Acme AI", "acme", ["pairing", "fields"])
    assert "### Acme AI: unknown message fields" in catalogue
    places = {line.split(":", 1)[0] for line in left(tree)}
    assert places == {str(new_profile.PROFILES_PY), str(new_profile.CATALOGUE)}
    with pytest.raises(SystemExit):  # a second time: the profile exists
        new_profile.main(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["Acme", "api.acme.example"],
        ["acme", "https://api.acme.example"],
        ["acme", "api.acme.example", "Acme", "--shapes", "pairing,tools"],
    ],
)
def test_bad_arguments_are_refused(tree: Path, argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        new_profile.main(argv)
    assert left(tree) == []
