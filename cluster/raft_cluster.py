"""Cluster mode: every partition of the node is a Raft group over the ``peers`` list.

Every node has one Raft port, ``raft_port``, shared by all its groups (``replication/hub.py``).
Within a group a member is named by its logical address ``host:raft_port + slot``:
- slot 0: ``__cluster_metadata`` — topics, cluster id and ``n``, ACLs, SCRAM credentials, as
  changes each applied at most once (``fold_metadata``);
- slots 1..n: ``__consumer_offsets`` partitions (coordinator records, compacted);
- slots -1..-m: ``__transaction_state`` partitions (transaction records, compacted), below
  the base port so that they never meet the data slots, which grow upwards;
- then one slot per data partition, allocated in the order topics are created (the
  metadata log's order, so every node computes the same addresses).

A partition's preferred leader is ``slot % len(peers)``, which spreads leadership evenly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cluster import bootstrap, broker_configs, data_dir, link_control, metrics
from cluster.bootstrap import JOIN_DOOR
from cluster.broker_info import BrokerInfo
from cluster.config import MAX_NODES, NodeConfig, Peer
from cluster.data_plane import DataPartition, PartitionStore
from cluster.group_configs import node_limits
from cluster.incarnation import claim_dir
from cluster.metadata import (
    TRANSACTION_TOPIC,
    AclRow,
    ClusterMetadata,
    PartitionLimitError,
    ScramRow,
    TopicMeta,
    acl_row,
    scram_row,
)
from cluster.metadata_log import (
    EXACT_EPOCHS,
    METADATA_VERSION,
    UNREGISTERED_READS,
    AddNode,
    AlterBrokerConfigs,
    AlterGroupConfigs,
    AlterTopicConfigs,
    Change,
    ChangeAcls,
    ChangeScram,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    GrantPidBlock,
    InitCluster,
    MetadataVersionError,
    PromoteNode,
    RegisterEndpoints,
    RemoveNode,
    SetVoter,
    compact_metadata,
    encode_change,
    filter_fields,
    fold_metadata,
    lowest_reads,
    partition_slot,
    record_version,
    version_refusal,
)
from cluster.nodes import (
    added_peers,
    known_peers,
    nodes_at,
    observer_ids,
    original_ids,
    removed_ids,
    topic_nodes,
    unknown_configured,
)
from cluster.nodes import load as load_nodes
from cluster.nodes import save as save_nodes
from cluster.offsets_compaction import compact_offsets
from cluster.release import RELEASE
from cluster.security.authorizer import AclFilter
from cluster.security.tls import raft_tls
from cluster.supervise import supervised
from cluster.topic_configs import Op
from cluster.topology import QuorumView, ReplicaView
from cluster.txn_entries import compact_txn
from replication.api import EntryTooLargeError, PeerLog, ReplicationError
from replication.data_log import settle_install
from replication.data_state_machine import DataStateMachine
from replication.failstop import EXIT_CORRUPT, fail_stop
from replication.raft import EPOCH_STRIDE, EntryStore, RaftHost, RaftLog, RaftTimings
from replication.raft.log import MembershipRefused
from replication.raft.membership import ADD_LEARNER, PROMOTE, REMOVE, Members
from replication.raft.voters import FILE_NAME as VOTERS_FILE
from replication.raft.voters import VoterSet

log = logging.getLogger("kcoord.cluster")

META_SLOT = 0
JOIN_ASK_KEPT_S = 10.0  # a join request not repeated for this long is dropped (its node gave up)
MEMBER_ASK_S = 10.0  # how often a node asks the others whether it was removed (one it missed, being down)
RAFT_SPAN = 1000  # a node's Raft ports: raft_port + slot, slots a few thousand at most below and above


class _JoinDoor:
    """The hub endpoint of ``JOIN_DOOR``: a join request from a node that holds the cluster
    secret (the hub authenticated it) is handed to the cluster (``RaftCluster.join_asked``)."""

    def __init__(self, cluster: RaftCluster) -> None:
        self._cluster = cluster

    def on_connected(self, peer: str) -> None:
        pass

    def on_disconnected(self, peer: str) -> None:
        pass

    def on_message(self, peer: str, message: Any) -> None:
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "join":
            self._cluster.join_asked(peer, message)
        elif kind == "join_refused" and self._cluster.config.join:
            self._cluster.join_refused(message.get("why"))
        elif kind == "join_deferred" and self._cluster.config.join:
            self._cluster.join_refused(message.get("why"), deferred=True)
        elif kind == "nodes?":
            self._cluster.nodes_asked(peer)
        elif kind == "member?":
            self._cluster.member_asked(peer, message)
        elif kind in ("removed", "left"):
            self._cluster.removal_told(peer, kind)


class VersionRefused(ReplicationError):
    """A metadata change some node of the cluster could not read yet (``version_refusal``)."""


def _compact_metadata(payloads: list[bytes]) -> list[bytes]:
    """The metadata log compacted; a record this build cannot read stops the node at once (the
    compaction runs inside Raft's apply, which would only report the entry as failed)."""
    try:
        return compact_metadata(payloads)
    except MetadataVersionError as e:
        fail_stop("metadata", str(e), EXIT_CORRUPT)


# ------------------------------------------------------------------ data partitions

ELECT_WAIT_S = 5.0  # how long ElectLeaders waits for one transfer

class RaftCluster:
    def __init__(self, config: NodeConfig, metadata: ClusterMetadata, partitions: PartitionStore,
                 on_fatal: Callable[[int], None]) -> None:
        cfg = self.config = config
        self.metadata = metadata
        self.partitions = partitions
        self._dynamic: dict[str, dict[str, str]] = {}  # the dynamic settings the partitions were given
        self.metadata.broker_configs = {}  # the metadata log's, once folded (not a copy left in the file)
        self._on_fatal = on_fatal  # the node stops with this exit code
        # The nodes: those of ``peers`` and those added through the metadata log (cluster/nodes.py).
        # ``peers`` is the cluster now (this node too while it joins), in node-id order.
        # Until the metadata log is read again, the nodes as it said last time (``nodes.save``).
        self.configured: list[Peer] = cfg.cluster_peers
        self._saved_nodes = load_nodes(cfg.data_dir)
        self._known: dict[int, Peer] = known_peers(self.configured, self._saved_nodes)
        self.me: Peer = self._known[cfg.node_id]
        self._original = original_ids(self.configured, self._saved_nodes, cfg.node_id, cfg.join)
        ids = {*nodes_at(self._original, self._saved_nodes), self.me.node_id}
        self.peers: list[Peer] = [self._known[i] for i in sorted(ids) if i in self._known]  # see _update_nodes
        self._observers: frozenset[int] = frozenset()  # nodes that follow every group and vote in none (yet)
        self._slots: dict[str, int] = {}  # every group's slot, by name
        # metadata leader: nodes that asked to join (through the hub) lately, not added yet, and when
        self._join_asks: dict[int, tuple[Peer, float, bool]] = {}  # ... and whether it joins as an observer
        self._join_warned: dict[int, float] = {}  # when a failed addition of each was last logged
        timings = RaftTimings(
            raft_min_timeout=cfg.raft_election_timeout_ms / 1000,
            raft_max_timeout=2 * cfg.raft_election_timeout_ms / 1000,
            append_entries_period=cfg.raft_heartbeat_ms / 1000,
            tick_period=cfg.raft_tick_ms / 1000,
            compaction_min_entries=cfg.raft_compaction_entries,
            compaction_min_time=float(cfg.raft_compaction_interval_s),
            compaction_bytes=cfg.raft_compaction_bytes,
            auto_leader_rebalance=cfg.auto_leader_rebalance_enable,
            leader_imbalance_check_interval=float(cfg.leader_imbalance_check_interval_seconds),
            leader_imbalance_per_broker_percentage=float(cfg.leader_imbalance_per_broker_percentage),
        )
        self.host = RaftHost(cfg.cluster_secret, timings, listen=self.hub_addr(self.me),
                             tls=raft_tls(cfg))
        self.root = os.path.join(cfg.data_dir, "raft")
        self._addr_to_peer: dict[str, Peer] = {}
        # This replica of the node (its data directory's id) and which replica of each node votes.
        self.directory = data_dir.directory_id(cfg.data_dir)
        self._was_voter = data_dir.was_voter(cfg.data_dir)
        self.host.voters = VoterSet(self.directory, self.me.node_id, self._node_of,
                                    os.path.join(cfg.data_dir, VOTERS_FILE), fresh=not self._was_voter)
        self._voter_task: asyncio.Task[None] | None = None
        self._last_seen: dict[int, float] = {}  # when each peer was last connected (Metadata's grace)
        self.meta_store = EntryStore(compact=_compact_metadata, compact_every=500)
        # Metadata changes are events: an applied entry wakes the follower, which folds the state
        # and wakes whoever waits for a change (topic creation, the cluster forming).
        self._meta_wake = asyncio.Event()
        self.meta_store.on_change = lambda: self.host.call_in_loop(self._meta_wake.set)
        self._changed = asyncio.Event()
        self.host.on_leader_seen(self._state_changed)  # leaders named elsewhere wake waiters too
        self.meta_log = self._group("__cluster_metadata", META_SLOT, self.meta_store)
        n = metadata.offsets_partitions
        self.offsets_logs: list[RaftLog] = [
            self._group(f"__consumer_offsets-{p}", 1 + p,
                        EntryStore(compact=compact_offsets, compact_every=cfg.raft_compaction_entries,
                                   compact_bytes=cfg.raft_compaction_bytes, background=True))
            for p in range(n)
        ]
        self.txn_logs: list[RaftLog] = [
            self._group(f"{TRANSACTION_TOPIC}-{p}", -1 - p,
                        EntryStore(compact=compact_txn, compact_every=cfg.raft_compaction_entries,
                                   compact_bytes=cfg.raft_compaction_bytes, background=True))
            for p in range(metadata.txn_partitions)
        ]
        self.data_logs: dict[tuple[str, int], RaftLog] = {}
        self._data_slots: dict[tuple[str, int], int] = {}  # the slot (incarnation) each was opened at
        self.state: dict[str, Any] = fold_metadata([])
        self._seen = (-1, -1)
        self._init_sent = False
        self._lowest_for: object = None  # the metadata state lowest_metadata_version was worked out for
        self._lowest = UNREGISTERED_READS
        self._missing = False  # a data partition could not be opened yet (retried)
        self._task: asyncio.Task[None] | None = None
        self._faults_task: asyncio.Task[None] | None = None
        self._register_task: asyncio.Task[None] | None = None
        self._members_task: asyncio.Task[None] | None = None
        self._join_task: asyncio.Task[None] | None = None
        self._leave_task: asyncio.Task[None] | None = None
        self._left = False
        self._handed_over: dict[str, float] = {}  # a removed node: when it last tried to hand each group over
        self.fatal: str | None = None

    # ---------------------------------------------------------------- groups

    def raft_addr(self, peer: Peer, slot: int) -> str:
        """A member's logical address in one group (its identity in the Raft log); messages
        travel through the node's one Raft port (``hub_addr``)."""
        return f"{peer.host}:{peer.raft_port + slot}"

    @staticmethod
    def hub_addr(peer: Peer) -> str:
        return f"{peer.host}:{peer.raft_port}"

    def _group(self, name: str, slot: int, sm: Any, nodes: list[int] | None = None) -> RaftLog:
        """Group ``name`` at ``slot``, created with ``nodes`` as its voters (default: the nodes the
        cluster was formed with). A node that is not one of them starts as no member: it votes
        once its group's log makes it a voter (``replication/raft/membership.py``)."""
        self._slots[name] = slot
        for p in self._known.values():
            self._addr_to_peer[self.raft_addr(p, slot)] = p
        voters = [self._known[i] for i in (self._original if nodes is None else nodes) if i in self._known]
        addrs = [self.raft_addr(p, slot) for p in voters]
        me = self.raft_addr(self.me, slot)
        hubs = {self.raft_addr(p, slot): self.hub_addr(p) for p in self._known.values()}
        members = None if me in addrs else Members(frozenset(addrs), hubs={a: hubs[a] for a in [*addrs, me]})
        preferred = self.raft_addr(self._preferred(slot), slot)
        lg = self.host.add(name, me, [a for a in addrs if a != me], preferred, os.path.join(self.root, name), sm,
                           hubs, members)
        lg.set_node_names({self.raft_addr(p, slot): str(p.node_id) for p in self._known.values()})
        lg.subscribe(lambda change: metrics.set_partition_leadership(
            name, change.is_leader, change.epoch // EPOCH_STRIDE if change.is_leader else change.epoch))
        lg.subscribe(lambda change: self._state_changed())  # its lease holds by the time it announces
        return lg

    def _preferred(self, slot: int) -> Peer:
        """The node a group at ``slot`` prefers as leader: the cluster's nodes taken in turn."""
        voting = self._voting() or self.peers
        return voting[slot % len(voting)]

    def _voting(self) -> list[Peer]:
        """The cluster's nodes that vote (observers follow and count for nothing)."""
        return [p for p in self.peers if p.node_id not in self._observers]

    def _node_of(self, addr: str) -> int | None:
        peer = self._addr_to_peer.get(addr)
        return None if peer is None else peer.node_id

    def leader_of(self, lg: PeerLog) -> Peer | None:
        """The leader to name in Metadata and FindCoordinator, or None (not available): this node
        only while it holds a lease, another only if it is reachable and was heard from lately
        (a node cut off from the others must not keep sending clients to a deposed leader)."""
        if lg.is_leader():
            return self.me if lg.lease_valid() else None
        addr: str | None = lg.leader_address()
        if not addr or addr not in lg.connected_peers() or not lg.leader_heard_lately():
            return None  # unknown, unreachable (it may be dead) or silent: not available
        peer: Peer | None = self._addr_to_peer.get(addr)
        return peer

    def likely_leader_of(self, lg: PeerLog) -> Peer | None:
        """For a node cut off from the others: who leads ``lg`` on the majority side, most
        likely (``replication.raft.log.RaftLog.likely_leader``)."""
        addr = lg.likely_leader()
        return None if addr is None else self._addr_to_peer.get(addr)

    def endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        """Node ``node_id``'s advertised address on ``listener`` (None: not registered)."""
        found = self.state.get("endpoints", {}).get(node_id, {}).get(listener)
        return (str(found[0]), int(found[1])) if found else None

    def register_endpoints(self, listeners: dict[str, list[Any]]) -> None:
        """Record this node's further listeners, its release and the metadata record versions it
        reads in the metadata log once the cluster is formed, and again whenever the log no longer
        says so (a restart with a new configuration or release; a state record written by an
        older node's compaction, which drops what it does not know)."""
        mine = [RELEASE, METADATA_VERSION]

        async def register() -> None:
            while True:
                registered = (self.state["endpoints"].get(self.me.node_id) == listeners
                              and self.state.get("reads", {}).get(self.me.node_id) == mine)
                if not registered and await self.wait_formed(30.0):
                    try:  # then checked again a second later (never a write loop without a pause)
                        await self._change(RegisterEndpoints(self.me.node_id, listeners, RELEASE, METADATA_VERSION))
                    except (ReplicationError, TimeoutError) as e:
                        log.warning("event=endpoints_registration_failed error=%r", str(e))
                await asyncio.sleep(5.0 if registered else 1.0)

        self._register_task = supervised(register(), "register_endpoints")

    def cut_off(self) -> bool:
        """This node has not heard from a majority of the cluster (itself included) within the
        longest election timeout: whatever it knows about leaders elsewhere may be stale, and
        waiting for an election here will not help (it cannot win one, nor hear who did)."""
        since = time.monotonic() - self.host.timings.raft_max_timeout
        heard = {addr for addr, t in list(self.host.hub.heard.items()) if t >= since}
        voting = self._voting()  # an observer's word elects nobody
        counted = sum(1 for p in voting if p.node_id == self.me.node_id or self.hub_addr(p) in heard)
        return counted <= len(voting) // 2

    def broker(self, peer: Peer) -> BrokerInfo:
        host = self.config.advertised if peer.node_id == self.me.node_id else peer.host
        return BrokerInfo(peer.node_id, host, peer.kafka_port)

    def brokers(self) -> list[BrokerInfo]:
        if self.cut_off():
            # It cannot tell who is up; listing only itself made clients (librdkafka) drop the
            # other brokers and ask only it, for leaders it cannot name, until the cut healed.
            return [self.broker(p) for p in self.peers]
        # A node stays listed for broker.session.timeout.ms after its connection dropped, as a
        # Kafka broker stays registered until its session expires (leaders are still named only
        # when reachable): librdkafka decommissions a broker that leaves Metadata, and a
        # transactional producer whose group coordinator it was then waits forever in
        # send_offsets_to_transaction (librdkafka #5511) even when the node is back in seconds.
        connected = self.meta_log.connected_peers()
        now = time.monotonic()
        for p in self.peers:
            if self.raft_addr(p, META_SLOT) in connected:
                self._last_seen[p.node_id] = now
        grace = self.config.broker_session_timeout_ms / 1000
        return [self.broker(p) for p in self.peers
                if p.node_id == self.me.node_id or now - self._last_seen.get(p.node_id, -grace - 1) <= grace]

    def controller_id(self) -> int:
        return (self.leader_of(self.meta_log) or self.me).node_id

    def replica_ids(self) -> list[int]:
        return [p.node_id for p in self.peers]

    def quorum(self) -> QuorumView:
        """The metadata group as this node sees it; the others' progress only if it leads (a
        follower names the leader and the voters, with their progress unknown)."""
        lg = self.meta_log
        d = lg.group.__dict__
        leader = self.leader_of(lg)
        leading = lg.group._isLeader()
        now_ms, mono = int(time.time() * 1000), time.monotonic()
        # copies first: pysyncobj refills these tables when leadership changes
        match = {n.id: int(i) for n, i in list(d["_SyncObj__raftMatchIndex"].items())} if leading else {}
        heard = {n.id: float(t) for n, t in list(d["_SyncObj__lastResponseTime"].items())} if leading else {}
        heard.update(lg.group.learner_heard)
        commit = int(d["_SyncObj__raftCommitIndex"])
        voters = self.host.voters.voters
        # a node joining (an observer among them) votes in the group only once promoted
        voting_members = lg.members().voters
        out_voters: list[ReplicaView] = []
        observers: list[ReplicaView] = []
        for p in self.peers:
            addr = self.raft_addr(p, META_SLOT)
            if p.node_id == self.me.node_id:
                end = int(lg.group._SyncObj__getCurrentLogIndex())
                view = ReplicaView(p.node_id, self.directory, end, now_ms, now_ms if leading or end >= commit else -1)
                voting = self.host.voters.may_vote() and addr in voting_members
                (out_voters if voting else observers).append(view)
                continue
            end = match.get(addr, -1)
            fetched = int(now_ms - (mono - heard[addr]) * 1000) if addr in heard else -1
            if addr not in voting_members:  # joining: an observer (its directory, once it has said it)
                directory = lg.group.learner_dirs.get(addr) or voters.get(p.node_id)
                observers.append(ReplicaView(p.node_id, directory, end, fetched, -1))
                continue
            if addr in lg.group.learners:  # its new disk, catching up; the voter recorded for it still counts
                observers.append(ReplicaView(p.node_id, lg.group.learner_dirs.get(addr), lg.group.learner_match.get(addr, -1),
                                             fetched, -1))
                out_voters.append(ReplicaView(p.node_id, voters.get(p.node_id), -1, -1, -1))
                continue
            out_voters.append(ReplicaView(p.node_id, voters.get(p.node_id), end, fetched,
                                          fetched if end >= commit and end >= 0 else -1))
        leader_id = self.me.node_id if leading else (leader.node_id if leader is not None else -1)
        return QuorumView(leader_id, lg.current_term(), commit, leading, out_voters, observers)

    # ---------------------------------------------------------------- partitions and their leaders

    def offsets_log(self, partition: int) -> RaftLog:
        return self.offsets_logs[partition]

    def offsets_leader(self, partition: int) -> BrokerInfo | None:
        return self._leader_among(self.offsets_logs, partition)

    def _leader_among(self, logs: list[RaftLog], partition: int) -> BrokerInfo | None:
        if not 0 <= partition < len(logs):
            return None
        peer = self.leader_of(logs[partition])
        return self.broker(peer) if peer is not None else None

    def likely_offsets_leader(self, partition: int) -> BrokerInfo | None:
        if not 0 <= partition < len(self.offsets_logs):
            return None
        peer = self.likely_leader_of(self.offsets_logs[partition])
        return self.broker(peer) if peer is not None else None

    async def wait_offsets_leaders(self, partitions: set[int], timeout: float) -> None:
        await self._wait_leaders(self.offsets_logs, partitions, timeout)

    def txn_log(self, partition: int) -> RaftLog:
        return self.txn_logs[partition]

    def txn_leader(self, partition: int) -> BrokerInfo | None:
        return self._leader_among(self.txn_logs, partition)

    async def wait_txn_leaders(self, partitions: set[int], timeout: float) -> None:
        await self._wait_leaders(self.txn_logs, partitions, timeout)

    async def _wait_leaders(self, logs: list[RaftLog], partitions: set[int], timeout: float) -> None:
        # A client asks the moment its coordinator's connection drops, and naming the dead node
        # cost it its reconnect back-off plus librdkafka's one-second coordinator query interval:
        # a leader whose Raft connection has ended counts as none (``_live_leader``).
        # cut_off() is asked at every wake-up: a leader steps down for want of a majority at about
        # the moment it starts to count as cut off, and a hold begun then ran its full timeout.
        try:
            await self._wait(lambda: self.cut_off() or all(self._live_leader(logs, p) for p in partitions),
                             timeout, poll=0.02)
        except TimeoutError:
            pass

    def _live_leader(self, logs: list[RaftLog], partition: int) -> bool:
        """``partition`` has a leader to name, and not one whose connection has just ended: the
        Raft ticker (another thread) may not have read the dead leader's hang-up yet when the
        question comes in the same instant, as it does from librdkafka."""
        if not 0 <= partition < len(logs):
            return False
        peer = self.leader_of(logs[partition])
        return peer is not None and (peer == self.me or not self.host.hub.hung_up(self.hub_addr(peer)))

    def partition_leader(self, topic: str, partition: int) -> tuple[int, int]:
        lg = self.data_logs.get((topic, partition))
        if lg is None:
            return -1, -1
        peer = self.leader_of(lg)
        if peer is None and not lg.is_leader() and self.cut_off():
            # Cut off from the others: name the likely leader on their side (as FindCoordinator
            # does), which answers NOT_LEADER_OR_FOLLOWER and fresh metadata if the guess is wrong;
            # with no epoch (this node's term is not that leader's: a client would be fenced by it,
            # or take it for newer than the true one and ignore the metadata that corrects it)
            guess = self.likely_leader_of(lg)
            return (guess.node_id if guess is not None else -1), -1
        if peer is None:
            return -1, -1
        return peer.node_id, (lg.current_term() if self.epochs_exact() else -1)

    def epochs_exact(self) -> bool:
        """Whether clients are told leader epochs: once every node stamps its batches with the
        Raft term (a release reading metadata version ``EXACT_EPOCHS``). Before, an older leader's
        fence epochs would outrank the terms in Metadata, and Java clients ignore metadata whose
        epoch is older than one they read in a batch; with -1 they skip KIP-320's validation.
        Asked per partition of every Fetch: worked out once per metadata state."""
        return self.lowest_metadata_version() >= EXACT_EPOCHS

    def lowest_metadata_version(self) -> int:
        state = self.state
        if self._lowest_for is not state:
            self._lowest_for = state
            self._lowest = lowest_reads(state, self.replica_ids())
        return self._lowest

    def partition(self, topic: str, partition: int) -> DataPartition | None:
        t = self.metadata.topics.get(topic)
        if t is None or not 0 <= partition < t.partitions:
            return None
        return self.partitions.get(topic, partition)  # opened with its Raft group by the metadata log

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        self.host.start(asyncio.get_running_loop())
        self.host.hub.attach(JOIN_DOOR, _JoinDoor(self), ())
        self._task = supervised(self._follow_metadata(), "metadata")
        self._members_task = supervised(self._reconcile_members(), "members")
        self._leave_task = supervised(self._ask_membership(), "membership")
        if self.config.join:
            self._join_task = supervised(self._ask_to_join(), "join")
        if self.config.raft_fault_injection:
            def hub_of(node: int) -> str | None:  # nodes added since the start too
                peer = self._known.get(node)
                return None if peer is None else self.hub_addr(peer)

            self._faults_task = supervised(link_control.follow(self.config.data_dir, self.host.hub, hub_of),
                                           "raft_faults")

    async def wait_formed(self, timeout: float = 30.0) -> bool:
        """Until this node knows the cluster (metadata applied, its partitions open)."""
        try:
            await self._wait(lambda: self.state["cluster_id"] is not None and not self._missing, timeout)
        except TimeoutError:
            return False
        return True

    def _state_changed(self) -> None:
        """Wake every ``_wait`` now (each holds the event of its turn)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._faults_task is not None:
            self._faults_task.cancel()
        if self._register_task is not None:
            self._register_task.cancel()
        if self._voter_task is not None:
            self._voter_task.cancel()
        for task in (self._members_task, self._join_task, self._leave_task):
            if task is not None:
                task.cancel()
        await asyncio.get_running_loop().run_in_executor(None, self.host.stop)

    async def _follow_metadata(self) -> None:
        while True:
            self._meta_wake.clear()  # before reading: an entry applied from now on wakes the next turn
            version = (self.meta_store.next_offset, len(self.meta_store.base))
            if version != self._seen or self._missing:
                self._seen = version
                try:
                    self.state = fold_metadata([e.payload for e in self.meta_store.entries(0)])
                except MetadataVersionError as e:  # committed: every later entry depends on it
                    fail_stop("metadata", str(e), EXIT_CORRUPT)
                self._apply_state()
                self._state_changed()
            if self.state["cluster_id"] is None and self.meta_log.is_leader() and not self._init_sent:
                self._init_sent = True
                asyncio.create_task(self._init())
            # Woken by the next applied entry; a turn every 50 ms only while forming (the init is
            # retried) or while a partition could not be opened yet.
            forming = self._missing or self.state["cluster_id"] is None
            try:
                await asyncio.wait_for(self._meta_wake.wait(), 0.05 if forming else 5.0)
            except TimeoutError:
                pass

    async def _init(self) -> None:
        try:
            await self.meta_log.submit(encode_change(InitCluster(self.metadata.cluster_id,
                                                                 self.metadata.offsets_partitions,
                                                                 list(self._original))))
        except Exception as e:  # noqa: BLE001 - retried by the follower loop
            log.warning("event=metadata_init_failed error=%r", str(e))
            self._init_sent = False

    def _apply_state(self) -> None:
        state = self.state
        if state["n"] is not None and state["n"] != self.metadata.offsets_partitions:
            self._stop_for_config(f"offsets.topic.num.partitions is {self.metadata.offsets_partitions} here but the "
                                  f"cluster was created with {state['n']}; it can never change")
            return
        if state["cluster_id"] is not None and state["cluster_id"] != self.metadata.cluster_id:
            self.metadata.cluster_id = state["cluster_id"]
            self.metadata.save()
        if not self._track_voters(state):
            return
        if not self._update_nodes(state):
            return
        topics: dict[str, TopicMeta] = {}
        for name, t in state["topics"].items():
            old = self.metadata.topics.get(name)
            tid = uuid.UUID(t["topic_id"])
            if old is not None and old.topic_id == tid:
                if old.configs != t["configs"]:
                    self.partitions.reconfigure(name, dict(t["configs"]))  # altered: applied live
                elif old.partitions == t["partitions"]:
                    topics[name] = old  # unchanged
                    continue
            topics[name] = TopicMeta(name, t["partitions"], tid, dict(t["configs"]))
        self.metadata.replace_topics(topics)
        acls = frozenset(acl_row(x) for x in state["acls"])
        if acls != self.metadata.acls:
            self.metadata.acls = acls
        scram = frozenset(scram_row(x) for x in state["scram"])
        if scram != self.metadata.scram:
            self.metadata.scram = scram
        if state["group_configs"] != self.metadata.group_configs:
            self.metadata.group_configs = dict(state["group_configs"])
        if state["broker_configs"] != self._dynamic:  # before partitions open below, with these defaults
            self._dynamic = self.metadata.broker_configs = dict(state["broker_configs"])
            self.partitions.reconfigure_defaults(
                broker_configs.effective(self.config, self._dynamic.get("", {}),
                                         self._dynamic.get(str(self.me.node_id), {})),
                {name: t.configs for name, t in topics.items()})
        wanted = {(name, p): partition_slot(t, p) for name, t in state["topics"].items() for p in range(t["partitions"])}
        # A topic deleted and created again under its name is a new incarnation (a new slot):
        # the old one's partitions go, with their Raft directories, even if the name stayed.
        for key in [k for k in self.data_logs if wanted.get(k) != self._data_slots.get(k)]:
            lg = self.data_logs.pop(key)
            self._data_slots.pop(key, None)
            self.host.remove(lg, delete_dir=os.path.join(self.root, f"{key[0]}-{key[1]}"))
            self.partitions.drop_partition(*key)
            log.info("event=partition_dropped topic=%s partition=%d", *key)
        self._missing = False
        for key, slot in wanted.items():
            if key not in self.data_logs and self.host.removal_pending(os.path.join(self.root, f"{key[0]}-{key[1]}")):
                self._missing = True  # the old incarnation's group is still being closed: next round
                continue
            if key not in self.data_logs:
                try:
                    nodes = topic_nodes(self._original, state, state["topics"][key[0]])
                    self._open_data(key[0], key[1], slot, topics[key[0]].configs, nodes)
                except ReplicationError as e:
                    self._missing = True
                    log.error("event=partition_open_failed topic=%s partition=%d error=%r", key[0], key[1], str(e))

    # ---------------------------------------------------------------- nodes

    def _update_nodes(self, state: dict[str, Any]) -> bool:
        """The cluster's nodes as the metadata log says: added ones become known (their members'
        addresses in every group), and every group's preferred leader is taken over the new set.
        False (the node stops) if ``peers`` names a node the cluster does not have."""
        unknown = unknown_configured(self.configured, state, self.me.node_id, self.config.join)
        if unknown:
            return self._stop_for_config(
                f"peers names node(s) {unknown}, which the cluster was neither formed with nor added: a new node "
                "joins with join=true and its own peers list; leave the others' as they are")
        self._saved_nodes = save_nodes(self.config.data_dir, state, self._saved_nodes)
        self._known = known_peers(self.configured, state)
        for p in added_peers(state):
            for lg, slot in self._all_groups():
                if self._addr_to_peer.setdefault(self.raft_addr(p, slot), p) is p:
                    lg.name_node(self.raft_addr(p, slot), str(p.node_id))
        self._original = original_ids(self.configured, state, self.me.node_id, self.config.join)
        removed = self.me.node_id in removed_ids(state)
        if removed and not self.host.voters.retiring:
            self._leave()
        ids = {*nodes_at(self._original, state), *(() if removed else (self.me.node_id,))}  # (this node too while it joins)
        missing = sorted(i for i in ids if i not in self._known)
        if missing:
            return self._stop_for_config(
                f"peers does not name node(s) {missing}, which the cluster has had since a node joined it or left it: "
                "give peers every node of the cluster again (a node leaves with kcoord cluster remove-node)")
        peers = [self._known[i] for i in sorted(ids)]
        observers = frozenset(observer_ids(state))
        if peers == self.peers and observers == self._observers:
            return True
        self.peers, self._observers = peers, observers
        log.info("event=cluster_nodes nodes=%s observers=%s", ",".join(str(p.node_id) for p in peers),
                 ",".join(str(n) for n in sorted(observers)) or "-")
        for lg, slot in self._all_groups():
            lg.preferred = self.raft_addr(self._preferred(slot), slot)
        return True

    def _leave(self) -> None:
        """This node was removed from the cluster: it campaigns no more, hands over every group it
        leads (``_member_step``), and stops once another node says every group has committed a
        configuration without it (``member_asked``): a removed member is sent nothing more, so
        it cannot see that itself, and stopping sooner could leave a group short of its majority."""
        if self.host.voters.retiring:
            return
        self.host.voters.retiring = True
        log.warning("event=node_removed node=%d action=hand_over_and_stop detail=%r", self.me.node_id,
                    "this node was removed from the cluster: it stops once every partition has been handed over "
                    "and has taken it out; to bring its machine back, join it as a new node (the next node id, "
                    "an empty data directory)")

    def removal_told(self, sender: str, kind: str) -> None:
        """The hub's door: a node of the cluster says this node was removed ("removed"), or that
        every group has taken it out as well ("left")."""
        if self._node_of_hub(sender) is None:
            return
        if not self.host.voters.retiring:
            self._leave()  # it missed its removal (down meanwhile): it reads it here
        if kind == "left" and not self._left:
            self._left = True
            led = [lg.name for lg, _ in self._all_groups() if lg.is_leader()]
            log.warning("event=node_left node=%d still_leading=%d", self.me.node_id, len(led))
            self._on_fatal(0)

    def member_asked(self, sender: str, message: Any) -> None:
        """The hub's door: a node asks whether it was removed (``_ask_membership``). Answered only
        if it was: "left" once every group this node holds has committed a configuration without
        it (each such commit is on a majority of its group), else "removed"."""
        node = self._node_of_hub(sender)
        if node is None or node not in removed_ids(self.state) or message.get("node") != node:
            return
        peer = self._known[node]
        gone = not self._missing and all(self.raft_addr(peer, slot) not in lg.members().all
                                         and lg.members_committed() for lg, slot in self._all_groups())
        self.host.hub.send(sender, JOIN_DOOR, {"type": "left" if gone else "removed"})
        self.host.wake()

    def _node_of_hub(self, hub: str) -> int | None:
        return next((i for i, p in self._known.items() if self.hub_addr(p) == hub), None)

    async def _ask_membership(self) -> None:
        """Ask the others now and then whether this node was removed: a node that was down when it
        was removed never reads its removal (the metadata group sends a removed member nothing)."""
        while True:
            ask = {"type": "member?", "node": self.me.node_id}
            for p in list(self._known.values()):
                if p.node_id != self.me.node_id:
                    self.host.hub.send(self.hub_addr(p), JOIN_DOOR, ask)
            self.host.wake()
            await asyncio.sleep(2.0 if self.host.voters.retiring else MEMBER_ASK_S)

    def _stop_for_config(self, why: str) -> bool:
        """A configuration this node must not serve with: it stops (exit 2). Returns False."""
        self.fatal = why
        log.error("event=fatal_config error=%r", why)
        self._on_fatal(2)
        return False

    def _all_groups(self) -> list[tuple[RaftLog, int]]:
        groups = [(self.meta_log, META_SLOT), *((lg, 1 + p) for p, lg in enumerate(self.offsets_logs)),
                  *((lg, -1 - p) for p, lg in enumerate(self.txn_logs))]
        return [*groups, *((lg, self._data_slots[key]) for key, lg in list(self.data_logs.items()))]

    def _cluster_ids(self) -> list[int]:
        """The nodes every group should have as voters (not this node while its joining is not recorded)."""
        return nodes_at(self._original, self.state)

    async def _reconcile_members(self) -> None:
        """The leader's side of the cluster's nodes: every group this node leads is moved toward
        the cluster's nodes one server at a time (a new node added as a learner, then promoted
        once it has caught up); a node that asked to join (``_JoinDoor``) is added to the
        metadata log by the metadata group's leader."""
        while True:
            await asyncio.sleep(1.0)
            if self.state["cluster_id"] is None:
                continue
            if self._join_asks and self.meta_log.is_leader():
                await self._admit_joiners()
            wanted = [self._known[i] for i in self._cluster_ids() if i in self._known]
            gone = [self._known[i] for i in removed_ids(self.state) if i in self._known]
            steps = [self._member_step(lg, slot, wanted, gone) for lg, slot in self._all_groups() if lg.is_leader()]
            if steps:
                await asyncio.gather(*steps)

    async def _member_step(self, lg: RaftLog, slot: int, wanted: list[Peer], gone: list[Peer]) -> None:
        """One change of ``lg``'s members toward the cluster's nodes: a new node added as a
        learner, a caught-up learner promoted, then a removed node taken out (this node, if it is
        the one removed, hands the group over instead). Only nodes the metadata log removed are
        taken out: a leader that has not read an addition yet must not take the new node out."""
        want = {self.raft_addr(p, slot): self.hub_addr(p) for p in wanted}
        members = lg.members()
        if self.host.voters.retiring:
            self._hand_over(lg, set(want))
            return
        if not lg.members_committed():
            return
        # A member once taken out is not added back: a leader that has not read a removal yet
        # would otherwise give the group back a voter that is about to stop.
        missing = sorted(set(want) - members.all - lg.left_members())
        held = {self.raft_addr(self._known[n], slot) for n in observer_ids(self.state) if n in self._known}
        ready = sorted(members.learners & set(want) - held)  # an observer waits for its promotion
        extra = sorted(members.all & {self.raft_addr(p, slot) for p in gone} - {lg.self_addr})
        if missing:
            op, addr = ADD_LEARNER, missing[0]
        elif ready:
            op, addr = PROMOTE, ready[0]
        elif extra:
            op, addr = REMOVE, extra[0]
        else:
            return
        try:
            await asyncio.wait_for(lg.change_members(op, addr, want.get(addr)), 5.0)
        except MembershipRefused as e:
            log.debug("event=membership_change_deferred group=%s reason=%r", lg.name, str(e))
        except (ReplicationError, TimeoutError) as e:
            log.info("event=membership_change_failed group=%s op=%s member=%s error=%r action=retry", lg.name, op,
                     addr, str(e))

    def _hand_over(self, lg: RaftLog, staying: set[str]) -> None:
        """A removed node leading ``lg``: hand it to a connected voter that stays, the preferred
        one if it is connected (a down preferred node would keep the group here for good), at
        most every few seconds (each try quiesces the group's appends for a moment)."""
        now = time.monotonic()
        if now - self._handed_over.get(lg.name, float("-inf")) < 3.0:
            return
        voters = lg.members().voters & staying
        connected = voters & lg.connected_peers()
        target = lg.preferred if lg.preferred in connected else min(connected, default=None)
        if target is None:
            return
        self._handed_over[lg.name] = now
        lg.preferred = target
        lg.elect_preferred()

    async def _admit_joiners(self) -> None:
        added = {p.node_id for p in added_peers(self.state)}
        now = time.monotonic()
        for node, (peer, asked, observer) in list(self._join_asks.items()):
            if node in added or now - asked > JOIN_ASK_KEPT_S:  # done, or its node gave up asking
                self._join_asks.pop(node, None)
                continue
            try:
                result = await self._change(AddNode(node, peer.host, peer.kafka_port, peer.raft_port,
                                                    observer=True if observer else None))
            except VersionRefused as e:  # a node of an older release: the joiner waits, and is told why
                self.host.hub.send(f"{peer.host}:{peer.raft_port}", JOIN_DOOR, {"type": "join_deferred", "why": str(e)})
                self.host.wake()
                if now - self._join_warned.get(node, float("-inf")) >= 10.0:
                    self._join_warned[node] = now
                    log.warning("event=node_add_deferred node=%d reason=%r action=retry", node, str(e))
                continue
            except (ReplicationError, TimeoutError) as e:
                if now - self._join_warned.get(node, float("-inf")) >= 10.0:
                    self._join_warned[node] = now
                    log.warning("event=node_add_failed node=%d error=%r action=retry", node, str(e))
                continue
            self._join_asks.pop(node, None)
            if result[0] == "none":
                log.warning("event=node_added node=%d host=%s kafka_port=%d raft_port=%d observer=%s", node,
                            peer.host, peer.kafka_port, peer.raft_port, str(observer).lower())
            else:
                self._refuse_join(peer, str(result[1]))

    def _refuse_join(self, peer: Peer, why: str) -> None:
        """Log a refused join here and tell the node that asked (it logs it too)."""
        log.warning("event=join_refused node=%d reason=%r", peer.node_id, why)
        self.host.hub.send(f"{peer.host}:{peer.raft_port}", JOIN_DOOR, {"type": "join_refused", "why": why})
        self.host.wake()

    def join_asked(self, sender: str, message: Any) -> None:
        """The hub's door: a node asks to join (only the metadata group's leader takes it up)."""
        if not self.meta_log.is_leader() or self.state["cluster_id"] is None:
            return  # it asks every node every few seconds: the leader, once there is one, hears it
        try:
            peer = Peer(int(message["node"]), str(message["host"]), int(message["kafka_port"]),
                        int(message["raft_port"]))
        except (KeyError, TypeError, ValueError):
            log.warning("event=join_refused reason=%r", "a malformed join request")
            return
        nodes = {p.node_id for p in self.peers}
        next_id = self._next_node_id()
        if f"{peer.host}:{peer.raft_port}" != sender:
            why = f"it asks from {sender}, not from the Raft address it gives ({peer.host}:{peer.raft_port})"
        elif not all(0 < port < 65536 for port in (peer.kafka_port, peer.raft_port)):
            why = "invalid ports"
        elif peer.node_id in removed_ids(self.state):
            why = f"node {peer.node_id} was removed from the cluster: a new node takes the next node id, {next_id}"
        elif peer.node_id not in nodes and peer.node_id != next_id:
            why = f"a new node takes the next node id, {next_id}"
        elif peer.node_id in nodes and self._known[peer.node_id] != peer:  # two nodes told the same id
            known = self._known[peer.node_id]
            why = (f"node {peer.node_id} is {known.host}:{known.raft_port} (Kafka port {known.kafka_port}): a new node "
                   f"takes the next node id, {next_id}")
        elif peer.node_id not in nodes and len(nodes) >= MAX_NODES:
            why = f"the cluster has {len(nodes)} nodes, the most it may have"
        elif any(p.host == peer.host and p.node_id != peer.node_id and abs(p.raft_port - peer.raft_port) < RAFT_SPAN
                 for p in self._known.values()):
            # a removed node's too: its groups never take a member back under an address it had
            why = ("its Raft ports overlap another node's on that host, or a removed node's (slots above each node's "
                   "raft_port): give it another raft_port")
        else:
            if self._join_asks.get(peer.node_id, (None, 0.0))[0] != peer:
                log.info("event=join_asked node=%d host=%s kafka_port=%d raft_port=%d", peer.node_id, peer.host,
                         peer.kafka_port, peer.raft_port)
            self._join_asks[peer.node_id] = (peer, time.monotonic(), message.get("observer") is True)
            return
        self._refuse_join(peer, why)

    def _next_node_id(self) -> int:
        """The id a new node takes: a removed node's is never taken again."""
        nodes = {p.node_id for p in self.peers}
        original = {int(n) for n in self.state["original_nodes"] or ()}
        return max({*nodes, *self._known, *removed_ids(self.state), *original}) + 1

    def nodes_asked(self, sender: str) -> None:
        """The hub's door: a node started with only ``bootstrap`` asks for the cluster's nodes and
        its id (cluster/bootstrap.py). Answered by any node that has read the metadata log."""
        if self.state["cluster_id"] is None:
            return
        told = bootstrap.answer(self._next_node_id(), self._known, [p.node_id for p in added_peers(self.state)])
        if told is None:
            now = time.monotonic()
            if now - self._join_warned.get(-2, float("-inf")) >= 60.0:
                self._join_warned[-2] = now
                log.warning("event=bootstrap_unanswered asker=%s reason=%r", sender,
                            "this node does not know every node id (its peers list is shorter than the cluster's)")
            return
        self.host.hub.send(sender, JOIN_DOOR, told)
        self.host.wake()

    def join_refused(self, why: Any, deferred: bool = False) -> None:
        """The joining node's side: the cluster's leader refused this node, or put it off (a node
        of an older release in the cluster; it keeps asking): logged once a minute."""
        now = time.monotonic()
        if now - self._join_warned.get(-1, float("-inf")) >= 60.0:
            self._join_warned[-1] = now
            if deferred:
                log.warning("event=join_deferred node=%d reason=%r action=wait", self.me.node_id, str(why))
                return
            told = os.path.exists(os.path.join(self.config.data_dir, bootstrap.FILE_NAME))  # its id given by bootstrap
            action = "empty_data_dir_and_restart" if told else "fix_and_restart"
            log.error("event=join_refused node=%d reason=%r action=%s", self.me.node_id, str(why), action)

    async def _ask_to_join(self) -> None:
        """A joining node: ask the nodes of ``peers`` to add it, until the metadata log it is sent says so."""
        me = self.me
        ask = {"type": "join", "node": me.node_id, "host": me.host, "kafka_port": me.kafka_port,
               "raft_port": me.raft_port, "observer": not self.config.auto_join}
        started = time.monotonic()
        while me.node_id not in {p.node_id for p in added_peers(self.state)}:
            for p in self.configured:
                if p.node_id != me.node_id:
                    self.host.hub.send(self.hub_addr(p), JOIN_DOOR, ask)
            self.host.wake()
            await asyncio.sleep(2.0)
        log.warning("event=node_joined node=%d after_s=%.1f", me.node_id, time.monotonic() - started)
        # Then every group's leader makes it a learner and promotes it once caught up: said once
        # it votes in every group it has (how long a new node takes to count, for operators and
        # the chaos report).
        while True:
            groups = self._all_groups()
            if groups and all(lg.self_addr in lg.members().voters for lg, _ in groups):
                break
            await asyncio.sleep(1.0)
        log.warning("event=node_promoted node=%d groups=%d after_s=%.1f", me.node_id, len(groups),
                    time.monotonic() - started)

    # ---------------------------------------------------------------- voters

    def _track_voters(self, state: dict[str, Any]) -> bool:
        """Take the voters the metadata log names (votes are filtered by them from now on) and
        see to this replica's place among them: registered, a learner asking to be promoted once
        it caught up, or a replaced directory that must not serve (False: the node stops)."""
        voters = self.host.voters
        if voters.update(state["voters"], int(state["voters_version"])):
            log.info("event=voters_changed version=%d voters=%r", voters.version,
                     {n: d[:8] for n, d in sorted(voters.voters.items())})
        if state["cluster_id"] is None:
            return True
        if self.directory in state["retired"]:
            self.fatal = (f"data_dir {self.config.data_dir} (directory {self.directory}) was node "
                          f"{self.me.node_id}'s voting replica, but the cluster has since replaced it with "
                          f"directory {state['voters'].get(self.me.node_id)}: this is an old copy. Empty the "
                          "directory to rejoin as a new replica")
            log.error("event=stale_replica error=%r", self.fatal)
            self._on_fatal(2)
            return False
        mine = voters.voters.get(self.me.node_id)  # the newest this node knows (voters.json)
        if mine == self.directory:
            if not self._was_voter:
                self._was_voter = True
                voters.fresh = False
                data_dir.mark_voter(self.config.data_dir)
            return True
        if self._was_voter:
            return True  # a fold older than this replica's promotion (a restart): the log catches up
        if self._voter_task is None or self._voter_task.done():
            self._voter_task = supervised(self._become_voter(), "voter")
        return True

    async def _become_voter(self) -> None:
        """Registered as this node's voter (a new cluster, or one from before directory ids), or,
        a learner replacing another directory, once caught up in every group: promoted."""
        started = time.monotonic()
        told = False
        while True:
            replaces = self.host.voters.voters.get(self.me.node_id)
            if replaces == self.directory or self.directory in self.state["retired"]:
                return  # promoted meanwhile, or replaced (_track_voters stops the node)
            if replaces is not None:
                if not told:
                    told = True
                    log.warning("event=replica_learner node=%d directory=%s voter_directory=%s detail=%r",
                                self.me.node_id, self.directory, replaces,
                                "a new or wiped data directory: it catches up before it votes")
                await self._caught_up()
            try:
                result = await self._change(SetVoter(self.me.node_id, self.directory, replaces))
            except (ReplicationError, TimeoutError) as e:  # a leader change or a cut: asked again
                log.warning("event=voter_change_retry error=%r", str(e))
                await asyncio.sleep(1.0)
                continue
            if result[0] == "none":
                break
            log.warning("event=voter_change_refused node=%d directory=%s reason=%r action=retry",
                        self.me.node_id, self.directory, result[1])
        if replaces is None:
            log.info("event=voter_registered node=%d directory=%s", self.me.node_id, self.directory)
        else:
            log.warning("event=replica_promoted node=%d directory=%s replaced=%s caught_up_s=%.1f",
                        self.me.node_id, self.directory, replaces, time.monotonic() - started)

    async def _caught_up(self) -> None:
        """Until every group of this node has applied what its leader had committed when this
        replica started following it, that leader still leading at the same term at least a
        check-quorum timeout later (a deposed leader has stepped down by then: a learner's
        acknowledgements keep none in place), and the metadata log is folded up to date (so every
        topic's groups exist). Catching up has no event of its own: checked every half second."""
        settle = self.host.timings.check_quorum or self.host.timings.raft_max_timeout
        marks: dict[str, tuple[int, int, float]] = {}  # group -> (term, leader's commit, since)
        while True:
            now = time.monotonic()
            logs = [self.meta_log, *self.offsets_logs, *self.txn_logs, *self.data_logs.values()]
            behind = 0
            for lg in logs:
                seen = lg.catch_up()
                if seen is None or not (lg.is_leader() or lg.leader_heard_lately()):
                    behind += 1
                    continue
                applied, commit = seen
                term = lg.current_term()
                mark = marks.get(lg.name)
                if mark is None or mark[0] != term:
                    mark = marks[lg.name] = (term, commit, now)
                if applied < mark[1] or now - mark[2] < settle:
                    behind += 1
            folded = (self.meta_store.next_offset, len(self.meta_store.base)) == self._seen
            if behind == 0 and folded and not self._missing:
                return
            await asyncio.sleep(0.5)

    def _open_data(self, topic: str, partition: int, slot: int, configs: dict[str, str], nodes: list[int]) -> None:
        # A node that was down while the topic was deleted and created again still holds the old
        # incarnation's directories: they must not be replayed into the new topic.
        incarnation = f"slot-{slot}"
        claim_dir(os.path.join(self.root, f"{topic}-{partition}"), incarnation)
        settle_install(self.partitions.directory(topic, partition))  # before the claim re-creates it
        claim_dir(self.partitions.directory(topic, partition), incarnation)
        part = self.partitions.open(topic, partition, configs)
        sm = DataStateMachine(part.data, lambda: self.host.call_in_loop(part.applied))
        lg = self._group(f"{topic}-{partition}", slot, sm, nodes)
        self.data_logs[(topic, partition)] = lg
        self._data_slots[(topic, partition)] = slot
        part.attach(lg, self.epochs_exact)

    # ---------------------------------------------------------------- topics

    async def _submit(self, payload: bytes, timeout: float = 8.0) -> None:
        """Submit a metadata operation, riding out a leader election or transfer meanwhile (a copy
        that failed may have committed all the same: the entry's id makes it count once): tried
        again when a leader is seen or the metadata changes (at most every half second). An
        entry over the limit fails at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            changed = self._changed  # the event of this turn: set by whatever happens from now on
            try:
                await self.meta_log.submit(payload)
                return
            except EntryTooLargeError:
                raise
            except ReplicationError:
                left = deadline - loop.time()
                if left <= 0:
                    raise
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), min(0.5, left))

    async def _change(self, record: Change) -> Any:
        """Make one metadata change and wait until this node has applied it; its result (``fold_metadata``).
        The change keeps one id through every resubmission, so it is applied at most once."""
        # every node must read it, but the one a removal takes out (a dead node of an older release can go)
        nodes = [i for i in self.replica_ids() if not (isinstance(record, RemoveNode) and i == record.node)]
        refusal = version_refusal(self.state, nodes, record_version(record))
        if refusal is not None:  # an older node would stop on it: the upgrade is not finished
            raise VersionRefused(refusal)
        change = uuid.uuid4().hex
        await self._submit(encode_change(record, change, self.state["seq"]))
        await self._wait(lambda: change in self.state["applied"] or change in self.state["refused"])
        state = self.state
        if change in state["refused"]:
            raise ReplicationError(state["refused"][change])
        if change not in state["results"]:  # RESULTS_KEPT later changes applied before this node looked
            raise ReplicationError("the metadata change was applied; its outcome is no longer known")
        return state["results"][change]

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta:
        topic_id = str(uuid.uuid4())
        await self._change(CreateTopic(name, partitions, topic_id, dict(configs), self.config.max_partitions))
        await self._wait(lambda: topic_id in self.state["refused"] or name in self.metadata.topics and all(
            (name, p) in self.data_logs for p in range(partitions)))
        refusal = self.state["refused"].get(topic_id)
        if refusal is not None:
            raise PartitionLimitError(refusal)
        # Answer once every partition has a leader, as Kafka's controller does for new topics.
        await self._wait(lambda: all(self.leader_of(self.data_logs[(name, p)]) is not None
                                     for p in range(partitions) if (name, p) in self.data_logs))
        created: TopicMeta | None = self.metadata.topics.get(name)
        if created is None:  # deleted again meanwhile by another client (found by the fuzzer)
            raise ReplicationError(f"topic {name} was deleted while it was being created")
        return created

    async def remove_node(self, node_id: int, directory: str | None) -> tuple[str, str | None]:
        # One node at a time: another removal still under way (its node still a member of a group
        # here) could leave a group with no majority once both nodes have stopped.
        for other in removed_ids(self.state):
            peer = self._known.get(other)
            if peer is None:
                continue
            pending = next((lg.name for lg, slot in self._all_groups()
                            if self.raft_addr(peer, slot) in lg.members().all), None)
            if pending is not None:
                return "request_timed_out", (f"node {other}'s removal is still under way ({pending} still has it): "
                                             "remove one node at a time")
        # The groups take the node out with a majority of the nodes left: refused while those up
        # are not one (each group would wait there, the node handing over and never leaving).
        left = [n for n in self._cluster_ids() if n != node_id and n not in self._observers]
        connected = self.meta_log.connected_peers()
        up = sorted(n for n in left if n == self.me.node_id
                    or n in self._known and self.raft_addr(self._known[n], META_SLOT) in connected)
        if left and len(up) <= len(left) // 2 and node_id in self._cluster_ids():
            return "invalid_request", (f"removing node {node_id} would leave nodes {left}, of which only {up} are up "
                                       "(seen from this node): not a majority. Start the nodes that are down first, "
                                       "or remove a node that is down")
        result = await self._node_change(RemoveNode(node_id, directory))
        if result[0] == "none":
            log.warning("event=node_removal_recorded node=%d", node_id)
        return result

    async def _node_change(self, record: RemoveNode | PromoteNode) -> tuple[str, str | None]:
        """A change of the cluster's nodes, answered as a Kafka error's name and a message."""
        try:
            result = await self._change(record)
        except VersionRefused as e:
            return "unsupported_version", str(e)
        except (ReplicationError, TimeoutError) as e:
            return "request_timed_out", str(e)
        return str(result[0]), None if result[1] is None else str(result[1])

    async def promote_node(self, node_id: int, directory: str | None, timeout: float) -> tuple[str, str | None]:
        asked = time.monotonic()
        result = await self._node_change(PromoteNode(node_id, directory))
        if result[0] != "none":
            return result
        log.warning("event=node_promotion_recorded node=%d", node_id)
        # As Kafka answers once the new voter set is committed: here once the metadata group's
        # leader has promoted it (each group does once the node has caught up there).
        peer = self._known.get(node_id)
        if peer is None or timeout <= 0:  # (not to wait: acknowledged once recorded)
            return "none", None
        addr = self.raft_addr(peer, META_SLOT)
        try:
            await self._wait(lambda: addr in self.meta_log.members().voters and self.meta_log.members_committed(),
                             max(timeout - (time.monotonic() - asked), 0.0))
        except TimeoutError:
            return "request_timed_out", (f"node {node_id}'s promotion is recorded; the metadata group has not "
                                         f"counted its vote within {timeout:.0f}s (it is still catching up)")
        return "none", None

    async def allocate_producer_id_block(self) -> int:
        """The first id of a block of PID_BLOCK producer ids granted to this node by the metadata log."""
        request = str(uuid.uuid4())
        await self._change(GrantPidBlock(self.me.node_id, request))

        def granted() -> bool:  # self.state: the metadata log as _follow_metadata last folded it
            grant = self.state["pid_grants"].get(self.me.node_id)
            return grant is not None and grant[0] == request

        await self._wait(granted)
        return int(self.state["pid_grants"][self.me.node_id][1])

    async def create_acls(self, rows: list[AclRow]) -> None:
        await self._change(ChangeAcls(create=[list(x) for x in rows]))

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclRow]]:
        matched = await self._change(ChangeAcls(filters=[filter_fields(f) for f in filters]))
        return [[acl_row(x) for x in m] for m in matched]

    async def alter_scram(self, change: list[ScramRow]) -> None:
        await self._change(ChangeScram([list(x) for x in change]))

    async def alter_topic_configs(self, topic: TopicMeta, ops: list[Op], replace: bool) -> list[str | None]:
        """Alter a topic's config overrides through the metadata log; ["none"] or an error's name
        and message, as the change was folded (``AlterTopicConfigs``)."""
        result = await self._change(AlterTopicConfigs(topic.name, str(topic.topic_id), [list(o) for o in ops],
                                                      replace, self.config.message_max_bytes))
        return list(result)

    async def alter_broker_configs(self, broker: str, ops: list[Op], replace: bool) -> list[str | None]:
        """Alter a node's (or the cluster's) dynamic settings through the metadata log; ["none"] or
        an error's name and message, as the change was folded (``AlterBrokerConfigs``)."""
        return list(await self._change(AlterBrokerConfigs(broker, [list(o) for o in ops], replace)))

    async def alter_group_configs(self, group: str, ops: list[Op], replace: bool) -> list[str | None]:
        """Alter a group's own configs through the metadata log; ["none"] or an error's name and
        message, as the change was folded (``AlterGroupConfigs``)."""
        lim = {k: list(v) for k, v in node_limits(self.config).items()}
        return list(await self._change(AlterGroupConfigs(group, [list(o) for o in ops], replace, lim)))

    async def create_partitions(self, topic: TopicMeta, count: int) -> list[str | None]:
        """Grow ``topic`` to ``count`` partitions through the metadata log; ["none"] once this node
        has opened the new ones and each has a leader, else an error's name and message."""
        result = list(await self._change(CreatePartitions(topic.name, str(topic.topic_id), count,
                                                           self.config.max_partitions)))
        if result[0] == "none":  # committed: answered as done, once the new partitions have leaders or soon after
            with contextlib.suppress(TimeoutError):
                await self._wait(lambda: all((topic.name, p) in self.data_logs and self.leader_of(
                    self.data_logs[(topic.name, p)]) is not None for p in range(count)), timeout=5.0)
        return result

    async def elect_preferred(self, topic: str, partition: int, timeout: float) -> tuple[str, Peer | None]:
        """ElectLeaders (preferred) for one data partition: ("none", _) once its preferred node
        leads, ("election_not_needed", _) if it does already, ("forward", leader) if another node
        leads it (only the leader can hand leadership over), or the error's name."""
        lg = self.data_logs.get((topic, partition))
        if lg is None:
            return "unknown_topic_or_partition", None
        slot = self._data_slots[(topic, partition)]
        preferred = self._preferred(slot)
        leader = self.leader_of(lg)
        if leader is not None and leader.node_id == preferred.node_id:
            return "election_not_needed", None
        if leader is None or not lg.is_leader():
            return ("forward", leader) if leader is not None else ("preferred_leader_not_available", None)
        if self.raft_addr(preferred, slot) not in lg.connected_peers():
            return "preferred_leader_not_available", None
        if not lg.elect_preferred():
            return "preferred_leader_not_available", None
        try:
            # a transfer takes well under a second; one that did not happen is not waited out
            await self._wait(lambda: (now := self.leader_of(lg)) is not None and now.node_id == preferred.node_id,
                             timeout=min(timeout, ELECT_WAIT_S))
        except TimeoutError:
            return "request_timed_out", None
        return "none", None

    async def delete_topic(self, name: str) -> TopicMeta | None:
        t = self.metadata.topics.get(name)
        if t is None:
            return None
        deleted = await self._change(DeleteTopic(name, str(t.topic_id)))
        return t if deleted else None  # None: the topic it saw was gone already (perhaps created again)

    async def _wait(self, cond: Callable[[], bool], timeout: float = 10.0, poll: float = 0.05) -> None:
        """Until ``cond()``, checked at every metadata change and whenever a group here learns of
        a leader; every ``poll`` seconds too, for what changes without an event (a leader's lease
        taking hold, a peer's connection or silence)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not cond():
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError("metadata change not applied in time")
            try:
                await asyncio.wait_for(self._changed.wait(), min(left, poll))
            except TimeoutError:
                pass



if TYPE_CHECKING:
    from cluster.topology import Topology

    _conforms: type[Topology] = RaftCluster
