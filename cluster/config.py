"""Node configuration: a dataclass, a TOML loader, env overrides, validation.

Sources, later ones win: dataclass defaults < TOML file < environment < explicit
overrides (CLI flags). In TOML and in overrides a setting may be given by its field name
(``group_min_session_timeout_ms``) or by Kafka's dotted name where Kafka has one
(``group.min.session.timeout.ms``). Environment variables are ``KCOORD_<FIELD_NAME>``
in upper case (``KCOORD_GROUP_MIN_SESSION_TIMEOUT_MS=...``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class ConfigError(ValueError):
    pass


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = SECURITY_PROTOCOLS
SSL_CLIENT_AUTH = ("none", "requested", "required")
SASL_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})


# field name -> Kafka's dotted name
KAFKA_NAMES: dict[str, str] = {
    "node_id": "node.id",
    "bootstrap": "controller.quorum.bootstrap.servers",
    "auto_join": "controller.quorum.auto.join.enable",
    "auto_create_topics": "auto.create.topics.enable",
    "default_num_partitions": "num.partitions",
    "offsets_topic_num_partitions": "offsets.topic.num.partitions",
    "transaction_state_num_partitions": "transaction.state.log.num.partitions",
    "transaction_max_timeout_ms": "transaction.max.timeout.ms",
    "transactional_id_expiration_ms": "transactional.id.expiration.ms",
    "group_min_session_timeout_ms": "group.min.session.timeout.ms",
    "group_max_session_timeout_ms": "group.max.session.timeout.ms",
    "group_initial_rebalance_delay_ms": "group.initial.rebalance.delay.ms",
    "group_max_size": "group.max.size",
    "group_consumer_heartbeat_interval_ms": "group.consumer.heartbeat.interval.ms",
    "group_consumer_session_timeout_ms": "group.consumer.session.timeout.ms",
    "group_consumer_min_heartbeat_interval_ms": "group.consumer.min.heartbeat.interval.ms",
    "group_consumer_max_heartbeat_interval_ms": "group.consumer.max.heartbeat.interval.ms",
    "group_consumer_min_session_timeout_ms": "group.consumer.min.session.timeout.ms",
    "group_consumer_max_session_timeout_ms": "group.consumer.max.session.timeout.ms",
    "group_consumer_assignors": "group.consumer.assignors",
    "group_consumer_max_size": "group.consumer.max.size",
    "group_consumer_migration_policy": "group.consumer.migration.policy",
    "group_share_enable": "group.share.enable",
    "group_share_heartbeat_interval_ms": "group.share.heartbeat.interval.ms",
    "group_share_session_timeout_ms": "group.share.session.timeout.ms",
    "group_share_max_size": "group.share.max.size",
    "offsets_retention_minutes": "offsets.retention.minutes",
    "offset_metadata_max_bytes": "offset.metadata.max.bytes",
    "offsets_retention_check_interval_ms": "offsets.retention.check.interval.ms",
    "socket_request_max_bytes": "socket.request.max.bytes",
    "max_connections": "max.connections",
    "max_connections_per_ip": "max.connections.per.ip",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "queued_max_request_bytes": "queued.max.request.bytes",
    "fetch_max_bytes": "fetch.max.bytes",
    "message_max_bytes": "message.max.bytes",
    "log_flush_interval_messages": "log.flush.interval.messages",
    "log_flush_interval_ms": "log.flush.interval.ms",
    "log_segment_bytes": "log.segment.bytes",
    "log_retention_ms": "log.retention.ms",
    "log_retention_bytes": "log.retention.bytes",
    "log_retention_check_interval_ms": "log.retention.check.interval.ms",
    "log_cleaner_enable": "log.cleaner.enable",
    "log_cleaner_backoff_ms": "log.cleaner.backoff.ms",
    "log_cleaner_dedupe_buffer_size": "log.cleaner.dedupe.buffer.size",
    "log_cleaner_delete_retention_ms": "log.cleaner.delete.retention.ms",
    "log_cleaner_min_cleanable_ratio": "log.cleaner.min.cleanable.ratio",
    "log_cleaner_min_compaction_lag_ms": "log.cleaner.min.compaction.lag.ms",
    "log_cleaner_max_compaction_lag_ms": "log.cleaner.max.compaction.lag.ms",
    "log_roll_ms": "log.roll.ms",
    "producer_id_expiration_ms": "producer.id.expiration.ms",
    "broker_session_timeout_ms": "broker.session.timeout.ms",
    "auto_leader_rebalance_enable": "auto.leader.rebalance.enable",
    "leader_imbalance_check_interval_seconds": "leader.imbalance.check.interval.seconds",
    "leader_imbalance_per_broker_percentage": "leader.imbalance.per.broker.percentage",
    "producer_id_expiration_check_interval_ms": "producer.id.expiration.check.interval.ms",
    "data_dir": "log.dirs",
    "listeners": "listeners",
    "advertised_listeners": "advertised.listeners",
    "listener_security_protocol_map": "listener.security.protocol.map",
    "sasl_enabled_mechanisms": "sasl.enabled.mechanisms",
    "ssl_keystore_type": "ssl.keystore.type",
    "ssl_keystore_location": "ssl.keystore.location",
    "ssl_key_password": "ssl.key.password",
    "ssl_truststore_type": "ssl.truststore.type",
    "ssl_truststore_location": "ssl.truststore.location",
    "ssl_client_auth": "ssl.client.auth",
    "ssl_principal_mapping_rules": "ssl.principal.mapping.rules",
    "authorizer_class_name": "authorizer.class.name",
    "connections_max_reauth_ms": "connections.max.reauth.ms",
    "super_users": "super.users",
    "allow_everyone_if_no_acl_found": "allow.everyone.if.no.acl.found",
}
# Kafka's per-listener form of ssl.client.auth, "listener.name.<name>.ssl.client.auth" (the only one
# SASL_SSL listeners heed), is gathered into listener_ssl_client_auth as "NAME:mode,...".
_LISTENER_CLIENT_AUTH = re.compile(r"listener\.name\.([a-z0-9_]+)\.ssl\.client\.auth")
_BY_KAFKA_NAME = {v: k for k, v in KAFKA_NAMES.items()}
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_CLASS_NAMES = ("", STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer")
# __transaction_state partitions take Raft slots below a node's base port (cluster.raft_cluster).
MAX_TXN_PARTITIONS = 100
MAX_NODES = 7  # of a Raft cluster (``peers``)
MAX_NODE_IDS = 64  # node ids a cluster may take over its life (nodes join and leave)


# A secret's pieces: runs of letters cased as words are (lower, Capitalized, UPPER), runs of
# digits, and single other characters.
_SECRET_TOKENS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+|[^A-Za-z0-9]")
_WORD_BITS = 16.0  # a word drawn from a vocabulary of 65,536: more than most people draw from
_SEPARATORS = frozenset(" -_.,:;/")  # between words they tell a guesser little


def secret_bits(secret: str) -> float:
    """A conservative estimate of a secret's strength, in bits (a heuristic against the usual
    mistakes, not a proof of randomness). A secret of hex digits (of one case: `openssl rand -hex`)
    counts 4 bits a digit. Any other counts each piece for what it could be: a run of three or more
    letters may be a word (or words run together, one per started 8 letters), counted as a word
    from a large vocabulary when that is less than as random letters; a separator counts 2 bits.
    So a passphrase of dictionary words counts about 16 bits a word, not for its length. A secret
    of fewer than 8 distinct characters, or a short run repeated, counts as none."""
    n = len(secret)
    if len(set(secret)) < 8 or any(secret == (secret[:k] * (n // k + 1))[:n] for k in range(1, n // 2 + 1)):
        return 0.0  # too few symbols, or one short run repeated
    if re.fullmatch(r"[0-9a-f]+|[0-9A-F]+", secret):
        return 4.0 * n
    letter = math.log2(52 if any(c.islower() for c in secret) and any(c.isupper() for c in secret) else 26)
    bits = 0.0
    for piece in _SECRET_TOKENS.findall(secret):
        k = len(piece)
        if piece[0].isascii() and piece[0].isalpha():
            bits += min(k * letter, _WORD_BITS * math.ceil(k / 8)) if k >= 3 else k * letter
        elif piece[0].isdigit() and piece[0].isascii():
            bits += k * math.log2(10)
        else:
            bits += 2.0 if piece in _SEPARATORS else math.log2(33)
    return bits


@dataclass(frozen=True, slots=True)
class Peer:
    node_id: int
    host: str
    kafka_port: int
    raft_port: int


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(spec: str) -> list[Listener]:
    """Kafka's form: ``NAME://HOST:PORT,...`` (an empty host binds every interface)."""
    out: list[Listener] = []
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon or not name or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"listener {item!r} is not NAME://HOST:PORT")
        if not (name.replace("_", "").isalnum() and name.upper() == name):
            raise ValueError(f"listener name {name!r} must be upper case letters, digits and _")
        out.append(Listener(name, host.strip("[]"), int(port)))
    if len({x.name for x in out}) != len(out):
        raise ValueError("listener names must be unique")
    return out


def _loopback(host: str) -> bool:
    return host == "localhost" or host.startswith("127.") or host == "::1"


def parse_addresses(spec: str) -> list[str]:
    """``host:port,...`` (at least one)."""
    out = []
    for item in (x.strip() for x in spec.split(",") if x.strip()):
        host, colon, port = item.rpartition(":")
        if not host or not colon or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r} is not host:port")
        out.append(f"{host}:{int(port)}")
    if not out:
        raise ValueError("no address")
    return out


def parse_peers(spec: str) -> list[Peer]:
    """``host:kafka_port:raft_port,...`` in node-id order."""
    out = []
    for i, item in enumerate(x.strip() for x in spec.split(",") if x.strip()):
        parts = item.rsplit(":", 2)
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            raise ValueError(f"peer {item!r} is not host:kafka_port:raft_port")
        out.append(Peer(i, parts[0], int(parts[1]), int(parts[2])))
    return out


@dataclass(slots=True)
class NodeConfig:
    node_id: int = 0
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    data_dir: str = "./data/node-0"
    auto_create_topics: bool = True
    default_num_partitions: int = 1
    offsets_topic_num_partitions: int = 16
    # Partitions of __transaction_state, each a Raft group on every node (Kafka: 50); fixed for
    # the cluster's life, like offsets.topic.num.partitions.
    transaction_state_num_partitions: int = 8
    transaction_max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2147483647
    # the consumer group protocol (KIP-848)
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_session_timeout_ms: int = 45000
    # the bounds of the two above and of each group's own values of them (group configs)
    group_consumer_min_heartbeat_interval_ms: int = 5000
    group_consumer_max_heartbeat_interval_ms: int = 15000
    group_consumer_min_session_timeout_ms: int = 45000
    group_consumer_max_session_timeout_ms: int = 60000
    group_consumer_assignors: str = "uniform,range"  # the first is the default
    group_consumer_max_size: int = 2147483647
    group_consumer_migration_policy: str = "bidirectional"  # or upgrade, downgrade, disabled
    # share groups (KIP-932): early access, off unless asked for (Kafka 4.0's group.share.enable)
    group_share_enable: bool = False
    group_share_heartbeat_interval_ms: int = 5000
    group_share_session_timeout_ms: int = 45000
    group_share_max_size: int = 200
    offsets_retention_minutes: int = 10080
    offset_metadata_max_bytes: int = 4096
    offsets_retention_check_interval_ms: int = 600000
    socket_request_max_bytes: int = 104857600
    # Largest frame of any request but Produce (whose bound is socket_request_max_bytes).
    non_produce_request_max_bytes: int = 4194304
    # Array items in one request, all arrays together: each costs loop time to read and answer.
    request_max_array_items: int = 50000
    # -1 = what the open-file limit leaves after the node's own files and max_partitions' descriptors
    # (cluster.fd_budget), at most 10,000 (Kafka: unlimited, then EMFILE)
    max_connections: int = -1
    max_connections_per_ip: int = 1000  # Kafka: unlimited; bounded so one address cannot take them all
    connections_max_idle_ms: int = 600000
    # Request bytes read and not yet answered, over all connections; beyond it reading pauses.
    queued_max_request_bytes: int = 268435456
    log_segment_bytes: int = 1073741824
    log_retention_ms: int = 604800000
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 300000
    # Log compaction of topics whose cleanup.policy has compact (Kafka's names and defaults; a
    # topic's own delete.retention.ms, min.cleanable.dirty.ratio, min/max.compaction.lag.ms and
    # segment.ms override these).
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000
    log_cleaner_dedupe_buffer_size: int = 134217728
    log_cleaner_delete_retention_ms: int = 86400000
    log_cleaner_min_cleanable_ratio: float = 0.5
    log_cleaner_min_compaction_lag_ms: int = 0
    log_cleaner_max_compaction_lag_ms: int = 9223372036854775807
    log_roll_ms: int = 604800000
    # An idempotent producer's state (last batches, epoch) is forgotten this long after its last
    # batch's timestamp, as Kafka does; checked at the interval below.
    producer_id_expiration_ms: int = 86400000
    producer_id_expiration_check_interval_ms: int = 600000
    fetch_max_wait_cap_ms: int = 30000
    # "replicated": a write is durable once a majority holds it (Kafka's default: no fsync).
    # "fsync": every log is fsync'd before anything it holds is acknowledged or sent on.
    durability: str = "replicated"
    log_flush_interval_messages: int = -1  # fsync a log after this many entries (-1 = never)
    log_flush_interval_ms: int = -1  # fsync a log this long after its last fsync (-1 = never)
    # Every partition is a Raft group on every node: bounds on how many a request and the
    # cluster may create (Kafka has none; a node here holds about this many groups well).
    # max_partitions is lowered at start to what the open-file limit holds (cluster.fd_budget).
    max_partitions_per_request: int = 1000
    max_partitions: int = 4000
    message_max_bytes: int = 1048588  # largest record batch a topic takes (topic config max.message.bytes)
    fetch_max_bytes: int = 57671680  # Kafka's broker default: a Fetch returns at most this (one batch at least)
    # Cluster mode: every node as host:kafka_port:raft_port, in node-id order ("" = one node, no Raft).
    peers: str = ""
    # This node joins a running cluster: it asks the nodes of ``peers`` (which names it too, the
    # others' lists need not) to add it, and votes in each Raft group only once caught up there.
    join: bool = False
    # Instead of peers: the Raft addresses (host:raft_port,...) of some running nodes. The node
    # joins their cluster: it asks them for the cluster's nodes and its node id (cluster/bootstrap.py).
    bootstrap: str = ""
    # A joining node votes once caught up (true), or follows every group as an observer until an
    # operator promotes it (AddRaftVoter: kafka-metadata-quorum add-controller, kcoord cluster add-node).
    auto_join: bool = True
    raft_port: int = 0  # this node's Raft port, with bootstrap (else its entry in peers says)
    # A node no longer connected stays listed in Metadata this long (Kafka's broker session).
    broker_session_timeout_ms: int = 9000
    # Shared secret of the Raft port (it authenticates the hub's connections, replication/hub.py);
    # required in cluster mode, at least 128 bits as secret_bits counts them.
    cluster_secret: str = ""
    # TLS on the Raft port, with the node's key and chain (ssl.keystore.location) and the CAs of
    # ssl.truststore.location, certificates checked both ways (a peer's must name its host). Raft
    # frames carry the logs, SCRAM stored and server keys among them: without it they are
    # authenticated (cluster_secret) but readable on the network.
    raft_tls: bool = False
    raft_election_timeout_ms: int = 700  # minimum; the maximum is twice this
    raft_heartbeat_ms: int = 200
    raft_tick_ms: int = 100
    raft_compaction_entries: int = 20000
    raft_compaction_interval_s: int = 600
    # Chaos runs and tests: apply Raft link faults from <data_dir>/raft-faults.json (cluster/link_control.py).
    raft_fault_injection: bool = False
    raft_compaction_bytes: int = 16777216  # a Raft journal (and an offsets tail) this large is compacted at once
    # Preferred-leader balancing (Kafka's names and defaults): checked every interval, and only a
    # node with more than this share of its preferred partitions led elsewhere gets them back.
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    # Prometheus endpoint (HTTP GET /metrics on `host`); 0 = disabled.
    metrics_port: int = 0
    # Its protection where the port is reachable beyond the host: HTTP Basic "user:password", and
    # HTTPS with the node's key and chain (ssl.keystore.location).
    metrics_basic_auth: str = ""
    metrics_tls: bool = False
    # Named listeners, Kafka's way: "INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:29092". The first
    # is the node's main one (the address in `peers`, and its host and port replace `host` and
    # `port`); a client is told the other nodes' addresses on the listener it came in through.
    listeners: str = ""
    # What each listener tells clients: "INTERNAL://kcoord-0:9092,EXTERNAL://localhost:9092"
    # (a listener left out advertises advertised_host, or its own host, and its port).
    advertised_listeners: str = ""
    # Each listener's security protocol: "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT" (a listener named
    # after a protocol, e.g. SASL_PLAINTEXT, speaks it without an entry): PLAINTEXT, SSL,
    # SASL_PLAINTEXT and SASL_SSL.
    listener_security_protocol_map: str = ""
    sasl_enabled_mechanisms: str = "SCRAM-SHA-512,SCRAM-SHA-256"  # PLAIN too if listed
    # A SASL session's lifetime (KIP-368): clients re-authenticate before it ends, and a connection
    # whose session ended is closed at its next request. 0 = sessions last as long as the connection.
    connections_max_reauth_ms: int = 0
    # The users SASL listeners accept, "name:password,..." (the first admin's bootstrap, as
    # kafka-storage.sh --add-scram is: SCRAM credentials are derived from it at start, salted)
    sasl_users: str = ""
    # TLS of the SSL and SASL_SSL listeners (Kafka's keys; PEM files only): the node's key and
    # certificate chain in one file, the CAs it trusts for client certificates, whether SSL
    # listeners ask for one (none, requested, required), and how a certificate's subject becomes
    # the principal's name (Kafka's rule language; DEFAULT = the subject as RFC 2253 writes it).
    ssl_keystore_type: str = "PEM"
    ssl_keystore_location: str = ""
    ssl_key_password: str = ""
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: str = ""
    ssl_client_auth: str = "none"
    # Per listener, "NAME:mode,..." (Kafka: listener.name.<name>.ssl.client.auth); the only way to ask a
    # SASL_SSL listener's clients for certificates, as in Kafka.
    listener_ssl_client_auth: str = ""
    ssl_principal_mapping_rules: str = "DEFAULT"
    # ACLs (Kafka's keys): empty = no authorizer, everything allowed; Kafka's StandardAuthorizer class
    # name turns the ACLs on. super.users is ";"-separated (certificate subjects hold commas).
    authorizer_class_name: str = ""
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def advertised(self) -> str:
        main = self.listener_list()[0]
        return self.advertised_for(main.name)[0]

    def listener_list(self) -> list[Listener]:
        """Every listener, the main one first (``host:port`` as PLAINTEXT without ``listeners``)."""
        return parse_listeners(self.listeners) if self.listeners else [Listener("PLAINTEXT", self.host, self.port)]

    def advertised_for(self, name: str) -> tuple[str, int]:
        """(host, port) clients are told for this node on listener ``name``."""
        for a in parse_listeners(self.advertised_listeners) if self.advertised_listeners else []:
            if a.name == name:
                return a.host, a.port
        own = next(x for x in self.listener_list() if x.name == name)
        return self.advertised_host or own.host, own.port

    def listener_protocol(self, name: str) -> str:
        """The security protocol of listener ``name``."""
        for item in (x.strip() for x in self.listener_security_protocol_map.split(",") if x.strip()):
            listener, _, protocol = item.partition(":")
            if listener.strip() == name:
                return protocol.strip().upper()
        return name if name in SECURITY_PROTOCOLS else "PLAINTEXT"

    def client_auth_for(self, name: str) -> str:
        """ssl.client.auth of listener ``name``: its own setting, else (SSL listeners only) ``ssl_client_auth``."""
        for item in (x.strip() for x in self.listener_ssl_client_auth.split(",") if x.strip()):
            listener, _, mode = item.partition(":")
            if listener.strip().upper() == name:
                return mode.strip().lower()
        return self.ssl_client_auth.lower() if self.listener_protocol(name) == "SSL" else "none"

    def super_user_list(self) -> list[str]:
        return [u.strip() for u in self.super_users.split(";") if u.strip()]

    def sasl_user_list(self) -> dict[str, str]:
        users = {}
        for item in (x for x in self.sasl_users.split(",") if x.strip()):
            name, sep, password = item.partition(":")
            if not sep or not name.strip() or not password:
                raise ConfigError("invalid setting sasl_users: expected name:password,... entries")
            users[name.strip()] = password
        return users

    def validate(self) -> NodeConfig:
        def need(cond: bool, name: str, what: str) -> None:
            if not cond:
                raise ConfigError(f"invalid setting {name}={getattr(self, name)!r}: {what}")

        need(0 <= self.node_id < 2**31, "node_id", "must be a non-negative int32")
        need(0 <= self.port <= 65535, "port", "must be 0..65535")
        need(0 <= self.metrics_port <= 65535, "metrics_port", "must be 0..65535 (0 = disabled)")
        user, colon, password = self.metrics_basic_auth.partition(":")
        need(not self.metrics_basic_auth or bool(colon and user and password), "metrics_basic_auth",
             "expected user:password, neither empty")
        need(not self.metrics_tls or bool(self.ssl_keystore_location), "metrics_tls",
             "HTTPS needs the node's key and certificate chain (ssl.keystore.location)")
        need(not self.raft_tls or bool(self.ssl_keystore_location and self.ssl_truststore_location), "raft_tls",
             "TLS on the Raft port needs the node's key and chain (ssl.keystore.location) and the CAs that "
             "signed its peers' (ssl.truststore.location)")
        try:
            names = {x.name for x in self.listener_list()}
            advertised = parse_listeners(self.advertised_listeners) if self.advertised_listeners else []
        except ValueError as e:
            raise ConfigError(f"invalid setting listeners/advertised.listeners: {e}") from None
        if self.listeners:
            main = self.listener_list()[0]
            need(self.host == (main.host or "0.0.0.0") and self.port == main.port, "listeners",
                 "its first listener is the node's main one: host and port must match it (or be left unset)")
        need({a.name for a in advertised} <= names, "advertised_listeners",
             f"names a listener not in listeners ({', '.join(sorted(names))})")
        need(all(a.host and a.host != "0.0.0.0" for a in advertised), "advertised_listeners",
             "every advertised listener needs a host clients can reach")
        need(bool(self.host), "host", "must not be empty")
        need(bool(self.data_dir), "data_dir", "must not be empty")
        need(self.default_num_partitions >= 1, "default_num_partitions", "must be >= 1")
        need(self.offsets_topic_num_partitions >= 1, "offsets_topic_num_partitions", "must be >= 1")
        need(1 <= self.transaction_state_num_partitions <= MAX_TXN_PARTITIONS, "transaction_state_num_partitions",
             f"must be 1..{MAX_TXN_PARTITIONS}")
        need(self.transaction_max_timeout_ms >= 1, "transaction_max_timeout_ms", "must be >= 1")
        need(self.transactional_id_expiration_ms >= 1, "transactional_id_expiration_ms", "must be >= 1")
        need(self.group_min_session_timeout_ms >= 0, "group_min_session_timeout_ms", "must be >= 0")
        need(self.group_max_session_timeout_ms >= self.group_min_session_timeout_ms,
             "group_max_session_timeout_ms", "must be >= group_min_session_timeout_ms")
        need(self.group_initial_rebalance_delay_ms >= 0, "group_initial_rebalance_delay_ms", "must be >= 0")
        need(self.group_max_size >= 1, "group_max_size", "must be >= 1")
        protocols = {x.name: self.listener_protocol(x.name) for x in self.listener_list()}
        need(all(p in SERVED_PROTOCOLS for p in protocols.values()), "listener_security_protocol_map",
             f"security protocols served: {', '.join(SERVED_PROTOCOLS)}")
        main_protocol = protocols[self.listener_list()[0].name]
        need(not (self.peers or self.bootstrap) or main_protocol in ("PLAINTEXT", "SSL"), "listener_security_protocol_map",
             "in a cluster the first listener carries the nodes' own requests to each other: PLAINTEXT or SSL, "
             f"not {main_protocol} (put a SASL listener after it)")
        main_name = self.listener_list()[0].name
        need(not (self.peers or self.bootstrap) or not self.authorizer_class_name
             or (main_protocol == "SSL" and self.client_auth_for(main_name) == "required"), "authorizer_class_name",
             "with an authorizer, the first listener carries the nodes' own requests (transaction markers need "
             "CLUSTER_ACTION on the cluster): make it SSL with ssl.client.auth=required and name the nodes' "
             "certificate principal in super.users; over PLAINTEXT (or without client certificates) every client "
             "that reaches it would be ANONYMOUS with the nodes' rights")
        tls = any(p in ("SSL", "SASL_SSL") for p in protocols.values())
        need(not tls or bool(self.ssl_keystore_location), "ssl_keystore_location",
             "an SSL or SASL_SSL listener needs the node's key and certificate chain (a PEM file)")
        need(self.ssl_keystore_type.upper() == "PEM", "ssl_keystore_type", "only PEM is read")
        need(self.ssl_truststore_type.upper() == "PEM", "ssl_truststore_type", "only PEM is read")
        need(self.ssl_client_auth.lower() in SSL_CLIENT_AUTH, "ssl_client_auth", "must be none, requested or required")
        for item in (x.strip() for x in self.listener_ssl_client_auth.split(",") if x.strip()):
            listener, _, mode = item.partition(":")
            need(listener.strip().upper() in protocols and mode.strip().lower() in SSL_CLIENT_AUTH,
                 "listener_ssl_client_auth", "expected NAME:none|requested|required entries naming listeners")
        need(not any(self.client_auth_for(n) != "none" for n in protocols) or bool(self.ssl_truststore_location),
             "ssl_truststore_location", "asking clients for certificates needs the CAs to trust (a PEM file)")
        mechanisms = [m.strip() for m in self.sasl_enabled_mechanisms.split(",") if m.strip()]
        need(bool(mechanisms) and set(mechanisms) <= SASL_MECHANISMS, "sasl_enabled_mechanisms",
             f"must list some of {', '.join(sorted(SASL_MECHANISMS))}")
        need(not {"SASL_PLAINTEXT", "SASL_SSL"} & set(protocols.values()) or bool(self.sasl_user_list()), "sasl_users",
             "a SASL listener needs at least one user (name:password)")
        need(self.connections_max_reauth_ms >= 0, "connections_max_reauth_ms", "must be >= 0 (0 = no re-authentication)")
        need(self.authorizer_class_name in AUTHORIZER_CLASS_NAMES, "authorizer_class_name",
             f"empty (no ACLs) or {STANDARD_AUTHORIZER}")
        need(all(":" in u for u in self.super_user_list()), "super_users", "expected Type:Name;... entries")
        need(self.group_consumer_heartbeat_interval_ms >= 1, "group_consumer_heartbeat_interval_ms", "must be >= 1")
        need(self.group_consumer_session_timeout_ms > self.group_consumer_heartbeat_interval_ms,
             "group_consumer_session_timeout_ms", "must be greater than group_consumer_heartbeat_interval_ms")
        for what in ("heartbeat_interval", "session_timeout"):  # Kafka's GroupCoordinatorConfig checks
            lo, hi = (getattr(self, f"group_consumer_{m}_{what}_ms") for m in ("min", "max"))
            need(1 <= lo <= hi, f"group_consumer_max_{what}_ms",
                 f"must be >= group_consumer_min_{what}_ms, which must be >= 1")
            need(lo <= getattr(self, f"group_consumer_{what}_ms") <= hi, f"group_consumer_{what}_ms",
                 f"must lie within group_consumer_min_{what}_ms and group_consumer_max_{what}_ms ({lo}-{hi}); "
                 "set those too")
        assignors = [a.strip() for a in self.group_consumer_assignors.split(",")]
        need(bool(assignors) and set(assignors) <= {"uniform", "range"} and len(set(assignors)) == len(assignors),
             "group_consumer_assignors", "must list uniform and/or range, each once")
        need(self.group_consumer_max_size >= 1, "group_consumer_max_size", "must be >= 1")
        need(self.group_consumer_migration_policy.lower() in ("bidirectional", "upgrade", "downgrade", "disabled"),
             "group_consumer_migration_policy", "must be bidirectional, upgrade, downgrade or disabled")
        need(self.group_share_heartbeat_interval_ms >= 1, "group_share_heartbeat_interval_ms", "must be >= 1")
        need(self.group_share_session_timeout_ms > self.group_share_heartbeat_interval_ms,
             "group_share_session_timeout_ms", "must be greater than group_share_heartbeat_interval_ms")
        need(1 <= self.group_share_max_size <= 1000, "group_share_max_size", "must be 1..1000")
        need(self.offsets_retention_minutes >= 1, "offsets_retention_minutes", "must be >= 1")
        need(self.offset_metadata_max_bytes >= 0, "offset_metadata_max_bytes", "must be >= 0")
        need(self.offsets_retention_check_interval_ms >= 1, "offsets_retention_check_interval_ms", "must be >= 1")
        need(self.socket_request_max_bytes >= 1024, "socket_request_max_bytes", "must be >= 1024")
        need(1024 <= self.non_produce_request_max_bytes <= self.socket_request_max_bytes,
             "non_produce_request_max_bytes", "must be 1024..socket_request_max_bytes")
        need(self.request_max_array_items >= 100, "request_max_array_items", "must be >= 100")
        need(self.max_connections == -1 or self.max_connections >= 1, "max_connections", "must be >= 1 (-1 = auto)")
        need(self.max_connections_per_ip >= 1, "max_connections_per_ip", "must be >= 1")
        need(self.connections_max_idle_ms >= 100, "connections_max_idle_ms", "must be >= 100")
        need(self.queued_max_request_bytes >= self.socket_request_max_bytes, "queued_max_request_bytes",
             "must be >= socket_request_max_bytes")
        need(self.max_partitions_per_request >= 1, "max_partitions_per_request", "must be >= 1")
        need(self.max_partitions >= 1, "max_partitions", "must be >= 1")
        need(self.broker_session_timeout_ms >= 0, "broker_session_timeout_ms", "must be >= 0")
        need(self.message_max_bytes >= 1024, "message_max_bytes", "must be >= 1024")
        need(self.durability in ("replicated", "fsync"), "durability", 'must be "replicated" or "fsync"')
        need(self.log_flush_interval_messages == -1 or self.log_flush_interval_messages >= 1,
             "log_flush_interval_messages", "must be >= 1 (-1 = never)")
        need(self.log_flush_interval_ms == -1 or self.log_flush_interval_ms >= 1, "log_flush_interval_ms",
             "must be >= 1 (-1 = never)")
        need(self.fetch_max_bytes >= 1024, "fetch_max_bytes", "must be >= 1024")
        need(self.log_segment_bytes >= 1024, "log_segment_bytes", "must be >= 1024")
        need(self.log_retention_ms >= -1, "log_retention_ms", "must be >= -1 (-1 = unlimited)")
        need(self.log_retention_bytes >= -1, "log_retention_bytes", "must be >= -1 (-1 = unlimited)")
        need(self.log_retention_check_interval_ms >= 1, "log_retention_check_interval_ms", "must be >= 1")
        need(self.log_cleaner_backoff_ms >= 1, "log_cleaner_backoff_ms", "must be >= 1")
        need(self.log_cleaner_dedupe_buffer_size >= 1 << 20, "log_cleaner_dedupe_buffer_size", "must be >= 1048576")
        need(self.log_cleaner_delete_retention_ms >= 0, "log_cleaner_delete_retention_ms", "must be >= 0")
        need(0.0 <= self.log_cleaner_min_cleanable_ratio <= 1.0, "log_cleaner_min_cleanable_ratio", "must be 0..1")
        need(self.log_cleaner_min_compaction_lag_ms >= 0, "log_cleaner_min_compaction_lag_ms", "must be >= 0")
        need(self.log_cleaner_max_compaction_lag_ms >= 1, "log_cleaner_max_compaction_lag_ms", "must be >= 1")
        need(self.log_roll_ms >= 1, "log_roll_ms", "must be >= 1")
        need(self.producer_id_expiration_ms >= 1, "producer_id_expiration_ms", "must be >= 1")
        need(self.producer_id_expiration_check_interval_ms >= 1, "producer_id_expiration_check_interval_ms",
             "must be >= 1")
        if self.peers:
            try:
                peers = parse_peers(self.peers)
            except ValueError as e:
                raise ConfigError(f"invalid setting peers={self.peers!r}: {e}") from None
            # Every Raft group has a replica on every node: more than seven adds no capacity, only
            # replication work (and seven is the largest size tested).
            # A joining node's list names every node the cluster ever had (ids are positions, and a
            # removed node's id is never taken again): the cluster counts at most seven at once.
            need(1 <= len(peers) <= (MAX_NODE_IDS if self.join else MAX_NODES), "peers",
                 f"a cluster has 1 to {MAX_NODES} nodes" if not self.join
                 else f"a joining node's list names at most {MAX_NODE_IDS} nodes")
            need(self.node_id < len(peers), "node_id", f"must index into peers (0..{len(peers) - 1})")
            need(not self.join or len(peers) > 1, "join", "a joining node needs the cluster's nodes in peers")
        if self.bootstrap:
            try:
                parse_addresses(self.bootstrap)
            except ValueError as e:
                raise ConfigError(f"invalid setting bootstrap={self.bootstrap!r}: {e}") from None
            # (started, the node runs with the peers the cluster told it instead: cluster/bootstrap.py)
            need(not self.peers, "bootstrap", "give bootstrap or peers, not both")
            need(0 < self.raft_port < 65536, "raft_port", "a node started with bootstrap needs its Raft port (1..65535)")
            need(self.host not in ("", "0.0.0.0", "::"), "host",
                 "with bootstrap, the address the other nodes reach this node at (its Raft port binds it)")
            need(not _loopback(self.host) or all(_loopback(a.rpartition(":")[0]) for a in parse_addresses(self.bootstrap)),
                 "host", "with bootstrap, the address the other nodes reach this node at: not a loopback address "
                         "when they are elsewhere")
            need(self.advertised_for(self.listener_list()[0].name)[1] != 0, "port",
                 "with bootstrap, the Kafka port the others tell clients: not 0")
        if self.peers or self.bootstrap:
            need(secret_bits(self.cluster_secret) >= 128, "cluster_secret",
                 "must carry at least 128 bits (e.g. `openssl rand -hex 16`, 32 hex digits; words count for "
                 "little): the Raft port's handshake and every frame's MAC are only as strong as it")
        need(self.raft_heartbeat_ms >= 5, "raft_heartbeat_ms", "must be >= 5")
        need(self.raft_election_timeout_ms > 3 * self.raft_heartbeat_ms, "raft_election_timeout_ms",
             "must be more than 3 x raft_heartbeat_ms")
        need(1 <= self.raft_tick_ms <= self.raft_heartbeat_ms, "raft_tick_ms", "must be 1..raft_heartbeat_ms")
        need(self.raft_compaction_entries >= 100, "raft_compaction_entries", "must be >= 100")
        need(self.raft_compaction_interval_s >= 1, "raft_compaction_interval_s", "must be >= 1")
        need(self.raft_compaction_bytes >= 1024 * 1024, "raft_compaction_bytes", "must be >= 1048576")
        need(self.leader_imbalance_check_interval_seconds >= 1, "leader_imbalance_check_interval_seconds",
             "must be >= 1")
        need(0 <= self.leader_imbalance_per_broker_percentage <= 100, "leader_imbalance_per_broker_percentage",
             "must be 0..100")
        return self

    @property
    def cluster_peers(self) -> list[Peer]:
        return parse_peers(self.peers) if self.peers else []


_FIELDS = {f.name: f for f in dataclasses.fields(NodeConfig) if f.name != "extra"}


def _coerce(name: str, value: Any, source: str) -> Any:
    f = _FIELDS[name]
    typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    try:
        if typ == "bool":
            if isinstance(value, bool):
                return value
            s = str(value).strip().lower()
            if s in ("1", "true", "yes", "on"):
                return True
            if s in ("0", "false", "no", "off"):
                return False
            raise ValueError("expected a boolean")
        if typ == "int":
            if isinstance(value, bool):
                raise ValueError("expected an integer")
            if isinstance(value, int):
                return value
            return int(str(value).strip())
        if typ == "float":
            if isinstance(value, bool):
                raise ValueError("expected a number")
            return float(str(value).strip())
        if typ.startswith("str"):
            if value is None or (typ == "str | None" and str(value) == ""):
                return None if "None" in typ else ""
            return str(value)
    except ValueError as e:
        raise ConfigError(f"invalid setting {name} from {source}: {value!r} ({e})") from None
    return value


def _resolve_name(key: str, source: str) -> str:
    if _LISTENER_CLIENT_AUTH.fullmatch(key):
        return "listener_ssl_client_auth"
    if key in _FIELDS:
        return key
    if key in _BY_KAFKA_NAME:
        return _BY_KAFKA_NAME[key]
    under = key.replace(".", "_").replace("-", "_")
    if under in _FIELDS:
        return under
    raise ConfigError(f"unknown setting {key!r} in {source}")


def _put(values: dict[str, Any], name: str, key: str, value: Any) -> None:
    m = _LISTENER_CLIENT_AUTH.fullmatch(key)
    if m is None:
        values[name] = value
    else:  # listener.name.<l>.ssl.client.auth=mode joins the others as "L:mode"
        kept = [x for x in str(values.get(name, "")).split(",") if x and x.partition(":")[0] != m.group(1).upper()]
        values[name] = ",".join([*kept, f"{m.group(1).upper()}:{value}"])


def load_config(
    path: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> NodeConfig:
    values: dict[str, Any] = {}
    if path:
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path} is not valid TOML: {e}") from None
        flat: dict[str, Any] = {}
        for k, v in doc.items():
            if isinstance(v, dict) and k in ("node", "kcoord", "broker"):
                flat.update(v)
            else:
                flat[k] = v
        for k, v in flat.items():
            name = _resolve_name(k, path)
            _put(values, name, k, _coerce(name, v, path))
    env = os.environ if env is None else env
    for name in _FIELDS:
        key = f"KCOORD_{name.upper()}"
        if key in env:
            values[name] = _coerce(name, env[key], key)
    for k, v in (overrides or {}).items():
        if v is None:
            continue
        name = _resolve_name(k, "command line")
        _put(values, name, k, _coerce(name, v, "command line"))
    if values.get("listeners"):
        try:
            main = parse_listeners(str(values["listeners"]))[0]
        except (ValueError, IndexError) as e:
            raise ConfigError(f"invalid setting listeners={values['listeners']!r}: {e or 'empty'}") from None
        values.setdefault("host", main.host or "0.0.0.0")
        values.setdefault("port", main.port)
    return NodeConfig(**values).validate()
