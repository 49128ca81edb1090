"""Who owns a data directory: a lock for the process using it and a record of its identity.

Two processes on one ``data_dir`` would interleave their journal writes; a node started on
another node's directory (a wrong ``--node-id`` or a swapped volume) would join the Raft groups
under a name whose log it does not have. Both are refused at start-up with one clear message:

- ``<data_dir>/.lock``: ``flock``-ed for the life of the process (the kernel drops it when the
  process dies, however it dies); it holds the owner's pid for the message.
- ``<data_dir>/node.identity``: the node id, a check of the cluster secret (which cluster this
  directory's logs belong to, known before the cluster forms) and, once the cluster has formed,
  its cluster id. Written at the first start, checked at every later one. It also holds the
  directory's random **directory id**: the identity of this replica of the node. A replaced or
  wiped disk gets a new one, and joins the Raft groups as a learner until the cluster records it
  as the node's voter (``replication/raft/voters.py``); ``voter`` is set once it was, so a
  directory that was a voter and has since been replaced (an old disk put back) is refused.

The check is scrypt of the secret with a random salt, costly in time and memory by design: the
file must not let whoever reads it test guesses of the secret cheaply offline (the secret
authenticates the Raft port). Files of earlier versions hold a 64-bit HMAC of it instead, which
costs a guesser nothing: it is checked once, then replaced.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import hmac
import json
import logging
import os
import secrets
import uuid
from typing import Any

from replication.durable import write_durably

log = logging.getLogger("kcoord.cluster")

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


# scrypt's cost: about 0.1 s and 32 MiB per try on one core (n = 2**15, r = 8)
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
_SCRYPT_MAXMEM = 256 * 1024 * 1024  # bounds what a check written with other parameters may cost


def _scrypt(secret: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(secret.encode(), salt=salt, n=n, r=r, p=p, maxmem=_SCRYPT_MAXMEM, dklen=32)


def secret_check(secret: str) -> dict[str, Any] | None:
    """What the identity file keeps to recognise the cluster's secret (None: no secret)."""
    if not secret:
        return None
    salt = secrets.token_bytes(16)
    digest = _scrypt(secret, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return {"kdf": "scrypt", "n": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P, "salt": salt.hex(), "digest": digest.hex()}


def _matches(check: Any, secret: str, path: str) -> bool:
    if check is None:
        return not secret
    if not secret:
        return False
    try:
        n, r, p = (int(check[k]) for k in ("n", "r", "p"))
        salt, digest = bytes.fromhex(check["salt"]), bytes.fromhex(check["digest"])
        if check["kdf"] != "scrypt" or not (2 <= n <= 2**20 and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16):
            raise ValueError("unknown kind of check")
        return hmac.compare_digest(_scrypt(secret, salt, n, r, p), digest)
    except (KeyError, TypeError, ValueError, MemoryError) as e:
        raise DataDirError(f"{path}: its cluster secret check cannot be read ({e})") from None


def _old_fingerprint(secret: str) -> str:
    """The earlier versions' record of the secret (a fast 64-bit HMAC), checked once and replaced."""
    if not secret:
        return ""
    return hmac.new(secret.encode(), b"kcoord data_dir identity", hashlib.sha256).hexdigest()[:16]


IDENTITY_FORMAT = 1  # of node.identity (none: 0, the same fields); a later one is refused


def _read(path: str) -> dict[str, Any] | None:
    return read_record(path, "it says which node this directory belongs to", IDENTITY_FORMAT)


def read_record(path: str, why: str, newest: int) -> dict[str, Any] | None:
    """A JSON record of the data directory (None if there is none); one that cannot be read, or
    is of a format newer than ``newest``, is a DataDirError (``why``: what it holds)."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise DataDirError(f"{path} cannot be read ({e}); {why}") from None
    if not isinstance(doc, dict):
        raise DataDirError(f"{path} is not a kcoord record; {why}")
    fmt = doc.get("format", 0)
    if not isinstance(fmt, int) or fmt > newest:
        raise DataDirError(f"{path} is of format {fmt!r}; this build reads up to {newest}: written by a "
                           "newer release (downgrades are not supported)")
    return doc


def _write(path: str, doc: dict[str, Any]) -> None:
    write_durably(path, json.dumps({**doc, "format": IDENTITY_FORMAT}).encode())


def check_identity(data_dir: str, node_id: int, secret: str) -> None:
    """Refuse a directory written by another node id or for another cluster; record ours if new."""
    path = os.path.join(data_dir, IDENTITY_FILE)
    doc = _read(path)
    if doc is None:
        _write(path, {"node_id": node_id, "cluster_secret_check": secret_check(secret), "cluster_id": None,
                      "directory_id": uuid.uuid4().hex, "voter": False})
        return
    if doc.get("node_id") != node_id:
        raise DataDirError(f"data_dir {data_dir} belongs to node {doc.get('node_id')}, not node {node_id}")
    old = doc.get("cluster_secret_fingerprint")
    if "cluster_secret_check" in doc or old is None:
        if not _matches(doc.get("cluster_secret_check"), secret, path):
            raise DataDirError(f"data_dir {data_dir} belongs to another cluster (its cluster secret differs)")
        if not isinstance(doc.get("directory_id"), str):  # written before directory ids: its own from now on
            _write(path, {**doc, "directory_id": uuid.uuid4().hex, "voter": False})
        return
    if not isinstance(old, str) or not hmac.compare_digest(old, _old_fingerprint(secret)):
        raise DataDirError(f"data_dir {data_dir} belongs to another cluster (its cluster secret differs)")
    doc = {k: v for k, v in doc.items() if k != "cluster_secret_fingerprint"}
    _write(path, {"directory_id": uuid.uuid4().hex, "voter": False, **doc, "cluster_secret_check": secret_check(secret)})


def directory_id(data_dir: str) -> str:
    """This directory's id (``check_identity`` wrote it)."""
    doc = _read(os.path.join(data_dir, IDENTITY_FILE)) or {}
    value = doc.get("directory_id")
    if not isinstance(value, str):
        raise DataDirError(f"data_dir {data_dir} has no directory id; the node writes one when it starts")
    return value


def was_voter(data_dir: str) -> bool:
    """Whether the cluster has recorded this directory as its node's voting replica."""
    doc = _read(os.path.join(data_dir, IDENTITY_FILE)) or {}
    return doc.get("voter") is True


def mark_voter(data_dir: str) -> None:
    path = os.path.join(data_dir, IDENTITY_FILE)
    doc = _read(path) or {}
    if doc.get("voter") is not True:
        _write(path, {**doc, "voter": True})


def record_cluster_id(data_dir: str, cluster_id: str) -> None:
    """Once the cluster has formed: remember its id, or refuse a directory of another cluster."""
    path = os.path.join(data_dir, IDENTITY_FILE)
    doc = _read(path) or {}
    known = doc.get("cluster_id")
    if known is None:
        _write(path, {**doc, "cluster_id": cluster_id})
    elif known != cluster_id:
        raise DataDirError(f"data_dir {data_dir} belongs to cluster {known}, not to cluster {cluster_id}")
    if isinstance(doc.get("node_id"), int) and isinstance(doc.get("directory_id"), str):
        _write_meta_properties(data_dir, cluster_id, int(doc["node_id"]), str(doc["directory_id"]))


META_PROPERTIES = "meta.properties"


def _write_meta_properties(data_dir: str, cluster_id: str, node_id: int, directory: str) -> None:
    """Kafka's record of a log directory (version 1), for Kafka's tools: ``kafka-metadata-quorum
    add-controller`` reads the directory id there (the data directory as the ``log.dirs`` of the
    properties it is given). Only kcoord's identity file is read back."""
    kafka_uuid = base64.urlsafe_b64encode(uuid.UUID(hex=directory).bytes).decode().rstrip("=")
    text = f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={kafka_uuid}\n"
    path = os.path.join(data_dir, META_PROPERTIES)
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return
    except OSError:
        pass
    try:
        write_durably(path, text.encode(), 0o600)
    except OSError as e:  # only Kafka's tools read it: say so, go on
        log.warning("event=meta_properties_unwritten path=%s error=%r", path, str(e))
