"""What request handlers may use of the node they run in (``cluster.node.Node`` implements it).

Handlers type their node as ``NodeServices``, so mypy holds every handler to this list; where a
partition lives and who leads it comes from the node's ``Topology``.
"""

from __future__ import annotations

from typing import Any, Protocol

from cluster.broker_info import BrokerInfo
from cluster.config import NodeConfig
from cluster.fd_budget import FdBudget
from cluster.metadata import ClusterMetadata, TopicMeta
from cluster.security.access import AccessControl
from cluster.security.credentials import ScramUsers
from cluster.topology import Topology


class Registrar(Protocol):
    """Where handlers register (``cluster.dispatch.ApiRegistry``; its signature is checked there)."""

    def register(self, api_key: int, min_version: int, max_version: int, handler: Any, *,
                 advertised_min: int | None = None, error_response: Any = None, raw: Any = None,
                 unknown_version: Any = None, authorize: Any = None) -> None: ...

    def advertised(self) -> list[tuple[int, int, int]]:
        """``(api_key, min, max)`` of every registered API, for ApiVersions."""
        ...


class NodeServices(Protocol):
    config: NodeConfig
    metadata: ClusterMetadata
    topology: Topology
    access: AccessControl  # the ACLs' decisions (everything allowed without an authorizer)
    scram_users: ScramUsers  # the SCRAM credentials SASL listeners check
    fd_budget: FdBudget  # the open-file limit's split; config.max_partitions is already bounded by it

    @property
    def registry(self) -> Registrar: ...

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def offsets_partitions(self) -> int: ...

    @property
    def txn_partitions(self) -> int: ...

    def now_ms(self) -> int: ...

    def through(self, b: BrokerInfo, listener: str) -> BrokerInfo: ...

    def topic(self, name: str) -> TopicMeta | None: ...

    def topic_partitions(self, name: str) -> int | None: ...

    def has_partition(self, topic: str, partition: int) -> bool: ...

    def is_internal_topic(self, name: str) -> bool: ...

    async def create_topic_async(self, name: str, partitions: int,
                                 configs: dict[str, str] | None = None) -> TopicMeta: ...

    async def delete_topic_async(self, name: str) -> TopicMeta | None: ...

    async def allocate_producer_id(self) -> int: ...

    async def verify_txn_partition(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                                   partition: int) -> int:
        """The transaction coordinator's answer (a Kafka error code) to: is this partition in the
        producer's open transaction? (KIP-890 part 1)"""
        ...

    async def end_group_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                                    coordinator_epoch: int) -> int:
        """Write a transaction's marker to ``__consumer_offsets`` partition ``partition``; the
        Kafka error code."""
        ...
