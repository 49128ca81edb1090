"""What ships: the container image holds every package the node imports, and local nodes start
from the checkout's root."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_image_holds_every_package_the_node_imports() -> None:
    """The Dockerfile copies package folders one by one: a package the node imports and the image
    lacks makes every container exit at start."""
    copied = {line.split()[1] for line in (ROOT / "compose" / "Dockerfile").read_text().splitlines()
              if line.startswith("COPY ")}
    assert {"coordinator", "coordinator_common", "transactions", "replication", "cluster"} <= copied, copied


def test_local_nodes_run_from_the_checkouts_root() -> None:
    from cluster.tools.local_cluster import REPO_ROOT

    assert (REPO_ROOT / "cluster" / "cli.py").is_file() and (REPO_ROOT / "pyproject.toml").is_file()
