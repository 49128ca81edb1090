"""Where things live in the cluster: the one seam between request handlers and replication.

A ``Topology`` answers who the brokers are, who leads each ``__consumer_offsets``,
``__transaction_state`` and data partition, and carries out what changes the cluster's shape
(topics, producer-id blocks).
Two implementations, chosen from the configuration by the node: ``SingleNodeTopology`` (local
logs, this node leads everything) and ``RaftCluster`` (every partition a Raft group over the
``peers``). Nothing above this seam asks which one it has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from cluster.broker_info import BrokerInfo
from cluster.config import Peer
from cluster.data_plane import DataPartition
from cluster.metadata import AclRow, ScramRow, TopicMeta
from cluster.security.authorizer import AclFilter
from cluster.topic_configs import Op
from replication.api import CoordinatorLog


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica of the cluster metadata's Raft group, as its leader sees it (DescribeQuorum)."""

    node_id: int
    directory: str | None  # its data directory's id (hex), None if not known
    log_end: int  # -1: not known
    last_fetch_ms: int  # wall clock; -1: not known
    last_caught_up_ms: int


@dataclass(frozen=True, slots=True)
class QuorumView:
    """The cluster metadata's Raft group: its leader, term, commit index, voters and learners."""

    leader_id: int  # -1: none known
    epoch: int
    high_watermark: int
    leading: bool  # this node leads it (only the leader knows the others' progress)
    voters: list[ReplicaView] = field(default_factory=list)
    observers: list[ReplicaView] = field(default_factory=list)


class Topology(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def wait_formed(self, timeout: float = 30.0) -> bool:
        """Until this node knows the cluster (False: not within ``timeout``)."""
        ...

    def brokers(self) -> list[BrokerInfo]:
        """The brokers to list in Metadata (the live ones, as far as this node can tell)."""
        ...

    def replica_ids(self) -> list[int]: ...

    def controller_id(self) -> int: ...

    def endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        """Node ``node_id``'s advertised address on a further ``listener`` (None: not registered)."""
        ...

    def register_endpoints(self, listeners: dict[str, list[object]]) -> None:
        """Make this node's further listeners known to the others."""
        ...

    def offsets_log(self, partition: int) -> CoordinatorLog: ...

    def offsets_leader(self, partition: int) -> BrokerInfo | None:
        """The coordinator of ``__consumer_offsets`` partition ``partition`` (None: not available)."""
        ...

    def likely_offsets_leader(self, partition: int) -> BrokerInfo | None:
        """Who most likely coordinates ``partition`` on the far side of a network partition that
        cut this node off (None: this node is not cut off, or cannot guess)."""
        ...

    async def wait_offsets_leaders(self, partitions: set[int], timeout: float) -> None:
        """Until every one of ``partitions`` has an available leader, ``timeout`` passes, or this
        node finds itself cut off (waiting could not help then)."""
        ...

    def txn_log(self, partition: int) -> CoordinatorLog:
        """The log of ``__transaction_state`` partition ``partition``."""
        ...

    def txn_leader(self, partition: int) -> BrokerInfo | None:
        """The transaction coordinator of ``__transaction_state`` partition ``partition``."""
        ...

    async def wait_txn_leaders(self, partitions: set[int], timeout: float) -> None:
        """As ``wait_offsets_leaders``, for ``__transaction_state`` partitions."""
        ...

    def partition_leader(self, topic: str, partition: int) -> tuple[int, int]:
        """``(leader node id or -1, leader epoch)`` of a data partition."""
        ...

    def epochs_exact(self) -> bool:
        """Whether clients are told leader epochs (and OffsetForLeaderEpoch is advertised)."""
        ...

    def lowest_metadata_version(self) -> int:
        """The newest metadata version every node of the cluster reads (what its oldest release
        can do: the finalized features follow it)."""
        ...

    def partition(self, topic: str, partition: int) -> DataPartition | None:
        """The data partition this node holds (None: unknown or not open here)."""
        ...

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta:
        """Create a topic; ``PartitionLimitError`` if, where it is applied, it would pass
        ``max_partitions`` (requests that each passed the request-time check may not all fit)."""
        ...

    async def delete_topic(self, name: str) -> TopicMeta | None: ...

    async def create_partitions(self, topic: TopicMeta, count: int) -> list[str | None]:
        """Grow ``topic`` to ``count`` partitions in one step of the cluster's metadata (checked
        there against its current count and ``max_partitions``): ["none"] once this node serves
        them, else the name of the Kafka error and its message."""
        ...

    async def elect_preferred(self, topic: str, partition: int, timeout: float) -> tuple[str, Peer | None]:
        """ElectLeaders (preferred) for a data partition: "none" once the partition's preferred
        node leads it, "election_not_needed", ("forward", the leader) when another node leads it
        and must hand it over, or the name of another Kafka error."""
        ...

    async def alter_topic_configs(self, topic: TopicMeta, ops: list[Op], replace: bool) -> list[str | None]:
        """Alter ``topic``'s config overrides (``cluster/topic_configs.py``) in one step of the
        cluster's metadata, applied live to its partitions on every node: ["none"], or the name
        of the Kafka error and its message (nothing applied)."""
        ...

    async def alter_group_configs(self, group: str, ops: list[Op], replace: bool) -> list[str | None]:
        """Alter group ``group``'s own configs (``cluster/group_configs.py``) in one step of the
        cluster's metadata, read by its coordinator from then on: ["none"], or the name of the
        Kafka error and its message (nothing applied)."""
        ...

    async def alter_broker_configs(self, broker: str, ops: list[Op], replace: bool) -> list[str | None]:
        """Alter node ``broker``'s dynamic settings ("": every node's default) in one step of the
        cluster's metadata (``cluster/broker_configs.py``), applied live by the nodes they concern:
        ["none"], or the name of the Kafka error and its message (nothing applied)."""
        ...

    async def remove_node(self, node_id: int, directory: str | None) -> tuple[str, str | None]:
        """RemoveRaftVoter: take node ``node_id`` out of the cluster (only if its voting replica is
        ``directory``, when given): ("none", None) once the metadata log records it (each Raft
        group's leader then takes the node out), else a Kafka error's name and a message."""
        ...

    async def promote_node(self, node_id: int, directory: str | None, timeout: float) -> tuple[str, str | None]:
        """AddRaftVoter: make observer ``node_id`` (only if its replica is ``directory``, when
        given) one of the cluster's voting nodes: ("none", None) once the metadata group counts its
        vote (within ``timeout`` seconds; 0: once recorded), else a Kafka error's name and a message."""
        ...

    async def create_acls(self, rows: list[AclRow]) -> None:
        """Add ``rows`` in one step of the cluster's metadata (every node's ``metadata.acls``
        follows; this node's once this returns)."""
        ...

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclRow]]:
        """Remove every ACL a filter matches in one step of the cluster's metadata, matched where
        the step is applied (not against this node's copy, which may lag); each filter's matches."""
        ...

    async def alter_scram(self, change: list[ScramRow]) -> None:
        """Apply SCRAM credential upserts and deletions (``metadata.with_scram``) in one step of the
        cluster's metadata (this node's ``metadata.scram`` holds them once this returns)."""
        ...

    async def allocate_producer_id_block(self) -> int:
        """The first id of a block of 1000 producer ids that no other node hands out."""
        ...

    def quorum(self) -> QuorumView:
        """The cluster metadata's quorum (DescribeQuorum, ``kafka-metadata-quorum``)."""
        ...
