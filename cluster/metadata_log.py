"""The metadata log's records and their fold: what every node applies, in log order, to know
the cluster (topics, ACLs, SCRAM credentials, listeners, producer-id blocks).

A change is a typed record (``CreateTopic``, ``DeleteTopic``, ``ChangeAcls`` ...), written by
``encode_change`` and read by ``decode_change``; the log's compaction writes one ``state``
record. Every record carries ``op`` (its kind) and ``v`` (its version: the lowest that reads it
right, ``WRITES`` or 2 below; records from before versions have none and read as version 0,
their missing fields as the defaults their records had then). A record of a later version than
this build knows cannot be applied as it was meant: folding it raises ``MetadataVersionError``,
and the node stops rather than serve from a state it cannot compute. Changes carry an id and are applied at most once (``_admit``).

Nodes are upgraded one at a time, so a cluster runs two releases for a while. Each node
registers the release it runs and the highest record version it reads (``RegisterEndpoints``,
whose added fields an older node ignores), and a change whose record needs a later version than
some node of the cluster reads is refused (``version_refusal``) until that node is upgraded:
an older node never meets a record it would have to stop on. A node that registered nothing runs
a release from before registrations, which reads versions up to 3.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import msgpack

from cluster import broker_configs, group_configs
from cluster.metadata import (
    AclRow,
    ScramRow,
    acl_row,
    partition_limit_message,
    scram_row,
    with_scram,
)
from cluster.security.access import matching
from cluster.security.authorizer import AclFilter, Operation, PatternType, Permission, ResourceType
from cluster.topic_configs import ConfigError, altered

# This build reads records of versions 0 (none) to METADATA_VERSION. It writes version 1, and 2 for
# what a build that reads only 1 would misread: the kinds it lacks (topic configs, partition
# increases) and a state record holding a grown topic (whose later partitions' slots it would
# compute as the first ones').
# Version 3: a node's voting replica (``SetVoter``), and a state record that holds the voters.
# Version 4: nodes added to the cluster (``AddNode``), and a state record that holds them.
# Version 5: nodes removed from the cluster (``RemoveNode``), and a state record that holds them.
# Version 6: nodes added as observers (``AddNode.observer``) and promoted (``PromoteNode``), and a
# state record that holds observers (an older build would promote them at once).
# Version 7: no record of its own. A node that reads it stamps batches with its leader's Raft term
# and keeps leader epochs, so once every node does, clients are told epochs (``EXACT_EPOCHS``).
# Version 8: a group's own configs (``AlterGroupConfigs``), the nodes' dynamic settings
# (``AlterBrokerConfigs``), and a state record that holds them.
# Version 9: no record of its own. A node that reads it serves transaction version 2 (EndTxn v5,
# Produce v12, TxnOffsetCommit v5, partitions added by their leaders), so once every node does,
# ApiVersions finalizes ``transaction.version`` 2 (``TRANSACTION_V2``).
METADATA_VERSION = 9
EXACT_EPOCHS = 7
TRANSACTION_V2 = 9
WRITES = 1
NEW_KINDS = frozenset({"topic_configs", "partitions"})
V3_KINDS = frozenset({"voter"})
V4_KINDS = frozenset({"add_node"})
V5_KINDS = frozenset({"remove_node"})
V6_KINDS = frozenset({"promote_node"})
V8_KINDS = frozenset({"group_configs", "broker_configs"})
UNREGISTERED_READS = 3  # what a node that registered no ``reads`` reads: release 0.1's METADATA_VERSION


class MetadataVersionError(ValueError):
    """A committed metadata record this build cannot read (a later version, or an unknown kind)."""


@dataclass(frozen=True, slots=True)
class InitCluster:
    cluster_id: str
    n: int  # __consumer_offsets partitions
    nodes: list[int] | None = None  # the nodes it is formed with (None: records from before it)


@dataclass(frozen=True, slots=True)
class CreateTopic:
    name: str
    partitions: int
    topic_id: str
    configs: dict[str, str] = field(default_factory=dict)
    max_partitions: int | None = None  # the bound its requester had (None: records from before it)


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    name: str
    topic_id: str | None = None  # the topic its requester saw (None: records from before it)


@dataclass(frozen=True, slots=True)
class ChangeAcls:
    """CreateAcls / DeleteAcls: rows removed, rows added, filters matched at apply time."""

    create: list[list[Any]] = field(default_factory=list)
    delete: list[list[Any]] = field(default_factory=list)
    filters: list[list[Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ChangeScram:
    rows: list[list[Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RegisterEndpoints:
    """A node's further listeners (Kafka's broker registration), and the release it runs with the
    highest metadata record version it reads (None: a node of a release from before them)."""

    node: int
    listeners: dict[str, list[Any]]
    release: str | None = None
    reads: int | None = None


@dataclass(frozen=True, slots=True)
class AlterTopicConfigs:
    """IncrementalAlterConfigs / AlterConfigs (``replace``) on one topic: the operations, applied
    to the committed overrides where the change is folded (``cluster/topic_configs.py``), so two
    alterations of different keys both take effect; ``max_message_bytes`` is the bound its
    requester had, so every node validates alike."""

    name: str
    topic_id: str
    ops: list[list[Any]] = field(default_factory=list)  # [key, operation, value]
    replace: bool = False
    max_message_bytes: int = 0


@dataclass(frozen=True, slots=True)
class AlterGroupConfigs:
    """IncrementalAlterConfigs / AlterConfigs (``replace``) on a group's own configs: the
    operations, applied to the committed overrides where the change is folded
    (``cluster/group_configs.py``); ``limits`` are the bounds its requester had (key -> [node's
    value, min, max]), so every node validates alike."""

    group: str
    ops: list[list[Any]] = field(default_factory=list)  # [key, operation, value]
    replace: bool = False
    limits: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlterBrokerConfigs:
    """IncrementalAlterConfigs / AlterConfigs (``replace``) on a BROKER resource: the dynamic
    settings of node ``broker`` ("": the cluster's, every node's default), folded by
    ``cluster/broker_configs.py``."""

    broker: str
    ops: list[list[Any]] = field(default_factory=list)  # [key, operation, value]
    replace: bool = False


@dataclass(frozen=True, slots=True)
class CreatePartitions:
    """CreatePartitions: the topic grows to ``count`` partitions; the new ones get Raft slots of
    their own after every slot taken (a topic's first partitions keep theirs)."""

    name: str
    topic_id: str
    count: int
    max_partitions: int = 0  # the bound its requester had, so every node decides alike


@dataclass(frozen=True, slots=True)
class SetVoter:
    """A node's voting replica, by its data directory's id (``replication/raft/voters.py``):
    registered when the node first sees the cluster formed, replaced by a new replica (a new or
    wiped disk) once it has caught up. ``replaces`` is the voter its requester saw (None: none);
    if another change got there first, this one is refused (a compare-and-set), so two replicas
    of one node never both take the vote."""

    node: int
    directory: str
    replaces: str | None = None


@dataclass(frozen=True, slots=True)
class AddNode:
    """A node joins the cluster (``cluster/nodes.py``): from this change on it is one of the
    nodes every Raft group should have as a voter (each group's leader adds it as a learner and
    promotes it once caught up); the topics created from here on start with it."""

    node: int
    host: str
    kafka_port: int
    raft_port: int
    # True: it follows every group as a learner and votes only once promoted (``PromoteNode``,
    # AddRaftVoter), as a Kafka controller without auto-join waits for add-controller
    observer: bool | None = None


@dataclass(frozen=True, slots=True)
class PromoteNode:
    """An observer (``AddNode.observer``) becomes one of the nodes every Raft group has as a voter
    (each group's leader promotes it once it has caught up there). ``directory``: only if that is
    the node's replica (AddRaftVoter's directory id)."""

    node: int
    directory: str | None = None


@dataclass(frozen=True, slots=True)
class RemoveNode:
    """A node leaves the cluster (``cluster/nodes.py``): from this change on every Raft group's
    leader removes it (a group it leads is handed over first), the topics created from here on
    start without it, and its id is never taken again. ``directory``: only if that is the node's
    voting replica (RemoveRaftVoter's directory id; None: whichever)."""

    node: int
    directory: str | None = None


@dataclass(frozen=True, slots=True)
class GrantPidBlock:
    node: int
    request: str


Change = (InitCluster | CreateTopic | DeleteTopic | ChangeAcls | ChangeScram | RegisterEndpoints | GrantPidBlock
          | AlterTopicConfigs | CreatePartitions | SetVoter | AddNode | RemoveNode | PromoteNode | AlterGroupConfigs
          | AlterBrokerConfigs)
KIND_OF: dict[type, str] = {InitCluster: "init", CreateTopic: "create", DeleteTopic: "delete", ChangeAcls: "acls",
                            ChangeScram: "scram", RegisterEndpoints: "endpoints", GrantPidBlock: "pid_block",
                            AlterTopicConfigs: "topic_configs", CreatePartitions: "partitions",
                            SetVoter: "voter", AddNode: "add_node", RemoveNode: "remove_node",
                            PromoteNode: "promote_node", AlterGroupConfigs: "group_configs",
                            AlterBrokerConfigs: "broker_configs"}
CLASS_OF: dict[str, type] = {kind: cls for cls, kind in KIND_OF.items()}
KINDS = frozenset({"state", *CLASS_OF})


def encode_change(change: Change, change_id: str | None = None, seen: int | None = None) -> bytes:
    """A change as its log entry (with the id it is applied once under, and the changes its
    requester had seen)."""
    body = {f.name: getattr(change, f.name) for f in fields(change) if getattr(change, f.name) is not None}
    envelope = {"id": change_id, "seen": seen} if change_id is not None else {}
    kind = KIND_OF[type(change)]
    return metadata_op(op=kind, **envelope, **body, v=record_version(change))


def record_version(change: Change) -> int:
    """The version a change's record is written at: the lowest that reads it right."""
    kind = KIND_OF[type(change)]
    if kind in V8_KINDS:
        return 8
    if kind in V6_KINDS or isinstance(change, AddNode) and change.observer:
        return 6
    return (5 if kind in V5_KINDS else 4 if kind in V4_KINDS else 3 if kind in V3_KINDS
            else 2 if kind in NEW_KINDS else WRITES)


def node_reads(state: dict[str, Any], node: int) -> int:
    """The newest metadata version ``node`` registered that it reads."""
    return int((state.get("reads") or {}).get(node, [None, UNREGISTERED_READS])[1])


def lowest_reads(state: dict[str, Any], nodes: list[int]) -> int:
    """The newest metadata version every one of ``nodes`` reads (of none: this build's)."""
    return min((node_reads(state, n) for n in nodes), default=METADATA_VERSION)


def version_refusal(state: dict[str, Any], nodes: list[int], version: int) -> str | None:
    """Why a record of ``version`` must not be written yet (None: every node reads it): some
    node of the cluster runs a release that would stop on it."""
    behind = {n: reads for n in nodes if (reads := node_reads(state, n)) < version}
    if not behind:
        return None
    registered = state.get("reads") or {}
    listed = ", ".join(f"node {n} reads up to version {r}" + ("" if n in registered else " (it registered none: a "
                                                              "release from before registrations, or starting)")
                       for n, r in sorted(behind.items()))
    return (f"this change needs metadata record version {version}, and {listed}: "
            f"upgrade every node to this release first")


def decode_change(op: dict[str, Any]) -> Change:
    """The typed change of a checked record (``decode_op``) other than a state record."""
    cls = CLASS_OF[op["op"]]
    try:
        return cls(**{f.name: op[f.name] for f in fields(cls) if op.get(f.name) is not None})  # type: ignore[no-any-return]
    except TypeError as e:  # a field missing: not a record this build wrote or reads
        raise MetadataVersionError(f"a malformed {op['op']!r} metadata record: {e}") from e


def decode_op(payload: bytes) -> dict[str, Any]:
    """A metadata record, checked: a known kind at a version this build reads."""
    op = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if not isinstance(op, dict):
        raise MetadataVersionError(f"a metadata record that is not a map: {type(op).__name__}")
    version = op.get("v", 0)
    if not isinstance(version, int) or version > METADATA_VERSION:
        raise MetadataVersionError(f"a metadata record of version {version!r}; this build reads versions up to "
                                   f"{METADATA_VERSION}: upgrade this node")
    if op.get("op") not in KINDS:
        raise MetadataVersionError(f"a metadata record of unknown kind {op.get('op')!r}: upgrade this node")
    return op


def fold_metadata(payloads: list[bytes]) -> dict[str, Any]:
    """The metadata state after applying these operations in order."""
    state: dict[str, Any] = {"cluster_id": None, "n": None, "topics": {}, "next_slot": None,
                             "next_pid_block": PID_BASE, "pid_grants": {}, "endpoints": {}, "refused": {},
                             "seq": 0, "applied": {}, "results": {}, "voters": {}, "voters_version": 0,
                             "retired": [], "reads": {}, "added_nodes": [], "original_nodes": None,
                             "removed_nodes": [], "observers": [], "group_configs": {},
                             "broker_configs": {}}
    acls: set[AclRow] = set()
    scram: frozenset[ScramRow] = frozenset()
    partitions = 0  # of every topic in state["topics"], for the max_partitions bound
    for payload in payloads:
        op = decode_op(payload)
        kind = op["op"]
        change = op.get("id")  # None: an entry from before changes had ids, applied as it always was
        if change is not None and not _admit(state, str(change), int(op["seen"])):
            continue
        result: Any = None  # what the change's requester is told (``RaftCluster._change``)
        if kind == "state":
            state = {k: op[k] for k in ("cluster_id", "n", "topics", "next_slot")}
            state["next_pid_block"] = int(op.get("next_pid_block", PID_BASE))
            state["pid_grants"] = {int(k): list(v) for k, v in (op.get("pid_grants") or {}).items()}
            state["endpoints"] = {int(k): dict(v) for k, v in (op.get("endpoints") or {}).items()}
            state["refused"] = dict(op.get("refused") or {})
            state["seq"] = int(op.get("seq", 0))
            state["applied"] = dict(op.get("applied") or {})
            state["results"] = dict(op.get("results") or {})
            state["voters"] = {int(k): str(v) for k, v in (op.get("voters") or {}).items()}
            state["voters_version"] = int(op.get("voters_version", 0))
            state["retired"] = [str(x) for x in op.get("retired") or ()]
            state["reads"] = {int(k): [v[0], int(v[1])] for k, v in (op.get("reads") or {}).items()}
            state["added_nodes"] = [[int(n), str(h), int(k), int(r)] for n, h, k, r in op.get("added_nodes") or ()]
            original = op.get("original_nodes")
            state["original_nodes"] = None if original is None else [int(x) for x in original]
            state["removed_nodes"] = [int(x) for x in op.get("removed_nodes") or ()]
            state["observers"] = [int(x) for x in op.get("observers") or ()]
            for layered in ("group_configs", "broker_configs"):
                state[layered] = {str(g): {str(k): str(v) for k, v in c.items()}
                                  for g, c in (op.get(layered) or {}).items()}
            partitions = sum(int(t["partitions"]) for t in state["topics"].values())
            acls = {acl_row(x) for x in op.get("acls") or ()}
            scram = frozenset(scram_row(x) for x in op.get("scram") or ())
            continue
        rec = decode_change(op)
        if isinstance(rec, ChangeAcls):
            # CreateAcls / DeleteAcls: the removals, then the additions, as one step (Kafka's
            # AccessControlEntryRecord / RemoveAccessControlEntryRecord batch). DeleteAcls filters
            # match here, the committed set, not the requesting node's copy, which may lag behind.
            matched = [matching(acls, _acl_filter(f)) for f in rec.filters]
            acls -= {acl_row(x) for x in rec.delete}.union(*matched)
            acls |= {acl_row(x) for x in rec.create}
            result = [[list(r) for r in m] for m in matched]
        elif isinstance(rec, ChangeScram):  # AlterUserScramCredentials: each row replaces its (user, mechanism)
            scram = with_scram(scram, [scram_row(x) for x in rec.rows])
        elif isinstance(rec, RegisterEndpoints):
            # A node's further listeners as clients reach them (Kafka's broker registration),
            # so every node can tell a client the addresses on the listener it came in through.
            state["endpoints"][int(rec.node)] = {str(k): list(v) for k, v in dict(rec.listeners).items()}
            if rec.reads is not None:
                state["reads"][int(rec.node)] = [None if rec.release is None else str(rec.release), int(rec.reads)]
            else:  # a node of an older release registering (rolled back): it reads what unregistered ones do
                state["reads"].pop(int(rec.node), None)
        elif isinstance(rec, SetVoter):
            now = state["voters"].get(int(rec.node))
            if now in (rec.replaces, rec.directory):
                if now != rec.directory:
                    state["voters"][int(rec.node)] = str(rec.directory)
                    state["voters_version"] += 1
                    if now is not None:  # a replaced directory: an old copy of it is refused for good
                        state["retired"] = [*state["retired"], now][-RETIRED_KEPT:]
                result = ["none", None]
            else:
                result = ["stale", f"node {rec.node}'s voting replica is now directory {now}"]
        elif isinstance(rec, AddNode):
            result = _add_node(state, rec)
        elif isinstance(rec, RemoveNode):
            result = _remove_node(state, rec)
        elif isinstance(rec, PromoteNode):
            result = _promote_node(state, rec)
        elif isinstance(rec, GrantPidBlock):
            # Producer ids come in blocks granted through this log, so they never repeat: not
            # after a node's disk is replaced, nor across nodes. A retried request is granted once.
            node = int(rec.node)
            if state["pid_grants"].get(node, [None])[0] != rec.request:
                state["pid_grants"][node] = [rec.request, state["next_pid_block"]]
                state["next_pid_block"] += PID_BLOCK
        elif isinstance(rec, InitCluster) and state["cluster_id"] is None:
            state["cluster_id"] = rec.cluster_id
            state["n"] = int(rec.n)
            if rec.nodes is not None:
                state["original_nodes"] = sorted(int(x) for x in rec.nodes)
            state["next_slot"] = 1 + int(rec.n)
        elif isinstance(rec, CreateTopic) and state["n"] is not None and rec.name not in state["topics"]:
            refusal = _partition_limit(partitions, rec)
            if refusal is not None:
                _remember_refusal(state["refused"], rec.topic_id, refusal)
            else:
                state["topics"][rec.name] = {"partitions": int(rec.partitions), "topic_id": rec.topic_id,
                                             "configs": dict(rec.configs), "slot": state["next_slot"]}
                # its groups start with the nodes of the cluster now (nodes.py)
                if state["removed_nodes"] or state["observers"]:  # observers join its groups as learners
                    state["topics"][rec.name]["nodes"] = [n for n in _current_nodes(state) if n not in state["observers"]]
                elif state["added_nodes"]:
                    state["topics"][rec.name]["nodes_at"] = len(state["added_nodes"])
                state["next_slot"] += int(rec.partitions)
                partitions += int(rec.partitions)
        elif isinstance(rec, AlterTopicConfigs):
            result = _alter_topic_configs(state["topics"], rec)
        elif isinstance(rec, AlterGroupConfigs):
            result = _alter_group_configs(state["group_configs"], rec)
        elif isinstance(rec, AlterBrokerConfigs):
            result = _alter_broker_configs(state["broker_configs"], rec)
        elif isinstance(rec, CreatePartitions):
            result = _create_partitions(state, partitions, rec)
            if result[0] == "none":
                partitions += int(rec.count) - int(state["topics"][rec.name]["partitions"])
                state["topics"][rec.name]["partitions"] = int(rec.count)
        elif isinstance(rec, DeleteTopic):
            # The topic id the requester saw: a topic deleted and created again under the name
            # meanwhile is another topic, which this delete leaves alone (records without one
            # delete whatever holds the name, as they always did).
            gone = state["topics"].get(rec.name)
            if gone is not None and (rec.topic_id is None or rec.topic_id == gone["topic_id"]):
                del state["topics"][rec.name]
                partitions -= int(gone["partitions"])
                result = True
        if change is not None:
            _remember(state["results"], str(change), result, RESULTS_KEPT)
    state["acls"] = [list(x) for x in sorted(acls)]
    state["scram"] = [list(x) for x in sorted(scram)]
    return state


RETIRED_KEPT = 100  # replaced directories remembered (to refuse an old copy put back)
PID_BASE = 1 << 36  # above the ids nodes handed out from local counters before (node id << 40 | n)
PID_BLOCK = 1000
REFUSALS_KEPT = 100  # refused creations and changes remembered for their requesters to find
RESULTS_KEPT = 100  # outcomes of the last changes, for their requesters (read as soon as applied)
# A change's id is remembered while fewer than CHANGES_KEPT changes (entries with ids) came after
# it. A copy can only be a duplicate of one applied after what its requester had seen (``seen``),
# so a copy more than CHANGES_KEPT changes past that is refused instead: it may be a duplicate
# whose id was forgotten. A requester resubmits for a few seconds only, during which a thousand
# changes are not made but by a flood; then the refused change fails and its client retries.
CHANGES_KEPT = 1000


def _admit(state: dict[str, Any], change: str, seen: int) -> bool:
    """Whether to apply change ``change`` (its requester had seen ``seen`` changes applied): not a
    second copy of one applied already (resubmitted after a leader change or an unknown outcome),
    nor one too late to tell. Metadata changes are applied at most once."""
    state["seq"] += 1
    applied: dict[str, int] = state["applied"]
    while applied and next(iter(applied.values())) <= state["seq"] - CHANGES_KEPT:
        del applied[next(iter(applied))]  # in the order applied (dicts keep it, msgpack too)
    if change in applied:
        return False
    if state["seq"] - seen > CHANGES_KEPT:
        _remember_refusal(state["refused"], change, "the metadata change came too late to tell whether it was "
                                                    "applied already; not applied")
        return False
    applied[change] = state["seq"]
    return True


# What a requester is told of a change to a topic that is gone (or is another incarnation now).
UNKNOWN_TOPIC = ("unknown_topic_or_partition", "This server does not host this topic-partition.")


def _alter_topic_configs(topics: dict[str, Any], rec: AlterTopicConfigs) -> list[str | None]:
    """Apply a config alteration to the committed topic; what its requester is told: ["none"],
    or an error's name and message (the topic gone, or the result invalid: nothing applied)."""
    topic = topics.get(rec.name)
    if topic is None or topic["topic_id"] != rec.topic_id:
        return list(UNKNOWN_TOPIC)
    ops = _ops(rec.ops)
    try:
        topic["configs"] = altered(dict(topic["configs"]), ops, replace=bool(rec.replace),
                                   message_max_bytes=int(rec.max_message_bytes))
    except ConfigError as e:
        return [e.code, str(e)]
    return ["none", None]


def _alter_group_configs(configs: dict[str, dict[str, str]], rec: AlterGroupConfigs) -> list[str | None]:
    """Apply a config alteration to a group's committed overrides; ["none"], or an error's name
    and message (the result invalid: nothing applied). A group left with none is forgotten."""
    if rec.group == "":
        return ["invalid_request", "Default group resources are not allowed."]
    if rec.group not in configs and len(configs) >= group_configs.MAX_GROUPS:
        return ["policy_violation", f"kcoord keeps configs of their own for at most {group_configs.MAX_GROUPS} "
                                    "groups; delete some first"]
    limits = {str(k): (int(v[0]), int(v[1]), int(v[2])) for k, v in rec.limits.items()}
    return _alter_layer(configs, rec.group, lambda current: group_configs.altered(
        current, _ops(rec.ops), limits, replace=bool(rec.replace)))


def _alter_broker_configs(configs: dict[str, dict[str, str]], rec: AlterBrokerConfigs) -> list[str | None]:
    """Apply a change of a node's (or the cluster's) dynamic settings; ["none"], or an error's
    name and message (nothing applied). A resource left with none is forgotten."""
    return _alter_layer(configs, rec.broker, lambda current: broker_configs.altered(
        current, _ops(rec.ops), replace=bool(rec.replace)))


def _ops(ops: list[list[Any]]) -> list[tuple[str, int, str | None]]:
    return [(str(k), int(o), None if v is None else str(v)) for k, o, v in ops]


def _alter_layer(configs: dict[str, dict[str, str]], name: str,
                 alter: Callable[[dict[str, str]], dict[str, str]]) -> list[str | None]:
    """``name``'s configs replaced by ``alter``'s result (none left: forgotten); ["none"], or the
    refusal's error name and message (nothing applied)."""
    try:
        now = alter(configs.get(name, {}))
    except ConfigError as e:
        return [e.code, str(e)]
    if now:
        configs[name] = now
    else:
        configs.pop(name, None)
    return ["none", None]


def _add_node(state: dict[str, Any], rec: AddNode) -> list[str | None]:
    """Add a node; what its requester is told: ["none"] (also when it was added already with the
    same addresses, a retried request), or an error and message."""
    entry = [int(rec.node), str(rec.host), int(rec.kafka_port), int(rec.raft_port)]
    for added in state["added_nodes"]:
        if added[0] == entry[0]:
            if added == entry:
                return ["none", None]
            return ["duplicate_voter", f"node {rec.node} joined already at {added[1]}:{added[2]} (Raft port {added[3]})"]
    _record_original(state)
    if entry[0] in state["removed_nodes"]:
        return ["duplicate_voter", f"node {rec.node} was removed from the cluster: a node id is never taken again"]
    if entry[0] in (state["original_nodes"] or ()):
        return ["duplicate_voter", f"node {rec.node} is one of the nodes the cluster was formed with"]
    state["added_nodes"] = [*state["added_nodes"], entry]
    if rec.observer:
        state["observers"] = [*state["observers"], entry[0]]
    return ["none", None]


def _record_original(state: dict[str, Any]) -> None:
    if state["original_nodes"] is None and state["voters"]:
        # A cluster formed before InitCluster named its nodes: the nodes whose voting replicas it
        # recorded before its first addition or removal are the ones it was formed with.
        state["original_nodes"] = sorted(int(n) for n in state["voters"])


def _current_nodes(state: dict[str, Any]) -> list[int]:
    removed = set(state["removed_nodes"])
    return sorted({*(state["original_nodes"] or ()), *(int(a[0]) for a in state["added_nodes"])} - removed)


def _remove_node(state: dict[str, Any], rec: RemoveNode) -> list[str | None]:
    """Remove a node; what its requester is told: ["none"], or an error and message (a retried
    request is applied once: its change id)."""
    node = int(rec.node)
    if node in state["removed_nodes"]:
        return ["voter_not_found", f"node {node} was removed from the cluster already"]
    voter = state["voters"].get(node)
    if rec.directory is not None and voter is not None and voter != rec.directory:
        return ["voter_not_found", f"node {node}'s voting replica is directory {voter}, not {rec.directory}"]
    _record_original(state)
    if state["original_nodes"] is None:
        return ["request_timed_out", "the cluster's nodes are not recorded yet; try again"]
    nodes = _current_nodes(state)
    if node not in nodes:
        return ["voter_not_found", f"node {node} is not a node of the cluster (its nodes: {nodes})"]
    if len(nodes) == 1:
        return ["invalid_request", f"node {node} is the cluster's last node"]
    if node not in state["observers"] and [n for n in nodes if n not in state["observers"]] == [node]:
        return ["invalid_request", f"node {node} is the cluster's last voting node (promote an observer first)"]
    state["removed_nodes"] = [*state["removed_nodes"], node]
    state["observers"] = [n for n in state["observers"] if n != node]
    return ["none", None]


def _promote_node(state: dict[str, Any], rec: PromoteNode) -> list[str | None]:
    """Make an observer one of the cluster's voting nodes; what its requester is told, as Kafka's
    AddRaftVoter answers: DUPLICATE_VOTER for a node that votes already, REQUEST_TIMED_OUT for
    one that is no observer of the cluster (Kafka: not a replica it has heard from)."""
    node = int(rec.node)
    if node in state["observers"]:
        replica = state["voters"].get(node)
        if replica is None:
            return ["request_timed_out", f"node {node} has not registered its replica yet; try again"]
        if rec.directory is not None and replica != rec.directory:
            return ["request_timed_out", f"node {node}'s replica is directory {replica}, not {rec.directory}"]
        state["observers"] = [n for n in state["observers"] if n != node]
        return ["none", None]
    if node in _current_nodes(state) or state["original_nodes"] is None and node in state["voters"]:
        return ["duplicate_voter", f"node {node} is a voter already"]
    return ["request_timed_out", f"node {node} is not an observer of the cluster (start it with "
                                 "controller.quorum.auto.join.enable=false and bootstrap, and wait until it has joined)"]


def _create_partitions(state: dict[str, Any], total: int, rec: CreatePartitions) -> list[str | None]:
    """Check a partition increase against the committed state and take the new partitions' slots
    (the caller sets the count); what its requester is told: ["none"] or an error and message."""
    topic = state["topics"].get(rec.name)
    if topic is None or topic["topic_id"] != rec.topic_id:
        return list(UNKNOWN_TOPIC)
    have, count = int(topic["partitions"]), int(rec.count)
    if count <= have:  # another increase got there first
        return ["invalid_partitions", f"Topic currently has {have} partitions, which is higher than or equal to "
                                      f"the requested {count}."]
    refusal = partition_limit_message(total, count - have, int(rec.max_partitions))
    if refusal is not None:
        return ["policy_violation", refusal]
    topic.setdefault("more", []).append([have, state["next_slot"]])
    state["next_slot"] += count - have
    return ["none", None]


def partition_slot(topic: dict[str, Any], partition: int) -> int:
    """The Raft slot of a topic's partition: its first partitions from the topic's slot on, each
    later increase from the slot it was given (``CreatePartitions``)."""
    base, first = int(topic["slot"]), 0
    for start, slot in topic.get("more") or ():
        if partition >= int(start):
            base, first = int(slot), int(start)
    return base + partition - first


def _partition_limit(total: int, op: CreateTopic) -> str | None:
    """Why this creation may not join the ``total`` partitions of the committed state: it would
    pass the ``max_partitions`` its requester wrote into the entry. Creations that passed the
    request-time check together cannot all be applied; the bound travels in the entry so every
    node decides alike (entries from before it have none, and replay as they were applied)."""
    if op.max_partitions is None:
        return None
    return partition_limit_message(total, int(op.partitions), int(op.max_partitions))


def _remember_refusal(refused: dict[str, str], key: str, why: str) -> None:
    _remember(refused, key, why, REFUSALS_KEPT)


def _remember(kept: dict[str, Any], key: str, value: Any, limit: int) -> None:
    kept[key] = value
    while len(kept) > limit:  # the oldest go first (dicts keep their order, msgpack too)
        del kept[next(iter(kept))]


def filter_fields(flt: AclFilter) -> list[Any]:
    return [int(flt.resource_type), flt.name, int(flt.pattern), flt.principal, flt.host, int(flt.operation),
            int(flt.permission)]


def _acl_filter(fields: list[Any]) -> AclFilter:
    t, name, pattern, principal, host, op, perm = fields
    return AclFilter(ResourceType(t), name, PatternType(pattern), principal, host, Operation(op), Permission(perm))


def compact_metadata(payloads: list[bytes]) -> list[bytes]:
    state = fold_metadata(payloads)
    grown = any(t.get("more") for t in state["topics"].values())
    listed = any(t.get("nodes") is not None for t in state["topics"].values())  # first voters named (version 5 reads)
    version = (8 if state["group_configs"] or state["broker_configs"] else 6 if state["observers"] else 5 if state["removed_nodes"] or listed else 4 if state["added_nodes"]
               else 3 if state["voters"] else 2 if grown else WRITES)
    return [metadata_op(op="state", **state, v=version)]


def metadata_op(*, v: int = WRITES, **fields: Any) -> bytes:
    """A metadata change as its log entry, at record version ``v``."""
    return bytes(msgpack.packb({**fields, "v": v}, use_bin_type=True))
