"""Differential tests against Apache Kafka: one scenario, two servers, the answers compared.

A scenario is a small function over a ``Session``: it sends raw requests (kio bodies, any
version) and records each answer under a label. The same scenario runs against a kcoord cluster
and a Kafka 4.4 cluster (three nodes each); each answer is flattened into ``path -> value`` and
what a server chooses is replaced by symbols numbered in order of first appearance, per run
(``Symbols``): member ids, producer ids, node ids, hosts and ports, cluster ids, topic ids,
timestamps. Throttle times are dropped and error messages compared only for presence (their
wording is the server's). Two runs agree when their flattened answers are equal; every path
that differs is a difference, which the test either finds in its list of documented ones
(``docs/compatibility.md``) or reports.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from collections.abc import Callable
from typing import Any

from tests.wire.raw import RawConn

# field name -> symbol kind; values of these fields are the server's to choose
SYMBOLIC: dict[str, str] = {
    "member_id": "member", "leader": "member", "producer_id": "pid", "node_id": "node", "leader_id": "node",
    "coordinator_id": "node", "controller_id": "node", "replica_nodes": "node", "isr_nodes": "node",
    "broker_id": "node", "host": "host", "port": "port", "cluster_id": "cluster", "topic_id": "topic-id",
    "replica_id": "node", "last_fetch_timestamp": "time", "last_caught_up_timestamp": "time",
    "replica_directory_id": "dir", "offline_replicas": "node", "eligible_leader_replicas": "node",
    "last_known_elr": "node", "leader_epoch": "epoch", "current_leader": "node", "log_dir": "log-dir",
    "usable_bytes": "bytes", "total_bytes": "bytes",  # a disk's, measured a moment apart
}
PLACED = frozenset({"node", "host", "port"})
RETRIABLE = frozenset({"coordinator_load_in_progress", "coordinator_not_available", "not_coordinator"})
DROPPED = frozenset({"throttle_time", "throttle_time_ms"})
MESSAGE_FIELDS = frozenset({"error_message"})


class Symbols:
    """What one run's server chose, numbered in order of first appearance (so two servers that
    choose differently but consistently flatten alike)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, Any], str] = {}
        self._count: dict[str, int] = {}

    def of(self, kind: str, value: Any) -> str:
        if value in (None, "", -1):
            return repr(value)
        if kind in PLACED:
            return f"<{kind}>"  # which node serves what is the server's placement, not numbered
        key = (kind, value)
        if key not in self._seen:
            self._count[kind] = self._count.get(kind, 0) + 1
            self._seen[key] = f"<{kind}#{self._count[kind]}>"
        return self._seen[key]


def flatten(obj: Any, symbols: Symbols, path: str = "", kind: str | None = None) -> dict[str, Any]:
    """``path -> value`` of a kio entity (dataclasses, tuples, enums, timedeltas, UUIDs)."""
    out: dict[str, Any] = {}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            if f.name.startswith("__") or f.name in DROPPED:
                continue
            value = getattr(obj, f.name)
            sub = f"{path}.{f.name}" if path else f.name
            if f.name in MESSAGE_FIELDS:
                out[sub] = None if not value else "<message>"
            else:
                out.update(flatten(value, symbols, sub, SYMBOLIC.get(f.name)))
        return out
    if isinstance(obj, (tuple, list)):
        if not obj:
            out[path] = "[]"
        named = all(dataclasses.is_dataclass(x) and isinstance(getattr(x, "name", None), str) for x in obj)
        for i, item in enumerate(obj):  # entries with a name (configs) by name: their order is the server's
            out.update(flatten(item, symbols, f"{path}[{item.name if named else i}]", kind))
        return out
    if kind is not None:
        value = obj.value if isinstance(obj, enum.Enum) else obj
        out[path] = symbols.of(kind, str(value) if isinstance(value, uuid.UUID) else value)
        return out
    if isinstance(obj, enum.Enum):
        out[path] = obj.name if hasattr(obj, "name") else obj.value
    elif isinstance(obj, datetime.timedelta):
        out[path] = int(obj.total_seconds() * 1000)
    elif isinstance(obj, uuid.UUID):
        out[path] = str(obj)
    elif isinstance(obj, (bytes, bytearray)):
        out[path] = f"<{len(obj)} bytes>"
    else:
        out[path] = obj.value if hasattr(obj, "value") and not isinstance(obj, (int, str, float, bool)) else obj
    return out


class Session:
    """One scenario's requests against one server: any node, or the coordinator of a group."""

    def __init__(self, bootstrap: str, name: str, sasl: str | None = None) -> None:
        self.bootstrap = bootstrap.split(",")[0]
        self.sasl = sasl  # a SASL_PLAINTEXT listener's address (a secured pair of servers), else None
        self.name = name  # the scenario's: its groups and topics are named after it
        self.symbols = Symbols()
        self.answers: dict[str, Any] = {}
        self._conns: dict[str, RawConn] = {}
        self._own: list[RawConn] = []  # connections opened for one principal (``connect``)

    def conn(self, address: str) -> RawConn:
        if address not in self._conns:
            self._conns[address] = RawConn(address, timeout=30.0)
        return self._conns[address]

    def connect(self, address: str) -> RawConn:
        """A connection of its own (closed with the session), e.g. to authenticate as someone."""
        conn = RawConn(address, timeout=30.0)
        self._own.append(conn)
        return conn

    def login(self, label: str, user: str, password: str, address: str | None = None) -> RawConn:
        """A connection to the SASL listener (``address``, or the session's), authenticated as
        ``user`` with PLAIN; the handshake and authentication answers recorded under ``label``."""
        from cluster.apis.common import req_mod

        assert self.sasl is not None, "a secured scenario: the session has a SASL listener"
        conn = self.connect(address or self.sasl)
        self.ask(f"{label}.handshake", 17, 1, req_mod(17, 1).SaslHandshakeRequest(mechanism="PLAIN"), via=conn)
        self.ask(f"{label}.authenticate", 36, 2, req_mod(36, 2).SaslAuthenticateRequest(
            auth_bytes=f"\0{user}\0{password}".encode()), via=conn)
        return conn

    def ask(self, label: str, api_key: int, version: int, body: Any, *, to: str | None = None,
            only: Callable[[Any], Any] | None = None, via: RawConn | None = None) -> Any:
        """Send ``body`` (on ``via``, else to ``to`` or the bootstrap node); record its answer under
        ``label`` (flattened; ``only(answer)`` of it, when given: what concerns this scenario of an
        answer about the whole server) and return it."""
        try:
            resp = (via or self.conn(to or self.bootstrap)).call(api_key, version, body)
        except (ConnectionError, OSError):
            resp = None  # closed by the server
        kept = resp if resp is None or only is None else only(resp)
        if kept is None:
            self.answers[label] = "<closed>"
        else:
            self.record(label, kept)
        return resp

    def record(self, label: str, resp: Any) -> None:
        """Record an answer got otherwise (a scenario's own loop) under ``label``."""
        self.answers.update({f"{label}.{k}" if k else label: v for k, v in flatten(resp, self.symbols).items()})

    def ask_settled(self, label: str, api_key: int, version: int, body: Any, *, to: str | None = None,
                    tries: int = 50, done: Callable[[Any], bool] = lambda _resp: True,
                    via: RawConn | None = None) -> Any:
        """``ask``, first waiting out the retriable answers a server gives while it warms up
        (a coordinator loading or not yet there), and until ``done`` (Kafka 4 answers some reads
        from its last committed state, a moment behind the write just acknowledged): only the
        settled answer is recorded."""
        import time

        for _ in range(tries):
            resp = (via or self.conn(to or self.bootstrap)).call(api_key, version, body)
            codes = {v for k, v in flatten(resp, Symbols()).items() if k.endswith("error_code")}
            if not codes & RETRIABLE and done(resp):
                break
            time.sleep(0.2)
        return self.ask(label, api_key, version, body, to=to, via=via)

    def coordinator(self, key: str, key_type: int = 0) -> str:
        """The address of ``key``'s coordinator (asked, not recorded), waiting out a load."""
        import time

        from cluster.apis.common import req_mod

        m = req_mod(10, 3)
        probe = req_mod(15, 5)  # DescribeGroups: the coordinator serves the group (a fresh Kafka's may not yet)
        for _ in range(150):
            r = self.conn(self.bootstrap).call(10, 3, m.FindCoordinatorRequest(key=key, key_type=key_type))
            if int(r.error_code) == 0:
                address = f"{r.host}:{r.port}"
                if key_type != 0:
                    return address
                d = self.conn(address).call(15, 5, probe.DescribeGroupsRequest(groups=(key,),
                                                                              include_authorized_operations=False))
                if int(d.groups[0].error_code) == 0:
                    return address
            time.sleep(0.2)
        raise AssertionError(f"no coordinator for {key}")

    def close(self) -> None:
        for c in [*self._conns.values(), *self._own]:
            c.close()


Scenario = Callable[[Session], None]
SCENARIOS: dict[str, Scenario] = {}
SECURED: dict[str, Scenario] = {}  # run against a pair of servers with SASL users and an authorizer


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


def secured_scenario(fn: Scenario) -> Scenario:
    SECURED[fn.__name__] = fn
    return fn


def run(fn: Scenario, bootstrap: str, name: str, sasl: str | None = None) -> dict[str, Any]:
    s = Session(bootstrap, name, sasl)
    try:
        fn(s)
    finally:
        s.close()
    return s.answers


def differences(theirs: dict[str, Any], ours: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return [(k, theirs.get(k, "(absent)"), ours.get(k, "(absent)")) for k in sorted(set(theirs) | set(ours))
            if theirs.get(k, "(absent)") != ours.get(k, "(absent)")]
