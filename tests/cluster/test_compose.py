"""compose/: ``docker-compose config`` accepts the file and every node's environment is a valid config.

Only ``config`` runs (no Docker engine). Skipped when docker-compose is not installed (``make setup``
installs it on Debian as root).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cluster.config import _FIELDS, load_config, parse_peers

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose" / "docker-compose.yml"
SECRET = "test-secret-9b3e0c7a51d4f28e6a0b1c93d7e5f402"

pytestmark = pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")


def compose(*args: str, secret: str | None = SECRET) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KCOORD_CLUSTER_SECRET"}
    if secret is not None:
        env["KCOORD_CLUSTER_SECRET"] = secret
    return subprocess.run(["docker-compose", "-f", str(COMPOSE), *args], capture_output=True, text=True,
                          env=env, timeout=120, cwd=ROOT)


def config_as_dict(text: str) -> dict[str, Any]:
    """Parse the YAML docker-compose printed with the interpreter docker-compose itself runs on (it has PyYAML)."""
    script = shutil.which("docker-compose")
    assert script is not None
    first = Path(script).read_text(errors="replace").splitlines()[0]
    python = first[2:].strip().split()[0] if first.startswith("#!") else "python3"
    out = subprocess.run([python, "-c", "import json,sys,yaml; print(json.dumps(yaml.safe_load(sys.stdin)))"],
                         input=text, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _port(p: Any) -> tuple[str, int, int]:
    """(host ip, published, target) from either syntax docker-compose may print."""
    if isinstance(p, dict):
        return str(p.get("host_ip")), int(p["published"]), int(p["target"])
    text = str(p).split("/")[0]  # "127.0.0.1:9092:29092/tcp"
    ip, published, target = text.rsplit(":", 2) if text.count(":") == 2 else ("", *text.split(":"))
    return ip, int(published), int(target)


def test_compose_config_is_valid_and_every_node_env_is_a_valid_node_config() -> None:
    res = compose("--profile", "demo", "config")
    assert res.returncode == 0, res.stderr
    doc = config_as_dict(res.stdout)
    services = doc["services"]
    assert {"kcoord-0", "kcoord-1", "kcoord-2", "demo-consumer"} <= set(services)
    assert services["demo-consumer"]["profiles"] == ["demo"]

    peers_seen = set()
    for i in range(3):
        svc = services[f"kcoord-{i}"]
        assert svc["build"]["dockerfile"] == "compose/Dockerfile"
        env = {k: str(v) for k, v in svc["environment"].items()}
        # Every KCOORD_* variable names a real setting (a typo would be silently ignored by the node).
        for key in env:
            assert key.startswith("KCOORD_") and key[len("KCOORD_"):].lower() in _FIELDS, key
        cfg = load_config(None, env=env)
        assert cfg.node_id == i
        assert cfg.cluster_secret == SECRET
        assert cfg.metrics_port == 9404
        # Kafka's INTERNAL/EXTERNAL pattern: the compose network and the host each get addresses
        # they can reach, and the host side is published on loopback only
        assert cfg.host == "0.0.0.0" and cfg.advertised == f"kcoord-{i}"
        assert [x.name for x in cfg.listener_list()] == ["INTERNAL", "EXTERNAL"]
        assert cfg.advertised_for("INTERNAL") == (f"kcoord-{i}", 9092)
        assert cfg.advertised_for("EXTERNAL") == ("localhost", 9092 + i)
        published = {_port(p) for p in svc["ports"]}
        assert ("127.0.0.1", 9092 + i, 29092) in published, published
        assert all(ip == "127.0.0.1" for ip, _, _ in published), published
        peers = parse_peers(cfg.peers)
        assert [p.host for p in peers] == ["kcoord-0", "kcoord-1", "kcoord-2"]
        assert peers[i].kafka_port == cfg.port
        peers_seen.add(cfg.peers)
        assert svc.get("hostname", f"kcoord-{i}") == f"kcoord-{i}"
    assert len(peers_seen) == 1  # all nodes agree on the peer list

    res = compose("config", "--services")
    assert res.returncode == 0, res.stderr
    assert set(res.stdout.split()) >= {"kcoord-0", "kcoord-1", "kcoord-2"}


def test_compose_refuses_to_start_without_a_cluster_secret() -> None:
    res = compose("config", secret=None)
    assert res.returncode != 0
    assert "KCOORD_CLUSTER_SECRET" in res.stderr


def test_dockerfile_builds_from_python_slim_and_installs_the_project() -> None:
    text = (ROOT / "compose" / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in text
    assert "pip install ." in text
    assert '["kcoord"]' in text and '["node"]' in text
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignore and "node_modules" in ignore
