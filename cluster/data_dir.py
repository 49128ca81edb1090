"""Who owns a data directory: a lock for the process using it and a record of its identity.

Two processes on one ``data_dir`` would interleave their journal writes; a node started on
another node's directory (a wrong ``--node-id`` or a swapped volume) would join the Raft groups
under a name whose log it does not have. Both are refused at start-up with one clear message:

- ``<data_dir>/.lock``: ``flock``-ed for the life of the process (the kernel drops it when the
  process dies, however it dies); it holds the owner's pid for the message.
- ``<data_dir>/node.identity``: the node id, a fingerprint of the cluster secret (which
  cluster this directory's logs belong to, known before the cluster forms) and, once the
  cluster has formed, its cluster id. Written at the first start, checked at every later one.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
from typing import Any

from replication.durable import replace_durably, sync

LOCK_FILE = ".lock"
IDENTITY_FILE = "node.identity"


class DataDirError(RuntimeError):
    """This process must not use the directory (the message says why)."""


def lock(data_dir: str) -> int:
    """Take the directory's lock (held until the returned descriptor is closed or the process ends)."""
    path = os.path.join(data_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise DataDirError(f"data_dir {data_dir} is in use by another kcoord process (pid {owner}); "
                           "one node per directory") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def secret_fingerprint(secret: str) -> str:
    """Names the cluster a directory belongs to without storing its secret."""
    if not secret:
        return ""
    return hmac.new(secret.encode(), b"kcoord data_dir identity", hashlib.sha256).hexdigest()[:16]


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise DataDirError(f"{path} cannot be read ({e}); it says which node this directory belongs to") from None
    if not isinstance(doc, dict):
        raise DataDirError(f"{path} is not a kcoord identity file")
    return doc


def _write(path: str, doc: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
        fh.flush()
        sync(fh.fileno())
    replace_durably(tmp, path)


def check_identity(data_dir: str, node_id: int, secret: str) -> None:
    """Refuse a directory written by another node id or for another cluster; record ours if new."""
    path = os.path.join(data_dir, IDENTITY_FILE)
    doc = _read(path)
    fingerprint = secret_fingerprint(secret)
    if doc is None:
        _write(path, {"node_id": node_id, "cluster_secret_fingerprint": fingerprint, "cluster_id": None})
        return
    if doc.get("node_id") != node_id:
        raise DataDirError(f"data_dir {data_dir} belongs to node {doc.get('node_id')}, not node {node_id}")
    if doc.get("cluster_secret_fingerprint", "") != fingerprint:
        raise DataDirError(f"data_dir {data_dir} belongs to another cluster (its cluster secret differs)")


def record_cluster_id(data_dir: str, cluster_id: str) -> None:
    """Once the cluster has formed: remember its id, or refuse a directory of another cluster."""
    path = os.path.join(data_dir, IDENTITY_FILE)
    doc = _read(path) or {}
    known = doc.get("cluster_id")
    if known is None:
        _write(path, {**doc, "cluster_id": cluster_id})
    elif known != cluster_id:
        raise DataDirError(f"data_dir {data_dir} belongs to cluster {known}, not to cluster {cluster_id}")
