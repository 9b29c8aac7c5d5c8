"""A config written under renamed rules' old names, read under their new names, with a warning.

Every place a config names a rule (``rules:`` and ``recover.lossy``, at the top and in each
route) is read through the redirects (``rules.providers.redirects``) before it is validated:
an old name becomes the new one and leaves a warning naming both, which ``load_config`` prints
(``Config.warnings``). The old name and the new one set side by side
are a conflict, refused with the dotted key: which of the two settings was meant is not for
chatmend to guess. Anything that is not the expected shape is left as it is, for the validation
after to report under its key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.config.validate import ConfigError
from rules.providers.redirects import redirected


def renamed(data: Any) -> tuple[Any, tuple[str, ...]]:
    """``data`` (the config's mapping) with every renamed rule under its new name, and one
    warning per old name found. ``data`` itself is not modified."""
    if not isinstance(data, Mapping):
        return data, ()
    warnings: list[str] = []
    data = _in_section(data, "", warnings)
    routes = data.get("routes")
    if isinstance(routes, Mapping):
        given = {
            name: _in_section(route, f"routes.{name}.", warnings)
            if isinstance(route, Mapping)
            else route
            for name, route in routes.items()
        }
        data = {**data, "routes": given}
    return data, tuple(warnings)


def _in_section(section: Mapping[str, Any], where: str, warnings: list[str]) -> dict[str, Any]:
    """One level's ``rules`` keys and ``recover.lossy`` list under the rules' new names."""
    out = dict(section)
    rules = section.get("rules")
    if isinstance(rules, Mapping):
        out["rules"] = _keys(rules, f"{where}rules", warnings)
    recover = section.get("recover")
    if isinstance(recover, Mapping) and isinstance(recover.get("lossy"), list):
        out["recover"] = {
            **recover,
            "lossy": _names(recover["lossy"], f"{where}recover.lossy", warnings),
        }
    return out


def _keys(rules: Mapping[Any, Any], key: str, warnings: list[str]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for name, value in rules.items():
        new = redirected(name) if isinstance(name, str) else None
        if new is None:
            out[name] = value
            continue
        if new in rules:
            raise ConfigError(
                f"{key}.{name}: renamed to {new}, which is set too: keep one "
                f"(the settings under {name} now belong to {new})"
            )
        warnings.append(_warning(f"{key}.{name}", name, new))
        out[new] = value
    return out


def _names(names: list[Any], key: str, warnings: list[str]) -> list[Any]:
    out: list[Any] = []
    for name in names:
        new = redirected(name) if isinstance(name, str) else None
        if new is not None:
            warnings.append(_warning(key, name, new))
        out.append(new or name)
    return out


def _warning(key: str, old: str, new: str) -> str:
    return f"{key}: rule {old} was renamed {new}; the old name still works, write {new}"
