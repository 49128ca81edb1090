"""DescribeTopicPartitions (75) and DescribeLogDirs (35): topics described a page at a time with
Kafka's cursor and errors, and the node's log directory with each partition's size on disk.
Asked as clients ask: raw requests (the Java Admin's paths), and confluent-kafka's AdminClient to
create and fill the topics."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from cluster.apis.common import req_mod
from tests.wire.raw import ask as _ask


def _pages(bootstrap: str, names: list[str], limit: int) -> list[Any]:
    m = req_mod(75, 0)
    pages, cursor = [], None
    while True:
        resp = _ask(bootstrap, 75, 0, m.DescribeTopicPartitionsRequest(
            topics=tuple(m.TopicRequest(name=n) for n in names), response_partition_limit=limit, cursor=cursor))
        pages.append(resp)
        if resp.next_cursor is None:
            return pages
        cursor = m.Cursor(topic_name=resp.next_cursor.topic_name, partition_index=resp.next_cursor.partition_index)


def test_topics_are_described_a_page_at_a_time(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, n in (("dtp-b", 3), ("dtp-a", 2), ("dtp-c", 1)):
        admin.create_topics([NewTopic(name, n, 1)])[name].result(15)
    # every topic (an empty list), two partitions a page: sorted by name, each partition once
    pages = _pages(bootstrap, [], 2)
    seen = [(t.name, p.partition_index) for page in pages for t in page.topics for p in t.partitions]
    assert seen == [("dtp-a", 0), ("dtp-a", 1), ("dtp-b", 0), ("dtp-b", 1), ("dtp-b", 2), ("dtp-c", 0)], seen
    assert len(pages) == 3 and all(sum(len(t.partitions) for t in page.topics) <= 2 for page in pages)
    first = pages[0].topics[0]
    assert first.error_code == ErrorCode.none and str(first.topic_id) != "00000000-0000-0000-0000-000000000000"
    assert first.partitions[0].leader_id == 0 and first.partitions[0].replica_nodes == (0,)
    # named topics, one unknown; the unknown one is answered in name order with its error
    resp = _pages(bootstrap, ["dtp-c", "nope", "dtp-a"], 100)
    assert len(resp) == 1
    assert [(t.name, t.error_code) for t in resp[0].topics] == [
        ("dtp-a", ErrorCode.none), ("dtp-c", ErrorCode.none), ("nope", ErrorCode.unknown_topic_or_partition)]
    # a cursor on a topic the request does not list
    m = req_mod(75, 0)
    bad = _ask(bootstrap, 75, 0, m.DescribeTopicPartitionsRequest(
        topics=(m.TopicRequest(name="dtp-a"),), response_partition_limit=10,
        cursor=m.Cursor(topic_name="dtp-b", partition_index=0)))
    assert [t.error_code for t in bad.topics] == [ErrorCode.invalid_request]


def test_the_log_dir_lists_each_partitions_size(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("ldir", 2, 1)])["ldir"].result(15)
    p = Producer({"bootstrap.servers": bootstrap})
    for _ in range(50):
        p.produce("ldir", value=b"x" * 1000, partition=1)
    assert p.flush(15) == 0
    m = req_mod(35, 4)
    resp = _ask(bootstrap, 35, 4, m.DescribeLogDirsRequest(topics=None))
    assert resp.error_code == ErrorCode.none and len(resp.results) == 1
    d = resp.results[0]
    assert d.log_dir.startswith("/") and d.total_bytes > d.usable_bytes > 0
    sizes = {(t.name, p.partition_index): p.partition_size for t in d.topics for p in t.partitions}
    assert sizes[("ldir", 0)] == 0 and sizes[("ldir", 1)] > 50 * 1000, sizes
    only = _ask(bootstrap, 35, 4, m.DescribeLogDirsRequest(topics=(m.DescribableLogDirTopic(topic="ldir",
                                                                                            partitions=(1, 7)),)))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in only.results[0].topics] == [("ldir", [1])]
