"""Prometheus metrics of a node (served by ``cluster.metrics_http`` when ``metrics_port`` is set).

Series (all prefixed ``kcoord_``):

* ``requests_total{api}``, ``request_errors_total{api,error}``, ``request_duration_seconds{api}``:
  every request by API (errors = non-zero error codes found in the response, handler crashes,
  unsupported versions, closed connections) — fed by ``cluster.dispatch``;
* ``groups{state}``, ``group_members``, ``coordinator_shards{state}``: kept by ``GroupCounts`` from
  the coordinator runtime's ``GroupsObserved`` effects and the shards' lifecycle, as the driver
  interprets them (a step reports only the groups whose state or member count it changed);
* ``rebalances_total``, ``rebalance_duration_seconds``: a rebalance starts when a group leaves
  Stable/Empty and ends when it is Stable or Empty again, in coordinator time, from the same events;
* ``commit_latency_seconds{outcome}``: time from handing a coalesced entry of ``__consumer_offsets``
  records to the replicated log until it is committed (or fails);
* ``shard_load_seconds`` and ``shard_last_load_seconds{partition}``: rebuilding a shard by replay;
* ``partition_leader{partition}``, ``partition_term{partition}``: set by the replication layer
  through ``set_partition_leadership(name, is_leader, term)``;
* ``open_fds``, ``open_fds_limit``, ``fd_budget_max_partitions``: descriptors in use at the node's
  last check, its open-file limit, and the partitions that limit holds (``cluster.fd_budget``).

The metrics live in this module's ``REGISTRY`` (one node per process in production; several
in-process nodes share it).
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from coordinator.group_census import GroupView

log = logging.getLogger("kcoord.metrics")

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)

API_NAMES: dict[int, str] = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit",
    29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 32: "DescribeConfigs", 33: "AlterConfigs",
    35: "DescribeLogDirs", 36: "SaslAuthenticate", 37: "CreatePartitions", 42: "DeleteGroups", 43: "ElectLeaders",
    44: "IncrementalAlterConfigs", 47: "OffsetDelete", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 55: "DescribeQuorum", 60: "DescribeCluster", 61: "DescribeProducers",
    65: "DescribeTransactions", 66: "ListTransactions", 68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe",
    75: "DescribeTopicPartitions", 80: "AddRaftVoter", 81: "RemoveRaftVoter",
}

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_REBALANCE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

REQUESTS = Counter("kcoord_requests", "Requests handled, by API", ["api"], registry=REGISTRY)
REQUEST_ERRORS = Counter("kcoord_request_errors", "Non-zero error codes in responses and failed requests, by API",
                         ["api", "error"], registry=REGISTRY)
REQUEST_DURATION = Histogram("kcoord_request_duration_seconds", "Time to handle a request, by API", ["api"],
                             buckets=_LATENCY_BUCKETS, registry=REGISTRY)
REBALANCES = Counter("kcoord_rebalances", "Completed group rebalances", registry=REGISTRY)
REBALANCE_DURATION = Histogram("kcoord_rebalance_duration_seconds",
                               "From a group leaving Stable/Empty until it is Stable or Empty again",
                               buckets=_REBALANCE_BUCKETS, registry=REGISTRY)
COMMIT_LATENCY = Histogram("kcoord_commit_latency_seconds",
                           "Append of coordinator records to __consumer_offsets until committed by the log",
                           ["outcome"], buckets=_LATENCY_BUCKETS, registry=REGISTRY)
SHARD_LOAD = Histogram("kcoord_shard_load_seconds", "Rebuilding a coordinator shard from its log",
                       buckets=_LATENCY_BUCKETS, registry=REGISTRY)
SHARD_LAST_LOAD = Gauge("kcoord_shard_last_load_seconds", "Duration of the last load of each shard",
                        ["partition"], registry=REGISTRY)
PARTITION_LEADER = Gauge("kcoord_partition_leader", "1 if this node leads the replicated partition",
                         ["partition"], registry=REGISTRY)
TXN_OPEN = Gauge("kcoord_transactions_open",
                 "Transactions this node coordinates that are open or decided but not yet complete",
                 registry=REGISTRY)
TXN_ENDED = Counter("kcoord_transactions_ended", "Transactions completed here (every marker written), by result",
                    ["result"], registry=REGISTRY)
TXN_REQUESTS = Counter("kcoord_transaction_requests", "Requests of the transaction protocol, by API and protocol "
                       "version (1: clients add partitions themselves; 2: KIP-890's, leaders add them)",
                       ["api", "protocol"], registry=REGISTRY)
PARTITION_TERM = Gauge("kcoord_partition_term", "Raft term (leader epoch) this node knows for the partition",
                       ["partition"], registry=REGISTRY)
OPEN_FDS = Gauge("kcoord_open_fds", "Descriptors the node has open, at its last check (every 10 s and each "
                 "topic creation)", registry=REGISTRY)
OPEN_FDS_LIMIT = Gauge("kcoord_open_fds_limit", "The node's open-file limit (RLIMIT_NOFILE, raised to the hard "
                       "limit at start)", registry=REGISTRY)
FD_BUDGET_PARTITIONS = Gauge("kcoord_fd_budget_max_partitions", "max_partitions as the open-file limit bounds it",
                             registry=REGISTRY)


def api_name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"api_{api_key}")


# ------------------------------------------------------------------ requests (cluster.dispatch)

_ERROR_FIELDS: dict[type, tuple[bool, tuple[str, ...]]] = {}


def _shape(cls: type) -> tuple[bool, tuple[str, ...]]:
    """(has an ``error_code`` field, names of the other fields) of a kio message class, cached."""
    shape = _ERROR_FIELDS.get(cls)
    if shape is None:
        names = tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else ()
        shape = ("error_code" in names, tuple(n for n in names if n != "error_code"))
        _ERROR_FIELDS[cls] = shape
    return shape


def _error_codes(obj: Any, depth: int = 0) -> Iterator[Any]:
    """Non-zero ``error_code`` values of a response and of its nested entries (groups, topics, partitions)."""
    has_error, others = _shape(type(obj))
    if has_error:
        code = obj.error_code
        if code:
            yield code
    if depth >= 3:
        return
    for name in others:
        value = getattr(obj, name, None)
        if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            for item in value:
                yield from _error_codes(item, depth + 1)


_CHILDREN: dict[int, tuple[Any, Any]] = {}
# Hot APIs whose responses are walked only at the top level (the full walk cost ~5 % of a node's CPU).
_SHALLOW = frozenset({0, 1, 8, 12, 68})  # Produce, Fetch, OffsetCommit, Heartbeat, ConsumerGroupHeartbeat


def observe_request(api_key: int, seconds: float, response: Any, failure: str | None = None) -> None:
    children = _CHILDREN.get(api_key)
    if children is None:  # labels() takes a lock each call: resolve the children once per API
        api = api_name(api_key)
        children = _CHILDREN[api_key] = (REQUESTS.labels(api), REQUEST_DURATION.labels(api))
    children[0].inc()
    children[1].observe(seconds)
    api = api_name(api_key)
    if failure is not None:
        REQUEST_ERRORS.labels(api, failure).inc()
    if response is not None and api_key in _SHALLOW:
        code = getattr(response, "error_code", None)
        if code:
            REQUEST_ERRORS.labels(api, getattr(code, "name", str(code))).inc()
    elif response is not None:
        try:
            for code in _error_codes(response):
                REQUEST_ERRORS.labels(api, getattr(code, "name", str(code))).inc()
        except Exception:  # noqa: BLE001 - metrics must never break a request
            log.debug("event=metrics_error_walk_failed api=%s", api, exc_info=True)


def count_error(api_key: int, error: str) -> None:
    """A request that never reached a handler (unsupported version, undecodable body)."""
    api = api_name(api_key)
    REQUESTS.labels(api).inc()
    REQUEST_ERRORS.labels(api, error).inc()


# ------------------------------------------------------------------ coordinator (cluster.coordinator_driver)


def observe_commit(seconds: float, ok: bool) -> None:
    COMMIT_LATENCY.labels("committed" if ok else "failed").observe(seconds)


def observe_shard_load(partition: int, seconds: float) -> None:
    SHARD_LOAD.observe(seconds)
    SHARD_LAST_LOAD.labels(str(partition)).set(seconds)


def set_open_transactions(n: int) -> None:
    TXN_OPEN.set(n)


def count_transaction_request(api: str, protocol: int) -> None:
    """A request of transaction protocol ``protocol``: a client's AddPartitionsToTxn, AddOffsetsToTxn,
    EndTxn or TxnOffsetCommit, or a partition leader's add for a version 2 client."""
    TXN_REQUESTS.labels(api, str(protocol)).inc()


def count_transaction_end(commit: bool) -> None:
    TXN_ENDED.labels("committed" if commit else "aborted").inc()


def set_partition_leadership(name: str, is_leader: bool, term: int) -> None:
    """For the replication layer: this node's view of partition ``name`` (e.g. ``__consumer_offsets-3``)."""
    PARTITION_LEADER.labels(name).set(1 if is_leader else 0)
    PARTITION_TERM.labels(name).set(term)


def set_fd_budget(limit: int | None, max_partitions: int) -> None:
    if limit is not None:
        OPEN_FDS_LIMIT.set(limit)
    FD_BUDGET_PARTITIONS.set(max_partitions)


def set_open_fds(n: int) -> None:
    OPEN_FDS.set(n)


class GroupCounts:
    """Groups by state, members and shards by runtime state of one coordinator driver, kept up to
    date from the events the driver hands over (``GroupsObserved`` effects, shard lifecycle) on its
    event loop; a scrape only reads the totals. Rebalances are counted as the events show a group
    leaving Stable/Empty and reaching Stable or Empty again, timed in coordinator time."""

    _ACTIVE = ("PreparingRebalance", "CompletingRebalance")

    def __init__(self) -> None:
        self._groups: dict[int, dict[str, tuple[str, int]]] = {}  # partition -> group -> (state, members)
        self.states: dict[str, int] = {}
        self.members = 0
        self.shards: dict[int, str] = {}  # partition -> runtime state name
        self._started: dict[str, int] = {}  # group -> coordinator time (ms) its rebalance began

    def observe(self, partition: int, views: Iterable[GroupView], reset: bool) -> None:
        known = self._groups.setdefault(partition, {})
        if reset:
            for group_id in list(known):
                self._drop(known, group_id)
                self._started.pop(group_id, None)
        for v in views:
            self._drop(known, v.group_id)
            if v.state is None:
                self._started.pop(v.group_id, None)
                continue
            known[v.group_id] = (v.state, v.members)
            self.states[v.state] = self.states.get(v.state, 0) + 1
            self.members += v.members
            if not reset:
                self._rebalance(v)
        if not known:
            del self._groups[partition]

    def _drop(self, known: dict[str, tuple[str, int]], group_id: str) -> None:
        old = known.pop(group_id, None)
        if old is not None:
            self.states[old[0]] -= 1
            self.members -= old[1]

    def _rebalance(self, v: GroupView) -> None:
        if v.state in self._ACTIVE:
            if v.group_id not in self._started and v.since_ms is not None:
                self._started[v.group_id] = v.since_ms
        elif v.group_id in self._started:
            began = self._started.pop(v.group_id)
            if v.state in ("Stable", "Empty"):
                REBALANCES.inc()
                REBALANCE_DURATION.observe(max(0, (v.since_ms or began) - began) / 1000)

    def shard_state(self, partition: int, state: str | None) -> None:
        if state is None:
            self.shards.pop(partition, None)
        else:
            self.shards[partition] = state


_counts: weakref.WeakSet[GroupCounts] = weakref.WeakSet()


def group_counts() -> GroupCounts:
    """A driver's counts, included in every scrape while the driver keeps them."""
    counts = GroupCounts()
    _counts.add(counts)
    return counts


class GroupCollector(Collector):
    """Scrape-time totals of every driver's ``GroupCounts`` (read from the HTTP server's thread:
    plain copies of ints and small dicts, nothing scanned, nothing run on the event loop)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        states: dict[str, int] = {s: 0 for s in ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable")}
        members = 0
        shards: dict[str, int] = {}
        for counts in list(_counts):
            for k, v in dict(counts.states).items():
                states[k] = states.get(k, 0) + v
            members += counts.members
            for st in dict(counts.shards).values():
                shards[st] = shards.get(st, 0) + 1
        g = GaugeMetricFamily("kcoord_groups", "Groups of the shards this node serves, by state", labels=["state"])
        for k, v in sorted(states.items()):
            g.add_metric([k], v)
        yield g
        yield GaugeMetricFamily("kcoord_group_members", "Members of the groups this node coordinates", value=members)
        sg = GaugeMetricFamily("kcoord_coordinator_shards", "Coordinator shards on this node, by runtime state",
                               labels=["state"])
        for k, v in sorted(shards.items()):
            sg.add_metric([k], v)
        yield sg


REGISTRY.register(GroupCollector())
