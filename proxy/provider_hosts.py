"""The provider profile an upstream URL implies, for a config that names none.

``profile:`` (top level, a route's, or ``--profile``) always wins. Without one, the upstream's
host picks the profile from ``HOST_PROFILES`` (docs/profiles.md renders the same table), so
``--upstream https://api.moonshot.ai`` runs under ``kimi`` rather than the default.
A host not in the table gets ``DEFAULT_PROFILE`` (``deepseek``, chatmend's first target); the
choice and its reason are logged in ``proxy_started``.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from yarl import URL

from rules.providers.profiles import DEFAULT_PROFILE

#: (host glob, profile), first match wins; hosts are compared in lower case.
HOST_PROFILES: tuple[tuple[str, str], ...] = (
    ("api.deepseek.com", "deepseek"),
    ("api.moonshot.ai", "kimi"),
    ("api.moonshot.cn", "kimi"),
    ("api.kimi.com", "kimi"),  # Kimi Code (kimi-for-coding), MoonshotAI/kimi-code#269
    ("api.mistral.ai", "mistral"),
    ("api.groq.com", "groq"),
    ("api.openai.com", "openai"),
    ("*.openai.azure.com", "azure"),
    ("generativelanguage.googleapis.com", "gemini-openai"),
    ("api.x.ai", "xai"),
    ("dashscope*.aliyuncs.com", "qwen"),
    ("open.bigmodel.cn", "glm"),
    ("api.z.ai", "glm"),
    ("api.minimax*", "minimax"),
    ("api.cerebras.ai", "cerebras"),
    ("api.anthropic.com", "anthropic"),
    ("openrouter.ai", "openrouter"),
)


def profile_for_upstream(url: str) -> tuple[str, str]:
    """The profile for an upstream URL, and why (for the ``proxy_started`` line)."""
    host = (URL(url).host or "").lower()
    for pattern, profile in HOST_PROFILES:
        if fnmatchcase(host, pattern):
            return profile, f"upstream host {host} matches {pattern}"
    return DEFAULT_PROFILE, f"upstream host {host} is not a known provider: the default profile"
