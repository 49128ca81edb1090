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
