"""Partitions are Raft groups: how many one request and the whole cluster may create is bounded
(POLICY_VIOLATION past it; auto-creation refused), so a client cannot exhaust a node."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.harness import NodeProcess

pytestmark = pytest.mark.cluster


def test_partition_limits(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    node = NodeProcess(tmp_path, settings={"max_partitions_per_request": 8, "max_partitions": 12}).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        with pytest.raises(Exception, match="POLICY_VIOLATION"):
            admin.create_topics([NewTopic("too-wide", 9, 1)])["too-wide"].result(10)
        both = admin.create_topics([NewTopic("a", 5, 1), NewTopic("b", 5, 1)])  # 10 > 8 in one request
        both["a"].result(10)
        with pytest.raises(Exception, match="POLICY_VIOLATION"):
            both["b"].result(10)
        admin.create_topics([NewTopic("c", 7, 1)])["c"].result(10)  # 5 + 7 = 12: the cluster is full
        with pytest.raises(Exception, match="POLICY_VIOLATION"):
            admin.create_topics([NewTopic("d", 1, 1)])["d"].result(10)
        md = admin.list_topics("auto-created", timeout=10)  # auto-creation is refused too
        assert "auto-created" not in {t for t, m in md.topics.items() if m.error is None}
        assert node.alive() and "topic_auto_create_refused" in node.log_text()
    finally:
        node.kill()


def test_one_request_may_fill_the_cluster_exactly(tmp_path: Path) -> None:
    """The topics a request created already count in the metadata: they used to be counted
    twice, and the third topic here was refused (8 + 8 + 4 > 12)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    node = NodeProcess(tmp_path, settings={"max_partitions": 12}).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        for f in admin.create_topics([NewTopic(name, 4, 1) for name in ("a", "b", "c")]).values():
            f.result(10)
        with pytest.raises(Exception, match="POLICY_VIOLATION"):
            admin.create_topics([NewTopic("d", 1, 1)])["d"].result(10)
    finally:
        node.kill()


def test_a_topics_max_message_bytes_past_the_nodes_message_max_bytes_is_refused(tmp_path: Path) -> None:
    """Kafka takes any value; here it would raise what a gzip batch may inflate to (16 x it)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    node = NodeProcess(tmp_path, settings={"message_max_bytes": 2_000_000}).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        huge = NewTopic("huge", 1, 1, config={"max.message.bytes": "2147483647"})
        with pytest.raises(Exception, match="INVALID_CONFIG.*message.max.bytes \\(2000000\\)"):
            admin.create_topics([huge])["huge"].result(10)
        admin.create_topics([NewTopic("ok", 1, 1, config={"max.message.bytes": "2000000"})])["ok"].result(10)
    finally:
        node.kill()


def test_concurrent_creations_in_a_cluster_cannot_together_pass_max_partitions(tmp_path: Path) -> None:
    """Six requests of 4 partitions at once under max_partitions=12: each saw an empty cluster
    when it was checked, so all six used to be created (24 Raft groups per node). Where they are
    applied, in the metadata log's order, only three fit."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from tests.cluster.cluster_harness import Cluster

    cluster = Cluster(tmp_path, settings={"max_partitions": 12}).start()
    try:
        admins = [AdminClient({"bootstrap.servers": cluster.bootstrap}) for _ in range(6)]
        for a in admins:
            a.list_topics(timeout=20)  # connected before the race
        futures = [a.create_topics([NewTopic(f"t{i}", 4, 3)])[f"t{i}"] for i, a in enumerate(admins)]
        refused = []
        for f in futures:
            try:
                f.result(30)
            except Exception as e:  # noqa: BLE001 - each refusal is looked at below
                refused.append(str(e))
        assert len(refused) == 3 and all("POLICY_VIOLATION" in r and "max_partitions=12" in r for r in refused)
        topics = admins[0].list_topics(timeout=10).topics
        assert sum(len(t.partitions) for name, t in topics.items() if not name.startswith("__")) == 12
    finally:
        cluster.kill_all()
