"""The lock (requirements.lock, README.md#dependencies) keeps main green whatever is released
elsewhere: `make run` and `make test` install exactly its versions. These fail when it has gone
stale: a dependency added to pyproject.toml without `make lock`, a pin outside the range
pyproject.toml allows, or a `.venv` that no longer holds what the lock says."""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"


def locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in LOCK.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, separator, version = line.partition("==")
        assert separator and version, f"requirements.lock: not an exact pin: {line!r}"
        pins[canonicalize_name(name)] = version
    return pins


def requirements() -> list[Requirement]:
    """Every requirement pyproject.toml names: the dependencies, every extra, the build's."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    texts = [*project["dependencies"], *pyproject["build-system"]["requires"]]
    for extra in project["optional-dependencies"].values():
        texts.extend(extra)
    return [Requirement(text) for text in texts]


def test_every_requirement_is_pinned_inside_its_range() -> None:
    pins = locked()
    wrong = []
    for requirement in requirements():
        name = canonicalize_name(requirement.name)
        if name not in pins:
            wrong.append(f"{requirement}: not in requirements.lock (run `make lock`)")
        elif pins[name] not in requirement.specifier:
            wrong.append(f"{requirement}: locked at {pins[name]} (run `make lock`)")
    assert wrong == []


def test_the_lock_pins_the_installer_too() -> None:
    """pip and setuptools (which builds the editable install) are locked like the rest."""
    assert {"pip", "setuptools"} <= locked().keys()


@pytest.mark.skipif(
    Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
    reason="not the locked .venv (make test-latest runs in .venv-latest, without the lock)",
)
def test_the_venv_holds_exactly_the_locked_versions() -> None:
    """Everything installed in .venv comes from the lock at its version: a package that is not
    in the lock came in unpinned (a new dependency's dependency, say)."""
    pins = locked()
    wrong = []
    for distribution in metadata.distributions():
        name = canonicalize_name(distribution.metadata["Name"])
        if name == "chatmend":
            continue
        if name not in pins:
            wrong.append(f"{name}=={distribution.version}: installed, not in requirements.lock")
        elif pins[name] != distribution.version:
            wrong.append(f"{name}: installed {distribution.version}, locked {pins[name]}")
    assert wrong == []
