"""The composition root: one node process's config, registry, metadata and topology.

The node builds its parts from the configuration: the partition store, the ``Topology``
(``SingleNodeTopology`` without ``peers``, else ``RaftCluster``), the request handlers with the
group coordinator's driver, and the wire server. Handlers see it through ``NodeServices``
(``cluster.services``); where a partition lives and who leads it is the topology's to say.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import ssl
from typing import TYPE_CHECKING, Any

from cluster import data_dir, fd_budget, group_api, txn_api
from cluster.apis.groups import GroupApi
from cluster.apis.transactions import TxnApi
from cluster.broker_info import BrokerInfo
from cluster.clock import AnchoredClock
from cluster.config import NodeConfig
from cluster.data_plane import PartitionStore
from cluster.dispatch import ApiRegistry, Dispatcher
from cluster.metadata import INTERNAL_TOPICS, OFFSETS_TOPIC, ClusterMetadata, MetadataFileError, TopicMeta
from cluster.release import RELEASE
from cluster.security.access import AccessControl
from cluster.security.credentials import ScramUsers
from cluster.security.listener_auth import authenticators, bootstrap_credentials, tls_contexts
from cluster.security.principal_mapper import PrincipalMapper
from cluster.security.tls import server_context
from cluster.server import ConnectionLimits, WireServer, auto_max_connections
from cluster.single_node_topology import SingleNodeTopology
from cluster.supervise import supervised
from cluster.topology import Topology
from replication.journal import FlushPolicy, set_flush_policy

log = logging.getLogger("kcoord.node")


class NodeStartError(RuntimeError):
    """A node that must not start (the message says why)."""


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.fd_budget = self._open_file_budget(config)
        # Every check of max_partitions, and the bound a creation carries into the replicated
        # metadata, use what the open-file limit holds.
        config = dataclasses.replace(config, max_partitions=self.fd_budget.max_partitions)
        self.fd_watch = fd_budget.FdWatch(self.fd_budget)
        self.config = config
        self.clock = AnchoredClock()
        set_flush_policy(FlushPolicy(
            before_send=config.durability == "fsync",
            every_messages=max(config.log_flush_interval_messages, 0),
            every_ms=max(config.log_flush_interval_ms, 0)))
        os.makedirs(config.data_dir, exist_ok=True)
        try:  # its logs and metadata hold SCRAM keys and every record: the owner's only
            os.chmod(config.data_dir, 0o700)
        except PermissionError as e:  # a directory someone else owns (a mounted volume): say so, go on
            log.warning("event=data_dir_mode_unchanged dir=%s error=%r", config.data_dir, str(e))
        try:
            self._data_dir_lock = data_dir.lock(config.data_dir)  # before anything reads the directory
            data_dir.check_identity(config.data_dir, config.node_id, config.cluster_secret)
        except data_dir.DataDirError as e:
            raise NodeStartError(str(e)) from None
        self.registry = ApiRegistry()
        try:
            self.metadata = ClusterMetadata(config.data_dir, offsets_partitions=config.offsets_topic_num_partitions,
                                            txn_partitions=config.transaction_state_num_partitions)
        except MetadataFileError as e:
            raise NodeStartError(str(e)) from None
        # Changing either count would move every group or transactional id to another partition.
        for name, wanted, fixed in (
                ("offsets.topic.num.partitions", config.offsets_topic_num_partitions, self.metadata.offsets_partitions),
                ("transaction.state.log.num.partitions", config.transaction_state_num_partitions,
                 self.metadata.txn_partitions)):
            if wanted != fixed:
                raise NodeStartError(f"{name} is {wanted} but this node's data ({config.data_dir}) was created "
                                     f"with {fixed}; it can never change")
        try:  # the listeners' TLS keys and CAs are read now: a node that cannot serve TLS does not start
            self._tls = tls_contexts(config)
        except (OSError, ssl.SSLError) as e:
            raise NodeStartError(f"cannot set up TLS from ssl.keystore.location={config.ssl_keystore_location!r} / "
                                 f"ssl.truststore.location={config.ssl_truststore_location!r}: {e}") from None
        try:
            self._principal_mapper = PrincipalMapper(config.ssl_principal_mapping_rules)
        except ValueError as e:
            raise NodeStartError(f"invalid setting ssl.principal.mapping.rules: {e}") from None
        self.scram_users = ScramUsers(bootstrap_credentials(config), lambda: self.metadata.scram)
        self.access = AccessControl(bool(config.authorizer_class_name), config.super_user_list(),
                                    config.allow_everyone_if_no_acl_found, lambda: self.metadata.acls)
        self.partitions = PartitionStore(config.data_dir, config)
        self.server: WireServer | None = None
        self._producer_id_next = 0
        self._producer_id_end = 0
        self._tasks: list[asyncio.Task[Any]] = []
        self.started_at_ms = self.now_ms()
        self.stop_requested: asyncio.Event | None = None
        self.exit_code = 0
        self.topology: Topology = self._topology(config)

        from cluster.apis import register_all

        register_all(self)
        self.group_api: GroupApi = group_api.register(self)
        self.txn_api: TxnApi = txn_api.register(self)
        log.info("event=coordinator_apis_registered")
        if self.access.enabled:  # the nodes' own requests come as their first listener's principal
            log.info("event=authorizer_enabled super_users=%r allow_everyone_if_no_acl_found=%s note=%r",
                     config.super_user_list(), config.allow_everyone_if_no_acl_found,
                     "in a cluster the first listener's principal needs super.users or CLUSTER_ACTION and ALTER "
                     "on the cluster" if config.peers else "")

    @staticmethod
    def _open_file_budget(config: NodeConfig) -> fd_budget.FdBudget:
        """Raise the soft open-file limit to the hard one (before any file is open) and split it
        between the node's own files, connections and partitions (``cluster.fd_budget``)."""
        try:
            budget = fd_budget.plan(config, fd_budget.raise_open_file_limit())
        except fd_budget.FdBudgetError as e:
            raise NodeStartError(str(e)) from None
        if budget.max_partitions < config.max_partitions:
            log.warning("event=fd_budget_max_partitions_lowered max_partitions=%d configured=%d limit=%s "
                        "per_partition=%d own=%d connections=%d detail=%r", budget.max_partitions,
                        config.max_partitions, budget.limit, budget.per_partition, budget.own, budget.connections,
                        f"max_partitions={config.max_partitions} would need more descriptors than the open-file "
                        f"limit ({budget.limit}) holds; raise it (ulimit -n) to hold more partitions")
        if config.max_connections != -1 and budget.connections < config.max_connections:
            log.warning("event=fd_budget_max_connections_lowered max_connections=%d configured=%d limit=%s own=%d",
                        budget.connections, config.max_connections, budget.limit, budget.own)
        return budget

    def _topology(self, config: NodeConfig) -> Topology:
        if not config.peers:
            return SingleNodeTopology(config, self.metadata, self.partitions, self.self_info)
        from cluster.raft_cluster import RaftCluster  # Raft only where it is used

        try:
            return RaftCluster(config, self.metadata, self.partitions, self.request_stop)
        except data_dir.DataDirError as e:
            raise NodeStartError(str(e)) from None

    # -- identity / routing ---------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    @property
    def port(self) -> int:
        return self.server.port if self.server is not None else self.config.port

    @property
    def offsets_partitions(self) -> int:
        """``n``: partitions of ``__consumer_offsets`` (fixed at the cluster's first start)."""
        return self.metadata.offsets_partitions

    @property
    def txn_partitions(self) -> int:
        """Partitions of ``__transaction_state`` (fixed at the cluster's first start)."""
        return self.metadata.txn_partitions

    def self_info(self) -> BrokerInfo:
        return BrokerInfo(self.config.node_id, self.config.advertised, self.port)

    def _advertised_on(self, listener: str) -> tuple[str, int]:
        host, port = self.config.advertised_for(listener)
        if port == 0 and self.server is not None:  # bound to a free port: the one it got
            port = self.server.ports.get(listener, 0)
        return host, port

    def through(self, b: BrokerInfo, listener: str) -> BrokerInfo:
        """Broker ``b`` as a client that came in through ``listener`` reaches it: Kafka's
        advertised listeners (the main listener's addresses are the default)."""
        if not listener or self.server is None or listener == self.server.name:
            return b
        if b.node_id == self.node_id:
            if listener not in self.server.ports:
                return b
            host, port = self._advertised_on(listener)
        else:
            found = self.topology.endpoint(b.node_id, listener)
            if found is None:
                return b
            host, port = found
        return BrokerInfo(b.node_id, host, port, b.rack)

    def request_stop(self, code: int) -> None:
        self.exit_code = code
        if self.stop_requested is not None:
            self.stop_requested.set()

    def now_ms(self) -> int:
        """Coordinator time: the wall clock at start, advancing monotonically (``cluster.clock``)."""
        return self.clock.now_ms()

    # -- topics -----------------------------------------------------------------------------

    def topic(self, name: str) -> TopicMeta | None:
        return self.metadata.topics.get(name)

    def topic_partitions(self, name: str) -> int | None:
        """Partition count of a topic this cluster serves (``None`` = unknown topic).

        ``__consumer_offsets`` answers ``n`` so OffsetCommit on it is not rejected.
        """
        if name == OFFSETS_TOPIC:
            return self.offsets_partitions
        t = self.metadata.topics.get(name)
        return t.partitions if t is not None else None

    def has_partition(self, topic: str, partition: int) -> bool:
        n = self.topic_partitions(topic)
        return n is not None and 0 <= partition < n

    def is_internal_topic(self, name: str) -> bool:
        return name in INTERNAL_TOPICS

    async def create_topic_async(self, name: str, partitions: int,
                                 configs: dict[str, str] | None = None) -> TopicMeta:
        t = await self.topology.create_topic(name, partitions, dict(configs or {}))
        log.info("event=topic_created topic=%s partitions=%d topic_id=%s", name, partitions, t.topic_id)
        self.fd_watch.check()
        return t

    async def delete_topic_async(self, name: str) -> TopicMeta | None:
        t = await self.topology.delete_topic(name)
        if t is not None:
            log.info("event=topic_deleted topic=%s partitions=%d", name, t.partitions)
        return t

    # -- producer ids -------------------------------------------------------------------------

    async def allocate_producer_id(self) -> int:
        if self._producer_id_next >= self._producer_id_end:
            start = await self.topology.allocate_producer_id_block()
            self._producer_id_next, self._producer_id_end = start, start + 1000
        pid = self._producer_id_next
        self._producer_id_next += 1
        return pid

    async def verify_txn_partition(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                                   partition: int, add: bool = False) -> int:
        return await self.txn_api.verify(transactional_id, producer_id, producer_epoch, topic, partition, add)

    async def end_group_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                                    coordinator_epoch: int, version: int = 1) -> int:
        """The marker of a transaction for ``__consumer_offsets`` partition ``partition``."""
        return int(await self.group_api.end_transaction(partition, producer_id, producer_epoch, commit,
                                                        coordinator_epoch, version))

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        self.stop_requested = asyncio.Event()
        await self.topology.start()
        cfg = self.config
        limits = ConnectionLimits(
            max_request_bytes=cfg.socket_request_max_bytes, non_produce_max_bytes=cfg.non_produce_request_max_bytes,
            max_connections=auto_max_connections(self.fd_budget.connections) if cfg.max_connections == -1
            else self.fd_budget.connections,
            max_connections_per_ip=cfg.max_connections_per_ip, idle_ms=cfg.connections_max_idle_ms,
            queued_max_bytes=cfg.queued_max_request_bytes)
        dispatcher = Dispatcher(self.registry, self, max_array_items=cfg.request_max_array_items)
        main, *more = cfg.listener_list()
        self.server = WireServer(dispatcher, cfg.host, cfg.port, limits=limits, name=main.name,
                                 more=[(x.name, x.host, x.port) for x in more],
                                 authenticators=authenticators(cfg, self.scram_users.lookup),
                                 tls=self._tls, principal_mapper=self._principal_mapper)
        await self.server.start()
        # Also when there are none: the registration carries this node's release (rolling upgrades).
        self.topology.register_endpoints({x.name: list(self._advertised_on(x.name)) for x in more})
        # Metrics: Prometheus endpoint on config.metrics_port (None when 0 = disabled).
        from cluster import metrics_http

        try:
            self.metrics_server = metrics_http.start_server(
                self.config, server_context(self.config, "none") if self.config.metrics_tls else None)
        except (OSError, ssl.SSLError) as e:  # a port taken, a key that will not load: say which and stop
            raise NodeStartError(f"cannot serve metrics on {self.config.host}:{self.config.metrics_port}: {e}") from None
        self._tasks.append(supervised(self._retention_loop(), "retention"))
        if self.config.log_cleaner_enable:
            self._tasks.append(supervised(self._cleaner_loop(), "log_cleaner"))
        self._tasks.append(supervised(self._producer_expiry_loop(), "producer_expiry"))
        self._tasks.append(supervised(self._fd_watch_loop(), "fd_watch"))
        await self.group_api.start()
        await self.txn_api.start()
        if not await self.topology.wait_formed():
            log.warning("event=cluster_not_formed detail='no metadata leader yet; serving anyway'")
            self._tasks.append(supervised(self._record_cluster_id_once_formed(), "cluster_id"))
        else:
            try:
                data_dir.record_cluster_id(self.config.data_dir, self.cluster_id)
            except data_dir.DataDirError as e:
                raise NodeStartError(str(e)) from None
        log.info("event=node_started node_id=%d host=%s port=%d cluster_id=%s topics=%d offsets_partitions=%d "
                 "release=%s", self.node_id, self.config.host, self.port, self.cluster_id, len(self.metadata.topics),
                 self.offsets_partitions, RELEASE)

    async def _record_cluster_id_once_formed(self) -> None:
        """A node that started before the cluster formed (a slow join) records its id once it has."""
        while not await self.topology.wait_formed(timeout=60.0):
            pass
        try:
            data_dir.record_cluster_id(self.config.data_dir, self.cluster_id)
        except data_dir.DataDirError as e:  # another cluster's directory: as at start
            log.error("event=data_dir_refused error=%r", str(e))
            self.request_stop(2)

    async def _retention_loop(self) -> None:
        interval = self.config.log_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            deleted = self.partitions.enforce_retention()
            if deleted:
                log.info("event=retention_run segments_deleted=%d", deleted)

    async def _cleaner_loop(self) -> None:
        """Log compaction, on one thread of its own (Kafka's log.cleaner.threads=1): the loop
        that drives Raft and clients only waits for it."""
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-cleaner")
        try:
            while True:
                await asyncio.sleep(self.config.log_cleaner_backoff_ms / 1000)
                await asyncio.get_running_loop().run_in_executor(pool, self.partitions.compact)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    async def _producer_expiry_loop(self) -> None:
        interval = self.config.producer_id_expiration_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            expired = self.partitions.expire_producers(self.config.producer_id_expiration_ms)
            if expired:
                log.info("event=producer_ids_expired count=%d", expired)

    async def _fd_watch_loop(self) -> None:
        while True:
            self.fd_watch.check()
            await asyncio.sleep(fd_budget.CHECK_INTERVAL_S)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self.server is not None:
            await self.server.stop()
        metrics_server = getattr(self, "metrics_server", None)  # metrics endpoint (see start)
        if metrics_server is not None:
            metrics_server.stop()
        await self.txn_api.stop()
        await self.group_api.stop()
        await self.topology.stop()
        self.partitions.close()
        os.close(self._data_dir_lock)
        log.info("event=node_stopped node_id=%d", self.node_id)


if TYPE_CHECKING:
    from cluster.services import NodeServices

    _serves: type[NodeServices] = Node
