"""Every differential scenario (``tests/diff/scenarios.py``) against Apache Kafka 4.4 and kcoord,
three nodes each (Kafka from Maven Central, ``bench/kafka_peer.py``). A difference fails its
scenario unless ``KNOWN`` lists it (each also in ``docs/compatibility.md``). Slow: Kafka's
cluster takes about 15 s to start; ``pytest -m slow tests/diff`` runs it all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.cluster_harness import Cluster
from tests.diff import scenarios as _scenarios  # noqa: F401 - registers the scenarios
from tests.diff import secured_scenarios as _secured  # noqa: F401 - and the secured ones
from tests.diff.generated import SERVED  # registers the generated scenarios too
from tests.diff.harness import SCENARIOS, SECURED, differences, run
from tests.wire.raw import RawConn, api_versions_v0

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# (scenario, path prefix) -> why kcoord answers otherwise; each reason also in docs/compatibility.md
KNOWN: dict[tuple[str, str], str] = {
    ("*", "[min.insync.replicas]"): "the Kafka peer sets min.insync.replicas=2 (bench/kafka_peer.py); kcoord "
                                    "describes Kafka's default and writes every partition to a majority",
    ("*", "leader_epoch"): "a partition's leader epoch is its leader's Raft term (Kafka counts leader changes "
                           "from 0): the same role, other numbers",
}
# The generated scenarios' (tests/diff/generated.py): each API's minimal request, its names not
# existing (minimal_) or existing (existing_)
for _scenario, _label in [*((sc, label) for sc in ("a_consumer_group_member_joins_beats_and_leaves",
                                                     "a_group_heartbeat_interval_set_for_the_group")
                            for label in ("join.member_epoch", "beat.member_epoch")),
                          *(("a_second_consumer_group_member_gets_partitions_the_first_revokes", f"{label}.member_epoch")
                            for label in ("a_joins", "a_owns_both", "b_joins", "a_told_to_revoke", "a_revoked",
                                          "b_gets_the_other"))]:
    KNOWN[(_scenario, _label)] = (
        "a new consumer group starts at group epoch 0 here, as in Kafka before 4.3; Kafka 4.3+ starts it at 1, "
        "so its first member's epoch is 2 there and 1 here (clients echo what the coordinator sent)")
KNOWN[("existing_28_v0", "existing.topics")] = (
    "TxnOffsetCommit v0 with a producer id the transaction does not have: Kafka 4.4 answers "
    "INVALID_PRODUCER_EPOCH or INVALID_PRODUCER_ID_MAPPING from one run to the next; kcoord answers the "
    "latter, as both do from v1")
for _label in ("unknown.", "cleared_node_0."):
    KNOWN[("a_nodes_log_defaults_refused", _label)] = (
        "a BROKER config name kcoord does not read (a plugin's, or one of Kafka's it does not honour): Kafka keeps "
        "it, kcoord refuses it (INVALID_REQUEST) rather than report a change that never happens")
KNOWN[("acls_the_authorizer_refuses", "create_match.")] = (
    "CreateAcls of a MATCH pattern (a filter's type, not an ACL's): Kafka 4.4 fails the whole request with "
    "UNKNOWN_SERVER_ERROR; kcoord refuses that creation with INVALID_REQUEST and says why")
for _kind, _v in (("minimal", 12), ("existing", 12), ("minimal", 13), ("existing", 13)):
    KNOWN[(f"{_kind}_3_v{_v}", f"{_kind}.")] = (
        "a Metadata topic with neither a name nor an id: Kafka 4.4 fails the whole request (UNKNOWN_SERVER_ERROR, "
        "no brokers); kcoord answers UNKNOWN_TOPIC_ID for it")
for _kind in ("minimal", "existing"):
    for _key, _v in ((84, 0), (85, 1)):
        KNOWN[(f"{_kind}_{_key}_v{_v}", f"{_kind}.results")] = (
            "Read/WriteShareGroupState (between nodes): Kafka's share coordinator of the key, a partition of "
            "__share_group_state, answers; kcoord's share state is kept by the group's own coordinator, which "
            "answers INVALID_REQUEST for share state it does not have (docs/compatibility.md, share groups)")
for _v in (0, 1):
    KNOWN[(f"existing_90_v{_v}", "existing.groups")] = (
        "DescribeShareGroupOffsets naming an existing topic for a group with no share state (here a classic "
        "group's id): Kafka 4.4 fails the group with UNKNOWN_SERVER_ERROR (its share coordinator's summary read "
        "fails); kcoord answers the partitions with start offset -1, as Kafka does for an unknown topic")
for _kind, _v in (("minimal", 1), ("existing", 1), ("minimal", 2), ("existing", 2)):
    KNOWN[(f"{_kind}_27_v{_v}", f"{_kind}.markers")] = (
        "WriteTxnMarkers for a marker naming no partition: Kafka 4.4 leaves the marker out of its answer; kcoord "
        "answers it with no topics")


def _fewer_versions(path: str, theirs: Any, ours: Any) -> bool:
    """ApiVersions: kcoord may serve fewer APIs, and some at fewer versions (docs/compatibility.md),
    never a version Kafka 4.4 does not."""
    if not path.startswith("api_versions.") or path == "api_versions.error" or theirs == "(absent)":
        return False
    if ours == "(absent)":
        return True
    (lo, hi), (our_lo, our_hi) = (map(int, str(theirs).split("-")), map(int, str(ours).split("-")))
    return lo <= our_lo <= our_hi <= hi


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    from bench.kafka_peer import start_kafka

    kafka = start_kafka(3)
    # kcoord with the Kafka peer's settings (bench/kafka_peer.py) where they change an answer
    cluster = Cluster(tmp_path_factory.mktemp("diff"), settings={"group.initial.rebalance.delay.ms": 0,
                                                                "auto.create.topics.enable": "false",
                                                                "group.share.enable": True})
    try:  # from here: Kafka's brokers stop even if kcoord's nodes do not start
        cluster.start()
        yield {"kafka": kafka[0].bootstrap, "kcoord": cluster.bootstrap}
    finally:
        for k in kafka:
            k.stop()
        cluster.kill_all()


@pytest.fixture(scope="module")
def secured_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, str]]]:
    """Both sides with a SASL_PLAINTEXT listener beside the PLAINTEXT one, PLAIN users and Kafka's
    StandardAuthorizer: (the PLAINTEXT bootstrap, a SASL listener's address) each."""
    import trustme

    from bench.kafka_peer import SASL_USERS, SUPER_USERS, start_kafka
    from cluster.tools.local_cluster import free_port

    kafka_sasl = [free_port() for _ in range(3)]
    tmp = tmp_path_factory.mktemp("diff-secured")
    ca = trustme.CA(organization_name="kcoord diff")
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    ca.issue_cert("127.0.0.1", common_name="kcoord-node").private_key_and_cert_chain_pem.write_to_path(
        str(tmp / "node.pem"))
    kafka = start_kafka(3, sasl_ports=kafka_sasl)
    # kcoord's nodes talk to each other over SSL with their certificates (it refuses an authorizer
    # otherwise); clients use a PLAINTEXT listener (ANONYMOUS, a super user, as on Kafka's side)
    # and a SASL_PLAINTEXT one
    cluster = Cluster(tmp / "cluster", settings={
        "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false",
        "sasl.enabled.mechanisms": "PLAIN", "sasl_users": ",".join(f"{u}:{p}" for u, p in SASL_USERS.items()),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "ssl.keystore.location": str(tmp / "node.pem"), "ssl.truststore.location": str(tmp / "ca.pem"),
        "ssl.client.auth": "required", "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "listener.security.protocol.map": "SSL:SSL,CLIENTS:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "super.users": f"User:kcoord-node;{SUPER_USERS}"})
    plain, sasl = [free_port() for _ in range(3)], [free_port() for _ in range(3)]
    cluster.per_node = {i: {"listeners": f"SSL://127.0.0.1:{n.kafka_port},CLIENTS://127.0.0.1:{plain[i]},"
                                         f"SASL_PLAINTEXT://127.0.0.1:{sasl[i]}"} for i, n in enumerate(cluster.layout)}
    try:  # from here: Kafka's brokers stop even if kcoord's nodes do not start
        cluster.start()
        yield {"kafka": (kafka[0].bootstrap, f"127.0.0.1:{kafka_sasl[0]}"),
               "kcoord": (f"127.0.0.1:{plain[0]}", f"127.0.0.1:{sasl[0]}")}
    finally:
        for k in kafka:
            k.stop()
        cluster.kill_all()


def _known(name: str, path: str) -> str | None:
    """Why a difference at ``path`` of scenario ``name`` is expected: a scenario's own entry
    names a path prefix; a ``*`` entry, a part of any path."""
    return next((why for (sc, part), why in KNOWN.items()
                 if (sc == name and path.startswith(part)) or (sc == "*" and part in path)), None)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_kcoord_answers_as_kafka(servers: dict[str, str], name: str) -> None:
    _compare(name, run(SCENARIOS[name], servers["kafka"], name), run(SCENARIOS[name], servers["kcoord"], name))


def _compare(name: str, theirs: dict[str, Any], ours: dict[str, Any]) -> None:
    """Every difference printed (``~`` known, ``!`` not); the test fails on any unknown one."""
    unexplained = []
    for path, a, b in differences(theirs, ours):
        why = _known(name, path) or ("a subset of Kafka's versions" if _fewer_versions(path, a, b) else None)
        print(f"{'~' if why else '!'} {name} {path}: kafka={a!r} kcoord={b!r}" + (f"  [{why}]" if why else ""))
        if why is None:
            unexplained.append((path, a, b))
    assert not unexplained, f"{name}: {len(unexplained)} differences from Kafka 4.4: {unexplained[:10]}"


@pytest.mark.parametrize("name", sorted(SECURED))
def test_kcoord_answers_as_kafka_when_secured(secured_servers: dict[str, tuple[str, str]], name: str) -> None:
    (kafka, kafka_sasl), (kcoord, kcoord_sasl) = secured_servers["kafka"], secured_servers["kcoord"]
    _compare(name, run(SECURED[name], kafka, name, kafka_sasl), run(SECURED[name], kcoord, name, kcoord_sasl))


def test_the_generated_table_is_what_kcoord_serves(servers: dict[str, str]) -> None:
    conn = RawConn(servers["kcoord"].split(",")[0])
    try:
        _corr, _err, apis = api_versions_v0(conn)
    finally:
        conn.close()
    advertised = dict(SERVED)
    advertised[0] = (0, SERVED[0][1])  # Produce: v0-2 advertised (clients check for them), v3+ served
    assert {key: (lo, hi) for key, lo, hi in apis if key not in (17, 18, 36)} == advertised
