"""The configuration reference, docs/configuration.md, generated from ``NodeConfig``.

    python -m cluster.config_doc > docs/configuration.md

Every setting's name, type default, Kafka name (``cluster.config.KAFKA_NAMES``) and environment
variable come from the code; only the one-line descriptions are written here, in
``DESCRIPTIONS``, keyed by field name. ``tests/unit/test_docs.py`` fails when a field has no
description (or a description no field) and when docs/configuration.md is not what ``render()``
gives, so the page cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from cluster.config import KAFKA_NAMES, NodeConfig

# Fields of NodeConfig that are not settings (``extra`` holds what a caller attaches, never read
# from a file, the environment or the command line).
NOT_SETTINGS = frozenset({"extra"})

# Kafka names that are patterns rather than one key (config.py gathers every
# listener.name.<l>.ssl.client.auth into listener_ssl_client_auth).
KAFKA_NAME_PATTERNS: dict[str, str] = {
    "listener_ssl_client_auth": "listener.name.<l>.ssl.client.auth",
}

DESCRIPTIONS: dict[str, str] = {
    'node_id': "This node's id; in cluster mode its index in `peers` (with `bootstrap`, given by the cluster).",
    'host': 'Address the Kafka listener (and the metrics endpoint) binds to.',
    'port': 'Kafka listener port.',
    'advertised_host': 'Host name given to clients in Metadata/FindCoordinator (default: `host`).',
    'data_dir': 'Where logs, Raft journals and metadata live.',
    'auto_create_topics': 'Create unknown topics named in Metadata requests.',
    'default_num_partitions': 'Partitions of auto-created topics.',
    'offsets_topic_num_partitions': (
        "`n`, partitions of `__consumer_offsets`; fixed at the cluster's first start."
    ),
    'transaction_state_num_partitions': (
        "Partitions of `__transaction_state` (1..100; Kafka's default is 50, each partition is a Raft "
        "group here); fixed at the cluster's first start."
    ),
    'transaction_max_timeout_ms': (
        'The largest `transaction.timeout.ms` a producer may ask for (INVALID_TRANSACTION_TIMEOUT '
        'beyond it).'
    ),
    'transactional_id_expiration_ms': (
        'A transactional id with no transaction open is forgotten this long after its last update.'
    ),
    'group_min_session_timeout_ms': 'Smallest session timeout a member may ask for.',
    'group_max_session_timeout_ms': 'Largest session timeout a member may ask for.',
    'group_initial_rebalance_delay_ms': 'Wait for more members before the first rebalance of an empty group.',
    'group_max_size': 'Members per group.',
    'group_consumer_heartbeat_interval_ms': 'How often consumer-protocol members (KIP-848) heartbeat.',
    'group_consumer_session_timeout_ms': (
        'A consumer-protocol member silent this long is removed from its group.'
    ),
    'group_consumer_min_heartbeat_interval_ms': (
        'Smallest heartbeat interval a consumer group may be given (its own consumer.heartbeat.interval.ms).'
    ),
    'group_consumer_max_heartbeat_interval_ms': (
        'Largest heartbeat interval a consumer group may be given (its own consumer.heartbeat.interval.ms).'
    ),
    'group_consumer_min_session_timeout_ms': (
        'Smallest session timeout a consumer group may be given (its own consumer.session.timeout.ms).'
    ),
    'group_consumer_max_session_timeout_ms': (
        'Largest session timeout a consumer group may be given (its own consumer.session.timeout.ms).'
    ),
    'group_consumer_assignors': (
        'Server-side assignors a consumer-protocol member may ask for; the first is the default.'
    ),
    'group_consumer_max_size': 'Members per consumer-protocol group.',
    'group_share_enable': (
        'Serve share groups (KIP-932, early access; docs/compatibility.md): ShareGroupHeartbeat and '
        'ShareGroupDescribe, ShareFetch and ShareAcknowledge, DescribeShareGroupOffsets. Set it on every '
        'node, once every node runs this release. Off: their APIs answer UNSUPPORTED_VERSION, as Kafka '
        'does while `share.version` is 0.'),
    'group_share_heartbeat_interval_ms': 'Heartbeat interval told to share group members.',
    'group_share_session_timeout_ms': 'A share group member that sends no heartbeat for this long is removed.',
    'group_share_max_size': 'Members per share group (1..1000; Kafka: 200).',
    'group_consumer_migration_policy': (
        'Whether a classic group with members may be upgraded online to a consumer group (`upgrade`), a'
        ' consumer group left with classic members only turned back (`downgrade`), both, or neither '
        '(`disabled`, which also refuses classic members in consumer groups).'
    ),
    'offsets_retention_minutes': 'Committed offsets of empty groups expire after this.',
    'offset_metadata_max_bytes': 'Longest commit metadata string.',
    'offsets_retention_check_interval_ms': 'How often expired offsets are removed.',
    'socket_request_max_bytes': 'Largest request frame (Produce; see the next row for the others).',
    'non_produce_request_max_bytes': (
        "Largest frame of any request but Produce; checked from the frame's first 6 bytes, before it is"
        ' read.'
    ),
    'request_max_array_items': (
        'Array items in one request, all arrays together (each costs event-loop time to read and '
        'answer).'
    ),
    'max_connections': (
        'Client connections per node; `-1` = what the open-file limit (raised to its hard limit) leaves'
        " after the node's own files and `max_partitions`' descriptors, but at least a quarter of it "
        "(up to 1,000), at most 10,000. An explicit value beyond the limit is lowered to it. Kafka's "
        'default is unlimited.'
    ),
    'max_connections_per_ip': 'Client connections per client address (Kafka: unlimited).',
    'connections_max_idle_ms': (
        'A connection with nothing read or written for this long, and no request in flight, is closed.'
    ),
    'queued_max_request_bytes': (
        'Request bytes read and not yet answered, all connections together; above it the node stops '
        "reading until answers go out (Kafka's default is unlimited)."
    ),
    'log_segment_bytes': 'Segment size of data partitions.',
    'log_retention_ms': 'Time retention of data partitions (-1 = unlimited).',
    'log_retention_bytes': 'Size retention per data partition (-1 = unlimited).',
    'log_retention_check_interval_ms': 'How often retention runs.',
    'log_cleaner_enable': 'Compact topics whose `cleanup.policy` includes `compact` (as Kafka\'s cleaner).',
    'log_cleaner_backoff_ms': 'How often the cleaner looks for a partition to compact.',
    'log_cleaner_dedupe_buffer_size': (
        'Memory a compaction pass\'s key map may take (about 128 bytes a key here): a partition with more '
        'distinct keys in its dirty part is cleaned in several passes.'
    ),
    'log_cleaner_delete_retention_ms': 'How long a tombstone or transaction marker stays once compaction has passed it (topic: `delete.retention.ms`).',
    'log_cleaner_min_cleanable_ratio': 'Share of a partition not compacted yet above which it is compacted (topic: `min.cleanable.dirty.ratio`).',
    'log_cleaner_min_compaction_lag_ms': 'A record is compacted only once this old (topic: `min.compaction.lag.ms`).',
    'log_cleaner_max_compaction_lag_ms': 'A record not compacted this long is compacted whatever the ratio (topic: `max.compaction.lag.ms`).',
    'log_roll_ms': 'A segment rolls at an append whose records are this much newer than its first (topic: `segment.ms`).',
    'producer_id_expiration_ms': (
        "An idempotent producer's state is forgotten this long after its last batch's timestamp "
        "(Kafka's rule); its next batch is taken as a new producer's."
    ),
    'producer_id_expiration_check_interval_ms': 'How often producer expiry runs.',
    'fetch_max_wait_cap_ms': 'Upper bound on a Fetch long poll, whatever the client asks.',
    'durability': (
        '`replicated`: a write is acknowledged once a Raft majority holds it in memory/page cache '
        "(Kafka's default: no fsync). `fsync`: every Raft journal is fsync'd before the messages of "
        'each Raft pass leave (so before a follower acknowledges or a leader commits), and a single '
        'node fsyncs before it answers.'
    ),
    'log_flush_interval_messages': (
        "fsync a log once this many entries were written since its last fsync (-1 = never, Kafka's "
        'default).'
    ),
    'log_flush_interval_ms': (
        'fsync a Raft journal this long after its last fsync, if it has new entries (-1 = never).'
    ),
    'max_partitions_per_request': 'Partitions one CreateTopics request may create (more: POLICY_VIOLATION).',
    'max_partitions': (
        'Partitions of all topics in the cluster (each is a Raft group on every node); CreateTopics '
        "past it gets POLICY_VIOLATION, auto-creation is refused. Lowered at start to what the node's "
        'open-file limit holds (one warning).'
    ),
    'message_max_bytes': (
        "Largest record batch a Produce may carry (a topic's `max.message.bytes` overrides it, up to "
        'this); larger: MESSAGE_TOO_LARGE.'
    ),
    'fetch_max_bytes': 'Most a Fetch returns, whatever it asks (at least one batch, as Kafka).',
    'peers': (
        'Cluster mode: every node as `host:kafka_port:raft_port`, in node-id order, 1 to 7 nodes; a '
        'majority must be up (empty = one node, no Raft).'
    ),
    'join': (
        'This node joins a running cluster: its `peers` name every node the cluster has had, in node-id '
        "order, and this one last (up to 64; the others' lists stay as they are); it asks them to add it, and "
        'each Raft group takes it as a learner, then as a voter once it has caught up '
        '([operations](operations.md#procedures), "Adding a node").'
    ),
    'bootstrap': (
        'Instead of `peers`: the Raft addresses (`host:raft_port,...`) of some running nodes. The node joins '
        'their cluster: on its first start it asks them for the cluster\'s nodes and its node id (the next), '
        'keeps the answer in its data directory (`bootstrap.json`) and joins as with `join` '
        '([operations](operations.md#procedures), "Adding a node"). Needs `raft_port` and a `host` the others reach.'
    ),
    'auto_join': (
        'A joining node votes in each Raft group once caught up there (true), or follows every group as an '
        'observer until an operator promotes it (false: `kafka-metadata-quorum add-controller` or `kcoord '
        'cluster add-node`, AddRaftVoter). Kafka\'s default is false; here a node joins without that step.'
    ),
    'raft_port': 'This node\'s Raft port, with `bootstrap` (otherwise its entry in `peers` gives it).',
    'broker_session_timeout_ms': (
        'A node no longer connected stays listed in Metadata this long (never named leader meanwhile), '
        'as a Kafka broker stays registered until its session expires: librdkafka forgets a broker that'
        ' leaves Metadata, and a transactional producer whose group coordinator it was can then hang '
        '(confluentinc/librdkafka#5511).'
    ),
    'cluster_secret': (
        'Shared secret of the Raft port: both ends of a connection prove it (the dialer first), and '
        'every frame carries an HMAC-SHA256 keyed from it (frames are authenticated; encrypted only '
        'with `raft_tls`); required in cluster mode, with at least 128 bits (`openssl rand -hex 16`; a '
        'node refuses to start with less, as far as its estimate can tell: hex digits count 4 bits '
        'each, and a word about 16 bits however long, so a passphrase of words needs eight or more: use'
        ' a random secret).'
    ),
    'raft_tls': (
        "TLS 1.3 on the Raft port with the node's key and chain (`ssl.keystore.location`) and the CAs "
        "of `ssl.truststore.location`: each end checks the other's certificate, and a dialer the peer's"
        " host name in it. On in `kcoord up --secure`. Without it Raft traffic, the metadata log's "
        'SCRAM stored and server keys included, is readable on the network.'
    ),
    'raft_election_timeout_ms': (
        'Minimum Raft election timeout (the maximum is twice this). A leader that has heard from no '
        'majority of its group for the maximum (1.4 s) steps down (check-quorum): its coordinator '
        "unloads the partition's groups and its data partitions stop answering as leader."
    ),
    'raft_heartbeat_ms': 'Raft append-entries period.',
    'raft_tick_ms': 'Raft tick period.',
    'raft_compaction_entries': 'Entries between Raft log compactions.',
    'raft_compaction_interval_s': 'Minimum seconds between Raft log compactions.',
    'raft_fault_injection': (
        'For chaos runs and tests: the node applies `<data_dir>/raft-faults.json` (`{"cut": [node ids],'
        ' "delay_s", "hold", "duplicate", "seed"}`) to its Raft links (`cluster/link_control.py`).'
    ),
    'raft_compaction_bytes': (
        "A Raft journal (or an offsets partition's uncompacted tail) this large is compacted at once, "
        "whatever the entry count and interval say; a single node's offsets log is compacted each time "
        'this much was appended.'
    ),
    'auto_leader_rebalance_enable': (
        'Hand partitions back to their preferred leaders (each partition prefers one node, which '
        'spreads leadership evenly), in rounds as below; `false` leaves leadership wherever elections '
        'put it.'
    ),
    'leader_imbalance_check_interval_seconds': (
        'How often a node holds a balancing round (the first one this long after it starts). Each round'
        ' moves a partition at most once, and only when its preferred node has been connected for 5 s '
        'and the partition is not busy: no `__consumer_offsets` partition while one of its groups '
        'rebalances, no `__transaction_state` partition with open transactions. Every move makes a '
        "coordinator partition's groups load on the new leader; every move is logged "
        '(`event=leadership_transfer ... reason=balance`).'
    ),
    'leader_imbalance_per_broker_percentage': (
        'A round hands a node its preferred partitions back only if more than this percentage of them '
        'are led elsewhere (0 = any).'
    ),
    'metrics_port': (
        "Prometheus endpoint `http://host:metrics_port/metrics` (0 = disabled), bound to the node's "
        '`host`.'
    ),
    'metrics_basic_auth': '`user:password`: the endpoint asks for HTTP Basic authentication (401 otherwise).',
    'metrics_tls': "Serve the endpoint over HTTPS with the node's key and chain (`ssl.keystore.location`).",
    'listeners': (
        'Named listeners, `NAME://HOST:PORT,...`; the first is the main one (its host and port replace '
        "`host` and `port`); a client is told the nodes' addresses on the listener it came in through."
    ),
    'advertised_listeners': (
        'What each listener tells clients, `NAME://HOST:PORT,...` (a listener left out advertises '
        '`advertised_host` or its own host, and its port).'
    ),
    'listener_security_protocol_map': (
        "Each listener's security protocol, `NAME:PROTOCOL,...` (a listener named after a protocol "
        'speaks it): PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL. In a cluster the first listener carries '
        "the nodes' own requests to each other (transaction markers): PLAINTEXT or SSL."
    ),
    'sasl_enabled_mechanisms': 'The mechanisms a SASL listener offers (PLAIN too if listed).',
    'connections_max_reauth_ms': (
        "A SASL session's lifetime (KIP-368): clients re-authenticate within it; a connection whose "
        'session ended is closed at its next request. 0 = no limit.'
    ),
    'sasl_users': (
        'The bootstrap users, `name:password,...`: PLAIN checks these passwords; for SCRAM they are the'
        ' users a new cluster starts with (derived at start, salted, as `kafka-storage.sh --add-scram` '
        "seeds one), until the cluster's own credentials (AlterUserScramCredentials, `kcoord users`) "
        'change or delete them.'
    ),
    'ssl_keystore_type': (
        "The keystore's format: PEM only (a key and its chain in one file; JKS and PKCS12 are not "
        'read).'
    ),
    'ssl_keystore_location': (
        "The node's private key and certificate chain, one PEM file (`ssl.keystore.type` PEM); needed "
        'by SSL and SASL_SSL listeners.'
    ),
    'ssl_key_password': "The key's password, if it is encrypted.",
    'ssl_truststore_type': "The truststore's format: PEM only.",
    'ssl_truststore_location': (
        "The CAs (PEM) that client certificates must chain to; the node's own client side trusts them "
        'too.'
    ),
    'ssl_client_auth': (
        'Whether SSL listeners ask clients for a certificate: `none`, `requested` (an untrusted one '
        'still fails), `required`. SASL_SSL listeners ignore it, as in Kafka.'
    ),
    'listener_ssl_client_auth': (
        "Per listener, `NAME:mode,...`; the only way to ask a SASL_SSL listener's clients for "
        'certificates.'
    ),
    'ssl_principal_mapping_rules': (
        "Kafka's rules from a certificate's subject (RFC 2253, as Java writes it) to the principal's "
        'name, e.g. `RULE:^CN=([^,]+),.*$/$1/,DEFAULT`; a subject no rule takes is refused.'
    ),
    'authorizer_class_name': (
        'Empty: no authorizer, every request allowed (Kafka without one). '
        "`org.apache.kafka.metadata.authorizer.StandardAuthorizer` (or Kafka's older "
        "`kafka.security.authorizer.AclAuthorizer`) turns the ACLs on, with StandardAuthorizer's rules."
    ),
    'super_users': (
        'Principals allowed everything with no ACL looked at, `;`-separated '
        '(`User:admin;User:CN=node-1`).'
    ),
    'allow_everyone_if_no_acl_found': (
        'With an authorizer: allow a resource that no ACL covers at all (one ACL for anyone makes it '
        'deny-by-default for everyone else).'
    ),
}


INTRO = """\
# Configuration

<!-- Generated by `python -m cluster.config_doc > docs/configuration.md` from
`cluster.config.NodeConfig` and the descriptions in `cluster/config_doc.py`: edit those, not this
page (`tests/unit/test_docs.py` checks that it is current). -->

Settings come from, later ones winning: defaults < a TOML file (`kcoord node --config FILE`, flat
or under `[node]`) < environment variables `KCOORD_<SETTING>` < command-line flags
(`--node-id`, `--host`, `--port`, `--data-dir`, `--set NAME=VALUE`). In TOML and `--set` a setting
may be named by its field name or by Kafka's dotted name. `kcoord up` takes `--set` too and hands
it to every node.

Topic settings (`retention.ms`, `retention.bytes`, `cleanup.policy`, `max.message.bytes`) are per
topic, given at creation (`kcoord topics create --config K=V`, or CreateTopics from any admin
client); see [limits](limits.md#topics).

| setting | Kafka name | environment | default | meaning |
|---|---|---|---|---|
"""

OUTRO = """
Example, one node of three:

```
KCOORD_CLUSTER_SECRET=... kcoord node --node-id 1 --port 9093 --data-dir ./data/node-1 \\
    --set peers=127.0.0.1:9092:19000,127.0.0.1:9093:20000,127.0.0.1:9094:21000 \\
    --set metrics_port=9405 --set group.initial.rebalance.delay.ms=0
```

How to run nodes (`kcoord up`, containers, by hand) is in [operations](operations.md); the
security settings together are explained in [security](security.md).
"""


def settings() -> list[dataclasses.Field[Any]]:
    """NodeConfig's settings, in declaration order."""
    return [f for f in dataclasses.fields(NodeConfig) if f.name not in NOT_SETTINGS]


def kafka_name(name: str) -> str | None:
    return KAFKA_NAMES.get(name) or KAFKA_NAME_PATTERNS.get(name)


def env_name(name: str) -> str:
    return f"KCOORD_{name.upper()}"


def default_text(f: dataclasses.Field[Any]) -> str:
    value = f.default
    if value is dataclasses.MISSING:
        factory = f.default_factory
        value = factory() if factory is not dataclasses.MISSING else None
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value == "":
        return "(empty)"
    return f"`{value}`"


def row(f: dataclasses.Field[Any]) -> str:
    kafka = kafka_name(f.name)
    cells = [
        f"`{f.name}`",
        f"`{kafka}`" if kafka else "—",
        f"`{env_name(f.name)}`",
        default_text(f),
        DESCRIPTIONS[f.name].replace("|", "\\|"),
    ]
    return "| " + " | ".join(cells) + " |"


def render() -> str:
    """The whole of docs/configuration.md. KeyError if a setting has no description."""
    return INTRO + "".join(row(f) + "\n" for f in settings()) + OUTRO


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
