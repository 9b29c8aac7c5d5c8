"""The deployment files (Dockerfile, deploy/) use real flags, ports, probe paths and config keys.

No container engine or cluster runs here: the files are parsed, and every ``chatmend`` command
line in them goes through the real CLI parser and every config through the real config loader.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import tomllib
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from proxy.cli import build_parser
from proxy.config import ENV_CONFIG, Config, load_config, parse_config

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
PORT = 8787
CONFIG_DIR = "/etc/chatmend"
CONFIG_PATH = f"{CONFIG_DIR}/config.yaml"
MANIFESTS = ("sidecar.yaml", "gateway.yaml")


# --- Dockerfile ----------------------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        word, _, rest = (pending + line).partition(" ")
        instructions.append((word.upper(), rest.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def instruction(name: str) -> list[str]:
    return [args for word, args in dockerfile() if word == name]


def exec_form(name: str) -> list[str]:
    """The last ``name`` instruction, which must be in exec (JSON array) form."""
    found = instruction(name)
    assert found, f"no {name} in the Dockerfile"
    value = json.loads(found[-1])
    assert isinstance(value, list)
    assert all(isinstance(item, str) for item in value)
    return value


def parse_chatmend(argv: list[str]) -> Namespace:
    """``chatmend`` arguments through the real parser (argparse exits on an unknown flag)."""
    try:
        return build_parser().parse_args(argv)
    except SystemExit:  # pragma: no cover - the failure message is argparse's, on stderr
        pytest.fail(f"chatmend rejects these arguments: {argv}")


def test_dockerfile_base_is_slim_python_311() -> None:
    assert instruction("FROM")[0].startswith("python:3.11-slim")


def test_dockerfile_command_is_a_real_chatmend_command_line() -> None:
    assert exec_form("ENTRYPOINT") == ["chatmend"]
    args = parse_chatmend(exec_form("CMD"))
    assert args.command == "serve"
    assert args.host == "0.0.0.0"
    assert args.port == PORT


def test_dockerfile_runs_as_a_non_root_user() -> None:
    users = instruction("USER")
    assert users, "no USER: the image would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    # Numeric, so Kubernetes' runAsNonRoot can check it without a runAsUser.
    assert user.isdigit()


def test_dockerfile_exposes_the_port_and_checks_health() -> None:
    assert str(PORT) in " ".join(instruction("EXPOSE")).split()
    (healthcheck,) = instruction("HEALTHCHECK")
    assert f"http://127.0.0.1:{PORT}/healthz" in healthcheck
    assert "curl" not in healthcheck and "wget" not in healthcheck  # neither is in slim


def test_dockerfile_reads_the_documented_config_path() -> None:
    env: dict[str, str] = {}
    for args in instruction("ENV"):
        for item in shlex.split(args):
            key, _, value = item.partition("=")
            env[key] = value
    assert env[ENV_CONFIG] == CONFIG_PATH
    # The image ships that file (empty: the embedded defaults), so it starts unmounted too.
    assert any(CONFIG_PATH in args for args in instruction("RUN"))


def test_the_empty_shipped_config_is_the_embedded_defaults(tmp_path: Path) -> None:
    shipped = tmp_path / "config.yaml"
    shipped.write_text("# Mount your chatmend config over this file.\n", encoding="utf-8")
    assert load_config(shipped, env={}) == Config()
    # and CHATMEND_UPSTREAM still fills the upstream, as the YAML leaves it unset.
    env = {"CHATMEND_UPSTREAM": "https://api.moonshot.ai"}
    assert load_config(shipped, env=env).default.upstream.url == "https://api.moonshot.ai"


#: The lock the image installs from, as `make run` and `make test` do (README.md#set-up).
LOCK = "requirements.lock"


def dockerignored() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_dockerfile_copies_the_package_and_dockerignore_keeps_it() -> None:
    sources = {source for args in instruction("COPY") for source in shlex.split(args)[:-1]}
    packages = pyproject_packages()
    for top in {name.split(".")[0] for name in packages} | {"pyproject.toml", "README.md", LOCK}:
        assert top in sources, f"the Dockerfile does not COPY {top}"
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not any(fnmatch.fnmatch(source, pattern) for pattern in dockerignored()), source
    (install,) = [run for run in instruction("RUN") if "pip install" in run]
    assert install.startswith(f"PIP_CONSTRAINT=/src/{LOCK} pip install /src")


def pyproject_packages() -> set[str]:
    """The packages ``pip install .`` installs, as pyproject.toml's setuptools table lists them."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        return set(tomllib.load(file)["tool"]["setuptools"]["packages"])


def package_dirs() -> set[str]:
    """Every importable package under proxy/ and rules/, dotted."""
    return {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("proxy", "rules")
        for init in (ROOT / top).rglob("__init__.py")
    }


def test_a_non_editable_install_carries_every_subpackage() -> None:
    assert package_dirs() == pyproject_packages()


# --- deploy/compose.yaml -------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_compose_builds_chatmend_and_mounts_the_config_read_only() -> None:
    service = compose()["services"]["chatmend"]
    context = (DEPLOY / service["build"]["context"]).resolve()
    assert (context / service["build"].get("dockerfile", "Dockerfile")).is_file()
    source, target, mode = service["volumes"][0].split(":")
    assert (target, mode) == (CONFIG_PATH, "ro")
    config = yaml.safe_load((DEPLOY / source).read_text(encoding="utf-8"))
    parse_config(config)
    # No `command`: the image's CMD serves on 0.0.0.0:8787, published on 8787.
    assert "command" not in service and "entrypoint" not in service
    assert all(port.rsplit(":", 1)[-1] == str(PORT) for port in service["ports"])


def test_compose_agent_calls_chatmend_by_service_name_once_healthy() -> None:
    services = compose()["services"]
    agent = services["agent"]
    url = urlsplit(agent["environment"]["OPENAI_BASE_URL"])
    assert (url.scheme, url.hostname, url.port, url.path) == ("http", "chatmend", PORT, "/v1")
    assert url.hostname in services
    assert agent["depends_on"]["chatmend"]["condition"] == "service_healthy"


# --- deploy/kubernetes/ --------------------------------------------------------------------------


def manifest(name: str) -> list[dict[str, Any]]:
    text = (KUBERNETES / name).read_text(encoding="utf-8")
    docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    assert all(isinstance(doc, dict) for doc in docs)
    return docs


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def chatmend_containers(name: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod spec, container) for every chatmend container of every Deployment in the file."""
    for deployment in of_kind(manifest(name), "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        for container in pod["containers"]:
            if container["image"].split("/")[-1].startswith("chatmend"):
                yield pod, container


def serve_args(container: dict[str, Any]) -> Namespace:
    assert "command" not in container, "the image's ENTRYPOINT is chatmend: set args only"
    args = parse_chatmend([str(arg) for arg in container["args"]])
    assert args.command == "serve"
    return args


@pytest.mark.parametrize("name", MANIFESTS)
def test_kubernetes_chatmend_args_parse_and_load_the_mounted_config_map(
    name: str, tmp_path: Path
) -> None:
    docs = manifest(name)
    config_maps = {doc["metadata"]["name"]: doc for doc in of_kind(docs, "ConfigMap")}
    containers = list(chatmend_containers(name))
    assert containers
    for pod, container in containers:
        args = serve_args(container)
        assert args.port == PORT
        assert args.config == CONFIG_PATH
        (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == CONFIG_DIR]
        assert mount.get("readOnly") is True
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        text = config_maps[volume["configMap"]["name"]]["data"]["config.yaml"]
        parse_config(yaml.safe_load(text))
        # As `chatmend serve` loads it: the file, then the flags over it.
        path = tmp_path / "config.yaml"
        path.write_text(text, encoding="utf-8")
        config = load_config(path, env={}, upstream=args.upstream, host=args.host, port=args.port)
        assert config.listen.port == PORT
        assert config.default.upstream.url.startswith("https://")


def probe_target(probe: dict[str, Any], host: str) -> tuple[str, int]:
    """(path, port) a probe checks: an httpGet, or an exec that fetches a loopback URL."""
    if "httpGet" in probe:
        return probe["httpGet"]["path"], int(probe["httpGet"]["port"])
    assert host == "127.0.0.1", "an exec probe is only needed for a loopback listener"
    (found,) = re.findall(r"http://[^\s'\")]+", " ".join(probe["exec"]["command"]))
    url = urlsplit(found)
    assert url.hostname == "127.0.0.1"
    assert url.port is not None
    return url.path, url.port


@pytest.mark.parametrize("name", MANIFESTS)
def test_kubernetes_probes_ports_resources_and_non_root(name: str) -> None:
    for pod, container in chatmend_containers(name):
        host = serve_args(container).host
        assert probe_target(container["livenessProbe"], host) == ("/healthz", PORT)
        assert probe_target(container["readinessProbe"], host) == ("/readyz", PORT)
        assert [p["containerPort"] for p in container["ports"]] == [PORT]
        assert set(container["resources"]) == {"requests", "limits"}
        assert {"cpu", "memory"} <= set(container["resources"]["requests"])
        assert {"cpu", "memory"} <= set(container["resources"]["limits"])
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_sidecar_shares_the_pod_and_its_loopback_with_the_agent() -> None:
    ((pod, container),) = chatmend_containers("sidecar.yaml")
    assert serve_args(container).host == "127.0.0.1"
    agents = [c for c in pod["containers"] if c is not container]
    assert agents
    for agent in agents:
        env = {e["name"]: e.get("value") for e in agent.get("env", [])}
        assert env["OPENAI_BASE_URL"] == f"http://127.0.0.1:{PORT}/v1"


def test_gateway_deployment_service_and_autoscaler_fit_together() -> None:
    docs = manifest("gateway.yaml")
    (deployment,) = of_kind(docs, "Deployment")
    (service,) = of_kind(docs, "Service")
    (hpa,) = of_kind(docs, "HorizontalPodAutoscaler")
    assert deployment["spec"]["replicas"] == 2
    ((_, container),) = chatmend_containers("gateway.yaml")
    assert serve_args(container).host == "0.0.0.0"

    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(PORT, PORT)]

    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert hpa["spec"]["minReplicas"] >= 2
    assert hpa["spec"]["maxReplicas"] > hpa["spec"]["minReplicas"]
    (metric,) = hpa["spec"]["metrics"]
    assert (metric["type"], metric["resource"]["name"]) == ("Resource", "cpu")
