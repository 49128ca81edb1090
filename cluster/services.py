"""What request handlers may use of the node they run in (``cluster.node.Node`` implements it).

The node's services come in small roles (``Registers``, ``Placement``, ``Identity``, ``Catalog``,
``TopicAdmin``, ``Producers``, ``Guarded``); each handler module types the node it is given as a
protocol of the roles it uses (its ``Needs``), so mypy holds every handler to those few. Where a
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
                 unknown_version: Any = None, authorize: Any = None, advertise_if: Any = None) -> None: ...

    def advertised(self) -> list[tuple[int, int, int]]:
        """``(api_key, min, max)`` of every registered API, for ApiVersions."""
        ...


class Registers(Protocol):
    """Where a handler module registers its APIs."""

    @property
    def registry(self) -> Registrar: ...


class Placement(Protocol):
    """Where partitions live and who leads them."""

    topology: Topology


class Identity(Protocol):
    """This node and its cluster as configured."""

    config: NodeConfig

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


class Catalog(Protocol):
    """The topics the cluster metadata holds."""

    metadata: ClusterMetadata

    def topic(self, name: str) -> TopicMeta | None: ...

    def topic_partitions(self, name: str) -> int | None: ...

    def has_partition(self, topic: str, partition: int) -> bool: ...

    def is_internal_topic(self, name: str) -> bool: ...


class TopicAdmin(Protocol):
    """Creating and deleting topics (through the cluster metadata)."""

    fd_budget: FdBudget  # the open-file limit's split; config.max_partitions is already bounded by it

    async def create_topic_async(self, name: str, partitions: int,
                                 configs: dict[str, str] | None = None) -> TopicMeta: ...

    async def delete_topic_async(self, name: str) -> TopicMeta | None: ...


class Producers(Protocol):
    """Producer ids and the transaction checks partition leaders ask for."""

    async def allocate_producer_id(self) -> int: ...

    async def verify_txn_partition(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                                   partition: int, add: bool = False) -> int:
        """The transaction coordinator's answer (a Kafka error code) to: is this partition in the
        producer's open transaction? (KIP-890 part 1) With ``add`` (part 2), it is added."""
        ...

    async def end_group_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                                    coordinator_epoch: int, version: int = 1) -> int:
        """Write a transaction's marker to ``__consumer_offsets`` partition ``partition``; the
        Kafka error code."""
        ...


class Guarded(Protocol):
    """The ACLs' decisions and the SCRAM credentials."""

    access: AccessControl  # the ACLs' decisions (everything allowed without an authorizer)
    scram_users: ScramUsers  # the SCRAM credentials SASL listeners check


class NodeServices(Registers, Placement, Identity, Catalog, TopicAdmin, Producers, Guarded, Protocol):
    """Everything a handler may use; each handler module names the roles it needs (its own
    ``Needs``), so mypy holds it to those."""
