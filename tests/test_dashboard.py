"""The Grafana dashboard (deploy/grafana/chatmend.json) queries only series chatmend exports.

Every PromQL expression in it (panels and template variables) is parsed for the metric names
and label names it uses; each name must be one a chatmend app exposes at ``GET /metrics`` after
some traffic (a rewrite, an upstream rejection, a reasoning placeholder), and each label one
that series carries (checked on every series the traffic gives samples, the panels the issue
asks for included; a labelled counter nothing incremented yet shows no labels to check).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import call
from tests.conftest import ProxyFactory
from tests.transcripts import BROKEN, USER, chat

DASHBOARD = Path(__file__).resolve().parent.parent / "deploy" / "grafana" / "chatmend.json"
#: What the operator's first look needs (issue 16), each by the series it reads.
REQUIRED = {
    "requests and status by route": "chatmend_requests_total",
    "rewrites by rule": "chatmend_rewrites_total",
    "upstream 4xx by error class": "chatmend_upstream_rejections_total",
    "overhead histogram": "chatmend_overhead_seconds_bucket",
    "streams in flight": "chatmend_streams_in_flight",
    "reasoning restored vs placeholder": "chatmend_reasoning_total",
}
_METRIC = re.compile(r"\b(chatmend_[a-z_]+)\b")
_SELECTOR = re.compile(r"\b(chatmend_[a-z_]+)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_LABEL_VALUES = re.compile(r"label_values\(\s*(chatmend_[a-z_]+)\s*,\s*([a-z_]+)\s*\)")


def expressions(node: Any) -> Iterator[str]:
    """Every PromQL expression in the dashboard: panel targets and template queries."""
    if isinstance(node, dict):
        for key, value in node.items():
            promql = key in ("expr", "definition") or (key == "query" and "chatmend_" in str(value))
            if promql and isinstance(value, str):
                yield value
            else:
                yield from expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item)


async def exported(make_proxy: ProxyFactory) -> tuple[dict[str, set[str]], set[str]]:
    """Series name -> label names, as a chatmend app exposes them after some traffic; and the
    names that had samples."""
    proxy = await make_proxy()
    # a broken body reaches the fake: 400 (recovery off, else it would repair and retry it)
    raw = await make_proxy({"profile": "passthrough", "recover": {"enabled": False}})
    broken = chat(BROKEN["split_assistant_turn"])
    assert (await proxy.post("/v1/chat/completions", data=broken)).status == 200
    assert (await raw.post("/v1/chat/completions", data=broken)).status == 400
    thinking = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "ls", "{}")]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    ]
    body = chat(thinking, model="deepseek-v4-pro")
    assert (await proxy.post("/v1/chat/completions", data=body)).status == 200
    families: dict[str, set[str]] = {}
    sampled: set[str] = set()
    for client in (proxy, raw):
        text = await (await client.get("/metrics")).text()
        for family in text_string_to_metric_families(text):
            names = {
                "counter": [f"{family.name}_total"],
                "histogram": [f"{family.name}_{s}" for s in ("bucket", "sum", "count")],
            }.get(family.type, [family.name])
            for name in names:
                families.setdefault(name, set())
            for sample in family.samples:
                families.setdefault(sample.name, set()).update(sample.labels)
                sampled.add(sample.name)
    return families, sampled


async def test_every_query_names_a_series_chatmend_exports(make_proxy: ProxyFactory) -> None:
    series, sampled = await exported(make_proxy)
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = list(expressions(dashboard))
    assert len(exprs) >= len(REQUIRED)
    used: set[str] = set()
    for expr in exprs:
        metrics = set(_METRIC.findall(expr))
        assert metrics, f"no chatmend series in {expr!r}"
        for metric in metrics:
            assert metric in series, f"{metric} is not exported (in {expr!r})"
        labels = {name for _, inner in _SELECTOR.findall(expr) for name in _MATCHER.findall(inner)}
        for grouping in _GROUPING.findall(expr):
            labels.update(label.strip() for label in grouping.split(",") if label.strip())
        labels.update(label for _, label in _LABEL_VALUES.findall(expr))
        if metrics <= sampled:
            carried = set().union(*(series[metric] for metric in metrics))
            assert labels <= carried, f"{expr!r}: {labels - carried} not on {sorted(metrics)}"
        used |= metrics
    for what, metric in REQUIRED.items():
        assert metric in used, f"no panel shows {what} ({metric})"
        assert metric in sampled, f"the traffic above produced no {metric} sample"


def test_the_dashboard_is_importable_json() -> None:
    dashboard = orjson.loads(DASHBOARD.read_bytes())
    assert dashboard["uid"] == "chatmend"
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    assert all(
        panel["targets"] and panel["datasource"]["uid"] == "${datasource}" for panel in panels
    )
    refs = [target["refId"] for panel in panels for target in panel["targets"]]
    assert all(refs)
    names = [variable["name"] for variable in dashboard["templating"]["list"]]
    assert names == ["datasource", "route"]
