"""Cluster metadata persisted in the data dir: cluster id, topics, ``n``, producer ids.

Stored as ``<data_dir>/cluster.json`` and replaced atomically (write tmp, fsync, rename)
on every change. On one node this is the source of truth; a multi-node cluster will
replicate the same document through a metadata log.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from replication.durable import write_durably

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_TOPIC})
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
PRODUCER_ID_BLOCK = 1000

# Kafka topic-level configs we accept in CreateTopics; numeric ones are validated.
NUMERIC_TOPIC_CONFIGS = {
    "retention.ms": -1, "retention.bytes": -1, "segment.bytes": 1 << 20, "segment.ms": 1,
    "max.message.bytes": 0, "min.insync.replicas": 1, "segment.index.bytes": 4,
    "index.interval.bytes": 0, "flush.messages": 1, "flush.ms": 0, "delete.retention.ms": 0,
    "file.delete.delay.ms": 0, "min.compaction.lag.ms": 0, "max.compaction.lag.ms": 1,
    "segment.jitter.ms": 0, "local.retention.ms": -2, "local.retention.bytes": -2,
    "message.timestamp.difference.max.ms": 0, "message.timestamp.before.max.ms": 0,
    "message.timestamp.after.max.ms": 0, "min.cleanable.dirty.ratio": 0,
    "max.decompressed.message.bytes": 0, "remote.copy.lag.bytes": -1, "remote.copy.lag.ms": 0,
}
OTHER_TOPIC_CONFIGS = {
    "cleanup.policy": {"delete", "compact", "compact,delete", "delete,compact"},
    "compression.type": {"producer", "none", "gzip", "snappy", "lz4", "zstd", "uncompressed"},
    "message.timestamp.type": {"CreateTime", "LogAppendTime"},
    "unclean.leader.election.enable": {"true", "false"},
    "preallocate": {"true", "false"},
    "message.downconversion.enable": {"true", "false"},
    "remote.storage.enable": {"false"},
    "remote.log.copy.disable": {"true", "false"},
    "remote.log.delete.on.disable": {"true", "false"},
    "errors.deadletterqueue.group.enable": {"true", "false"},
    "follower.replication.throttled.replicas": None,
    "leader.replication.throttled.replicas": None,
    "message.format.version": None,
    "compression.gzip.level": None, "compression.lz4.level": None, "compression.zstd.level": None,
}


def validate_topic_name(name: str | None) -> str | None:
    """Kafka's ``Topic.validate``: returns an error message, or ``None`` if valid."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, topic name: {name}"
    if not _LEGAL.match(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, "
                "'.', '_' and '-'")
    return None


MAX_CONFIG_VALUE = 32 * 1024  # a value travels in a metadata record every node folds


def validate_topic_config(name: str, value: str | None, *, message_max_bytes: int) -> str | None:
    """An error message, or ``None`` if valid (``message_max_bytes``: the node's message.max.bytes)."""
    if value is not None and len(value) > MAX_CONFIG_VALUE:
        # A deliberate difference: Kafka takes any length; here it would go to every node's metadata.
        return f"Invalid value for configuration {name}: longer than {MAX_CONFIG_VALUE} characters"
    if name in NUMERIC_TOPIC_CONFIGS:
        try:
            v = float(value or "") if name == "min.cleanable.dirty.ratio" else int(value or "")
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type " \
                   f"{'DOUBLE' if '.' in str(value) else 'LONG'}"
        if v < NUMERIC_TOPIC_CONFIGS[name]:
            return f"Invalid value {value} for configuration {name}: Value must be at least {NUMERIC_TOPIC_CONFIGS[name]}"
        if name == "max.message.bytes" and v > message_max_bytes:
            # A deliberate difference: Kafka takes any value, and a batch is read (its gzip records
            # inflated up to 16 x this) before it is stored, so the node's own bound holds here too.
            return (f"Invalid value {value} for configuration {name}: Value must be at most the broker's "
                    f"message.max.bytes ({message_max_bytes})")
        return None
    if name in OTHER_TOPIC_CONFIGS:
        allowed = OTHER_TOPIC_CONFIGS[name]
        if allowed is not None and value not in allowed:
            return f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(sorted(allowed))}"
        return None
    return f"Unknown topic config name: {name}"


METADATA_FILE_FORMAT = 1  # of a single node's cluster.json (none: 0, the same fields); a later one is refused


class MetadataFileError(ValueError):
    """A single node's cluster.json this build cannot read."""


class PartitionLimitError(Exception):
    """A topic creation refused where it is applied: it would pass ``max_partitions``."""


def partition_limit_message(total: int, adding: int, max_partitions: int) -> str | None:
    """Why ``adding`` partitions may not join the ``total`` there are (None: they may). The
    request-time check and the one where a creation is applied give the same answer."""
    if total + adding > max_partitions:
        return f"The cluster has {total} partitions; {adding} more would pass max_partitions={max_partitions}"
    return None


@dataclass(slots=True)
class TopicMeta:
    name: str
    partitions: int
    topic_id: uuid.UUID
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    def to_obj(self) -> dict[str, Any]:
        return {"partitions": self.partitions, "topic_id": str(self.topic_id), "configs": self.configs,
                "internal": self.internal}


# One ACL as stored and replicated: (resource type, name, pattern type, principal, host, operation,
# permission), Kafka's codes (cluster/security/authorizer.py gives them meaning).
AclRow = tuple[int, str, int, str, str, int, int]


def acl_row(fields: Any) -> AclRow:
    t, name, pattern, principal, host, op, perm = fields
    return int(t), str(name), int(pattern), str(principal), str(host), int(op), int(perm)


# One SCRAM credential as stored and replicated (Kafka's UserScramCredentialRecord): (user, mechanism
# code, salt, stored key, server key as hex, iterations). Iterations 0 marks one deleted, which also
# hides the credential the configuration's sasl_users would give (the bootstrap users).
ScramRow = tuple[str, int, str, str, str, int]


def scram_row(fields: Any) -> ScramRow:
    name, mechanism, salt, stored, server, iterations = fields
    return str(name), int(mechanism), str(salt), str(stored), str(server), int(iterations)


def with_scram(current: frozenset[ScramRow], change: list[ScramRow]) -> frozenset[ScramRow]:
    """``current`` with each row of ``change`` replacing the one of its (user, mechanism)."""
    rows = {(r[0], r[1]): r for r in current}
    rows.update({(r[0], r[1]): r for r in change})
    return frozenset(rows.values())


def _with(layers: dict[str, dict[str, str]], name: str, configs: dict[str, str]) -> dict[str, dict[str, str]]:
    """``layers`` with ``name``'s configs replaced (none: forgotten), as a new dict (readers keep theirs)."""
    changed = dict(layers)
    if configs:
        changed[name] = dict(configs)
    else:
        changed.pop(name, None)
    return changed


class ClusterMetadata:
    def __init__(self, data_dir: str, *, offsets_partitions: int, txn_partitions: int = 8) -> None:
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, "cluster.json")
        os.makedirs(data_dir, exist_ok=True)
        self.topics: dict[str, TopicMeta] = {}
        self.acls: frozenset[AclRow] = frozenset()  # replaced whole on every change (readers keep a snapshot)
        self.scram: frozenset[ScramRow] = frozenset()  # likewise
        # each group's own configs (group -> key -> value); replaced whole on every change too
        self.group_configs: dict[str, dict[str, str]] = {}
        # the nodes' dynamic settings ("": the cluster's; a node id: that node's), likewise
        self.broker_configs: dict[str, dict[str, str]] = {}
        self.next_producer_id_block = 0
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as fh:
                doc = json.load(fh)
            fmt = doc.get("format", 0)
            if not isinstance(fmt, int) or fmt > METADATA_FILE_FORMAT:
                raise MetadataFileError(f"{self.path} is of format {fmt!r}; this build reads up to "
                                        f"{METADATA_FILE_FORMAT}: written by a newer release (downgrades are not "
                                        "supported)")
            self.cluster_id: str = doc["cluster_id"]
            # ``n`` is fixed at first start: changing it would move every group.
            self.offsets_partitions: int = int(doc["offsets_partitions"])
            self.next_producer_id_block = int(doc.get("next_producer_id_block", 0))
            # fixed at first start too (a node from before transactions takes the setting's value)
            self.txn_partitions: int = int(doc.get("transaction_partitions", txn_partitions))
            self.acls = frozenset(acl_row(x) for x in doc.get("acls", ()))  # before any save() below
            self.scram = frozenset(scram_row(x) for x in doc.get("scram", ()))
            self.group_configs = {str(g): {str(k): str(v) for k, v in c.items()}
                                  for g, c in doc.get("group_configs", {}).items()}
            self.broker_configs = {str(b): {str(k): str(v) for k, v in c.items()}
                                   for b, c in doc.get("broker_configs", {}).items()}
            if "transaction_partitions" not in doc:
                self.save()
            for name, t in doc.get("topics", {}).items():
                self.topics[name] = TopicMeta(name, int(t["partitions"]), uuid.UUID(t["topic_id"]),
                                              dict(t.get("configs", {})), bool(t.get("internal", False)))
        else:
            self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            self.offsets_partitions = offsets_partitions
            self.txn_partitions = txn_partitions
            self.save()
        self._by_id = {t.topic_id: t for t in self.topics.values()}
        self._image: dict[str, tuple[str, int]] | None = None

    def topic_image(self) -> dict[str, tuple[str, int]]:
        """Every client topic as consumer groups see them: name -> (topic id as hex, partition
        count). Built once per change of the topics; callers must not modify it."""
        if self._image is None:
            self._image = {name: (t.topic_id.hex, t.partitions) for name, t in self.topics.items() if not t.internal}
        return self._image

    def save(self) -> None:
        doc = {
            "format": METADATA_FILE_FORMAT,
            "cluster_id": self.cluster_id,
            "offsets_partitions": self.offsets_partitions,
            "transaction_partitions": self.txn_partitions,
            "next_producer_id_block": self.next_producer_id_block,
            "topics": {name: t.to_obj() for name, t in sorted(self.topics.items())},
            "acls": [list(x) for x in sorted(self.acls)],
            "scram": [list(x) for x in sorted(self.scram)],
            "group_configs": self.group_configs,
            "broker_configs": self.broker_configs,
        }
        write_durably(self.path, json.dumps(doc, indent=1).encode(), mode=0o600)  # it holds SCRAM keys

    def add_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> TopicMeta:
        t = TopicMeta(name, partitions, uuid.uuid4(), dict(configs or {}))
        self.topics[name] = t
        self._by_id[t.topic_id] = t
        self._image = None
        self.save()
        return t

    def update_topic(self, name: str, **changes: Any) -> TopicMeta:
        """Single node: a topic grown (``partitions``) or given new overrides (``configs``), kept on disk."""
        t = self.topics[name] = dataclasses.replace(self.topics[name], **changes)
        self._by_id[t.topic_id] = t
        self._image = None
        self.save()
        return t

    def remove_topic(self, name: str) -> TopicMeta | None:
        t = self.topics.pop(name, None)
        if t is not None:
            self._by_id.pop(t.topic_id, None)
            self._image = None
            self.save()
        return t

    def replace_topics(self, topics: dict[str, TopicMeta]) -> None:
        """Cluster mode: the replicated metadata log is the source of truth for topics."""
        self.topics = dict(topics)
        self._by_id = {t.topic_id: t for t in self.topics.values()}
        self._image = None

    def alter_acls(self, create: list[AclRow], delete: list[AclRow]) -> None:
        """Single node: remove ``delete``, then add ``create``, at once, and keep it on disk."""
        self.acls = frozenset((self.acls - set(delete)) | set(create))
        self.save()

    def alter_scram(self, change: list[ScramRow]) -> None:
        """Single node: upsert / delete SCRAM credentials at once, and keep them on disk."""
        self.scram = with_scram(self.scram, change)
        self.save()

    def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        """Single node: a group's own configs (none: forgotten), kept on disk."""
        self.group_configs = _with(self.group_configs, group, configs)
        self.save()

    def set_broker_configs(self, broker: str, configs: dict[str, str]) -> None:
        """Single node: its own ("0") or the cluster's ("") dynamic settings, kept on disk."""
        self.broker_configs = _with(self.broker_configs, broker, configs)
        self.save()

    def by_id(self, topic_id: uuid.UUID) -> TopicMeta | None:
        return self._by_id.get(topic_id)

    def allocate_producer_id_block(self) -> int:
        """Reserve the next block of producer ids; returns its first id."""
        start = self.next_producer_id_block
        self.next_producer_id_block = start + PRODUCER_ID_BLOCK
        self.save()
        return start
