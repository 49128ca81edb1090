"""The topology of a node without ``peers``: local logs, and this node leads every partition."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from cluster import broker_configs, group_configs
from cluster.broker_info import BrokerInfo
from cluster.config import NodeConfig, Peer
from cluster.data_plane import DataPartition, PartitionStore
from cluster.group_configs import node_limits
from cluster.metadata import (
    OFFSETS_TOPIC,
    TRANSACTION_TOPIC,
    AclRow,
    ClusterMetadata,
    PartitionLimitError,
    ScramRow,
    TopicMeta,
    partition_limit_message,
)
from cluster.metadata_log import METADATA_VERSION, UNKNOWN_TOPIC
from cluster.offsets_compaction import compact_offsets
from cluster.security.access import matching
from cluster.security.authorizer import AclFilter
from cluster.topic_configs import ConfigError, Op, altered
from cluster.topology import QuorumView, ReplicaView
from cluster.txn_entries import compact_txn
from replication.api import CoordinatorLog
from replication.local import LocalLog

log = logging.getLogger("kcoord.node")


class SingleNodeTopology:
    def __init__(self, config: NodeConfig, metadata: ClusterMetadata, partitions: PartitionStore,
                 self_info: Callable[[], BrokerInfo]) -> None:
        self.config = config
        self.metadata = metadata
        self.partitions = partitions
        self._self_info = self_info  # its port is known once the listener is bound
        self._offsets_logs: dict[int, LocalLog] = {}
        self._txn_logs: dict[int, LocalLog] = {}

    def _apply_dynamic(self) -> None:
        bc = self.metadata.broker_configs
        self.partitions.reconfigure_defaults(
            broker_configs.effective(self.config, bc.get("", {}), bc.get(str(self.config.node_id), {})),
            {name: t.configs for name, t in self.metadata.topics.items()})

    async def start(self) -> None:
        self._apply_dynamic()
        for t in list(self.metadata.topics.values()):
            for p in range(t.partitions):
                self.partitions.open(t.name, p, t.configs)

    async def stop(self) -> None:
        for lg in [*self._offsets_logs.values(), *self._txn_logs.values()]:
            lg.close()

    async def wait_formed(self, timeout: float = 30.0) -> bool:
        return True

    def brokers(self) -> list[BrokerInfo]:
        return [self._self_info()]

    def replica_ids(self) -> list[int]:
        return [self.config.node_id]

    def controller_id(self) -> int:
        return self.config.node_id

    def quorum(self) -> QuorumView:
        """No Raft: this node alone, its own quorum."""
        now = int(time.time() * 1000)
        me = ReplicaView(self.config.node_id, None, 0, now, now)
        return QuorumView(self.config.node_id, 0, 0, True, [me])

    def endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        return None  # no other node to reach

    def register_endpoints(self, listeners: dict[str, list[object]]) -> None:
        pass  # nobody else to tell

    def offsets_log(self, partition: int) -> CoordinatorLog:
        lg = self._offsets_logs.get(partition)
        if lg is None:
            path = os.path.join(self.config.data_dir, "offsets", f"{OFFSETS_TOPIC}-{partition}", "log")
            lg = LocalLog(path, f"{OFFSETS_TOPIC}-{partition}", compact=compact_offsets,
                          compact_bytes=self.config.raft_compaction_bytes)
            self._offsets_logs[partition] = lg
        return lg

    def txn_log(self, partition: int) -> CoordinatorLog:
        lg = self._txn_logs.get(partition)
        if lg is None:
            name = f"{TRANSACTION_TOPIC}-{partition}"
            lg = LocalLog(os.path.join(self.config.data_dir, "transactions", name, "log"), name,
                          compact=compact_txn, compact_bytes=self.config.raft_compaction_bytes)
            self._txn_logs[partition] = lg
        return lg

    def txn_leader(self, partition: int) -> BrokerInfo | None:
        return self._self_info() if 0 <= partition < self.metadata.txn_partitions else None

    async def wait_txn_leaders(self, partitions: set[int], timeout: float) -> None:
        pass  # it leads them all

    def offsets_leader(self, partition: int) -> BrokerInfo | None:
        return self._self_info() if 0 <= partition < self.metadata.offsets_partitions else None

    def likely_offsets_leader(self, partition: int) -> BrokerInfo | None:
        return None  # never cut off from itself

    async def wait_offsets_leaders(self, partitions: set[int], timeout: float) -> None:
        pass  # it leads them all

    def partition_leader(self, topic: str, partition: int) -> tuple[int, int]:
        return self.config.node_id, 1

    def epochs_exact(self) -> bool:
        return True

    def lowest_metadata_version(self) -> int:
        return METADATA_VERSION

    def partition(self, topic: str, partition: int) -> DataPartition | None:
        t = self.metadata.topics.get(topic)
        if t is None or not 0 <= partition < t.partitions:
            return None
        return self.partitions.get(topic, partition) or self.partitions.open(topic, partition, t.configs)

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta:
        refusal = partition_limit_message(sum(t.partitions for t in self.metadata.topics.values()), partitions,
                                          self.config.max_partitions)
        if refusal is not None:  # the bound holds where the topic is added, as in a cluster
            raise PartitionLimitError(refusal)
        t = self.metadata.add_topic(name, partitions, configs)
        for p in range(partitions):
            self.partitions.open(name, p, t.configs)
        return t

    async def delete_topic(self, name: str) -> TopicMeta | None:
        t = self.metadata.remove_topic(name)
        if t is not None:
            self.partitions.drop_topic(name, t.partitions)
        return t

    async def create_partitions(self, topic: TopicMeta, count: int) -> list[str | None]:
        if self.metadata.topics.get(topic.name) is not topic:
            return list(UNKNOWN_TOPIC)
        refusal = partition_limit_message(sum(t.partitions for t in self.metadata.topics.values()),
                                          count - topic.partitions, self.config.max_partitions)
        if refusal is not None:
            return ["policy_violation", refusal]
        grown = self.metadata.update_topic(topic.name, partitions=count)
        for p in range(topic.partitions, count):
            self.partitions.open(topic.name, p, grown.configs)
        return ["none", None]

    async def remove_node(self, node_id: int, directory: str | None) -> tuple[str, str | None]:
        return "voter_not_found", "a single node (no peers) has no other node to hand over to"

    async def promote_node(self, node_id: int, directory: str | None, timeout: float) -> tuple[str, str | None]:
        if node_id == 0:
            return "duplicate_voter", "node 0 is the only node, a voter already"
        return "request_timed_out", "a single node (no peers) has no observers: nodes join a cluster"

    async def elect_preferred(self, topic: str, partition: int, timeout: float) -> tuple[str, Peer | None]:
        t = self.metadata.topics.get(topic)
        if t is None or not 0 <= partition < t.partitions:
            return "unknown_topic_or_partition", None
        return "election_not_needed", None  # the only node leads every partition

    async def alter_topic_configs(self, topic: TopicMeta, ops: list[Op], replace: bool) -> list[str | None]:
        if self.metadata.topics.get(topic.name) is not topic:
            return list(UNKNOWN_TOPIC)
        try:
            configs = altered(topic.configs, ops, replace=replace, message_max_bytes=self.config.message_max_bytes)
        except ConfigError as e:
            return [e.code, str(e)]
        self.metadata.update_topic(topic.name, configs=configs)
        self.partitions.reconfigure(topic.name, configs)
        return ["none", None]

    async def alter_group_configs(self, group: str, ops: list[Op], replace: bool) -> list[str | None]:
        try:
            configs = group_configs.altered(self.metadata.group_configs.get(group, {}), ops,
                                            node_limits(self.config), replace=replace)
        except ConfigError as e:
            return [e.code, str(e)]
        self.metadata.set_group_configs(group, configs)
        return ["none", None]

    async def alter_broker_configs(self, broker: str, ops: list[Op], replace: bool) -> list[str | None]:
        try:
            configs = broker_configs.altered(self.metadata.broker_configs.get(broker, {}), ops, replace=replace)
        except ConfigError as e:
            return [e.code, str(e)]
        self.metadata.set_broker_configs(broker, configs)
        self._apply_dynamic()
        return ["none", None]

    async def allocate_producer_id_block(self) -> int:
        return self.metadata.allocate_producer_id_block()

    async def create_acls(self, rows: list[AclRow]) -> None:
        self.metadata.alter_acls(rows, [])

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclRow]]:
        matched = [matching(self.metadata.acls, f) for f in filters]
        if any(matched):
            self.metadata.alter_acls([], [r for m in matched for r in m])
        return matched

    async def alter_scram(self, change: list[ScramRow]) -> None:
        self.metadata.alter_scram(change)
