"""The operators' tools (``kcoord groups|topics|status``) against a live node with real clients.

``groups describe`` is checked against the AdminClient's DescribeGroups and OffsetFetch answers;
``reset-offsets`` dry runs change nothing and ``--execute`` commits exactly what it printed.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.cli import main as kcoord
from tests.cluster.harness import ROOT, NodeProcess, free_port

pytestmark = pytest.mark.cluster


@pytest.fixture
def node(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[NodeProcess]:
    n = NodeProcess(tmp_path, settings={"group.initial.rebalance.delay.ms": 0}).start()
    yield n
    n.kill()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(f"--- node log ---\n{n.log_text()[-5000:]}")


def tool(capsys: pytest.CaptureFixture[str], bootstrap: str, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = kcoord([*argv, "--bootstrap-server", bootstrap])
    out, err = capsys.readouterr()
    return rc, out, err


def table(out: str, header_first: str = "GROUP") -> list[list[str]]:
    """Rows (whitespace-split) of the first table in ``out`` whose header starts with ``header_first``."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split() and ln.split()[0] == header_first)
    rows = []
    for ln in lines[start + 1:]:
        if not ln.strip():
            break
        rows.append(ln.split())
    return rows


def make_topic(bs: str, partitions: int = 3) -> str:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        f.result(timeout=15)
    return topic


def produce(bs: str, topic: str, per_partition: int, partitions: int = 3) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(per_partition * partitions):
        p.produce(topic, f"m{i}".encode(), partition=i % partitions)
    assert p.flush(15) == 0


def consumer(bs: str, group: str, topic: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    c.subscribe([topic])
    return c


def poll_until(consumers: list[Consumer], cond, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            c.poll(0.1)
        if cond():
            return
    raise AssertionError("condition not reached in time")


def committed(bs: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bs})
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=15)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def describe_admin(bs: str, group: str):  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": bs})  # keep a reference until the result is in
    return admin.describe_consumer_groups([group])[group].result(timeout=15)


def commit(bs: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as an inactive group would (OffsetCommit with no generation), through the admin API."""
    admin = AdminClient({"bootstrap.servers": bs})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, o) for p, o in offsets.items()])
    admin.alter_consumer_group_offsets([req])[group].result(timeout=15)


# ------------------------------------------------------------------ groups: list / describe


def test_groups_list_and_describe_match_describe_groups_and_offset_fetch(
        node: NodeProcess, capsys: pytest.CaptureFixture[str]) -> None:
    bs = node.bootstrap
    topic = make_topic(bs)
    produce(bs, topic, per_partition=10)
    group = f"g-{uuid.uuid4().hex[:8]}"
    cs = [consumer(bs, group, topic), consumer(bs, group, topic)]
    try:
        def stable_with_two() -> bool:
            d = describe_admin(bs, group)
            return str(d.state.name) == "STABLE" and len(d.members) == 2 and all(
                m.assignment.topic_partitions for m in d.members) and all(c.assignment() for c in cs)

        poll_until(cs, stable_with_two)
        # Each consumer commits offset 3 + its index on every partition it owns.
        for c in cs:
            parts = c.assignment()
            c.commit(offsets=[TopicPartition(topic, tp.partition, 3 + tp.partition) for tp in parts],
                     asynchronous=False)

        d = describe_admin(bs, group)
        offsets = committed(bs, group)
        owners = {(tp.topic, tp.partition): m for m in d.members for tp in m.assignment.topic_partitions}
        assert set(owners) == {(topic, p) for p in range(3)}

        rc, out, err = tool(capsys, bs, "groups", "describe", "--group", group)
        assert rc == 0, err
        assert out.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                                               "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        rows = table(out)
        assert len(rows) == 3
        for g, t, p, cur, end, lag, member, host, client in rows:
            m = owners[(t, int(p))]
            assert (g, t) == (group, topic)
            assert int(cur) == offsets[(t, int(p))] == 3 + int(p)
            assert int(end) == 10
            assert int(lag) == 10 - int(cur)
            assert (member, host, client) == (m.member_id, m.host, m.client_id)

        rc, out, err = tool(capsys, bs, "groups", "describe", "--group", group, "--members", "--verbose")
        assert rc == 0, err
        assert out.splitlines()[0].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                                               "#PARTITIONS", "ASSIGNMENT"]
        got = {r[1]: r for r in table(out)}
        assert set(got) == {m.member_id for m in d.members}
        for m in d.members:
            _, _, instance, host, client, n, assignment = got[m.member_id]
            parts = sorted(tp.partition for tp in m.assignment.topic_partitions)
            assert (instance, host, client, int(n)) == ("-", m.host, m.client_id, len(parts))
            assert assignment == f"{topic}({','.join(map(str, parts))})"

        rc, out, err = tool(capsys, bs, "groups", "describe", "--group", group, "--members")
        assert rc == 0, err
        assert out.splitlines()[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert sum(int(r[4]) for r in table(out)) == 3

        rc, out, err = tool(capsys, bs, "groups", "describe", "--group", group, "--state")
        assert rc == 0, err
        header, row = out.splitlines()[:2]
        assert header.split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        c = d.coordinator
        assert row.split() == [group, f"{c.host}:{c.port}", f"({c.id})", d.partition_assignor, "Stable", "2"]

        rc, out, _ = tool(capsys, bs, "groups", "list")
        assert rc == 0 and group in out.split()
        rc, out, _ = tool(capsys, bs, "groups", "list", "--state")
        assert [group, "Stable"] in table(out)
        rc, out, _ = tool(capsys, bs, "groups", "list", "--state", "Stable,Empty")
        assert [group, "Stable"] in table(out)
        rc, out, _ = tool(capsys, bs, "groups", "list", "--state", "Empty")
        assert group not in out

        # Active group: reset refused as Kafka refuses it, nothing changes.
        before = committed(bs, group)
        rc, out, err = tool(capsys, bs, "groups", "reset-offsets", "--group", group, "--all-topics",
                            "--to-earliest", "--execute")
        assert rc == 1
        assert (f"Assignments can only be reset if the group '{group}' is inactive, but the current state is "
                "Stable.") in err
        assert committed(bs, group) == before

        # Deleting a group with members is refused too.
        rc, out, err = tool(capsys, bs, "groups", "delete", "--group", group)
        assert rc == 1 and "NON_EMPTY_GROUP" in err
    finally:
        for c in cs:
            c.close()

    # After the consumers left: no members, offsets still described with "-" owners.
    rc, out, err = tool(capsys, bs, "groups", "describe", "--group", group)
    assert rc == 0 and f"Consumer group '{group}' has no active members." in err
    rows = table(out)
    assert [r[6:] for r in rows] == [["-", "-", "-"]] * 3
    assert {(r[1], int(r[2])): int(r[3]) for r in rows} == committed(bs, group)

    rc, out, err = tool(capsys, bs, "groups", "describe", "--group", "no-such-group")
    assert rc == 1 and "Consumer group 'no-such-group' does not exist." in err


# ------------------------------------------------------------------ groups: reset-offsets


def _plan(out: str) -> dict[tuple[str, int], int]:
    assert out.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    return {(r[1], int(r[2])): int(r[3]) for r in table(out)}


def test_reset_offsets_dry_run_changes_nothing_and_execute_commits_what_it_printed(
        node: NodeProcess, capsys: pytest.CaptureFixture[str]) -> None:
    bs = node.bootstrap
    topic = make_topic(bs)
    produce(bs, topic, per_partition=10)
    time.sleep(0.05)
    middle = datetime.now(UTC)
    time.sleep(0.05)
    produce(bs, topic, per_partition=5)  # offsets 10..14 of each partition are after `middle`
    group = f"g-{uuid.uuid4().hex[:8]}"
    commit(bs, group, topic, {0: 2, 1: 5, 2: 14})
    start = committed(bs, group)
    assert start == {(topic, 0): 2, (topic, 1): 5, (topic, 2): 14}

    cases: list[tuple[list[str], dict[int, int]]] = [
        (["--to-earliest"], {0: 0, 1: 0, 2: 0}),
        (["--to-latest"], {0: 15, 1: 15, 2: 15}),
        (["--to-offset", "7"], {0: 7, 1: 7, 2: 7}),
        (["--to-offset", "99"], {0: 15, 1: 15, 2: 15}),  # clamped to the log end, with a warning
        (["--shift-by", "3"], {0: 5, 1: 8, 2: 15}),
        (["--shift-by", "-4"], {0: 0, 1: 1, 2: 10}),
        (["--to-current"], {0: 2, 1: 5, 2: 14}),
        (["--to-datetime", middle.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"], {0: 10, 1: 10, 2: 10}),
        (["--by-duration", "P1D"], {0: 0, 1: 0, 2: 0}),
    ]
    for spec, expected in cases:
        want = {(topic, p): o for p, o in expected.items()}
        # Default (no --dry-run/--execute) and explicit --dry-run: print the plan, change nothing.
        for mode in ([], ["--dry-run"]):
            rc, out, err = tool(capsys, bs, "groups", "reset-offsets", "--group", group, "--topic", topic,
                                *spec, *mode)
            assert rc == 0, (spec, err)
            assert _plan(out) == want, spec
            assert committed(bs, group) == start, spec
            if not mode:
                assert "No action will be performed as the --execute option is missing" in err

    # A partition subset, executed: exactly what was printed is committed, nothing else moves.
    rc, out, err = tool(capsys, bs, "groups", "reset-offsets", "--group", group, "--topic", f"{topic}:0,2",
                        "--to-offset", "9", "--execute")
    assert rc == 0, err
    printed = _plan(out)
    assert printed == {(topic, 0): 9, (topic, 2): 9}
    assert committed(bs, group) == {**start, **printed}

    # --all-topics covers the partitions the group has offsets for.
    rc, out, err = tool(capsys, bs, "groups", "reset-offsets", "--group", group, "--all-topics", "--shift-by", "-1",
                        "--execute")
    assert rc == 0, err
    printed = _plan(out)
    assert printed == {(topic, 0): 8, (topic, 1): 4, (topic, 2): 8}
    assert committed(bs, group) == printed

    # The reset offsets are where a new consumer of the group starts.
    c = consumer(bs, group, topic)
    try:
        seen: dict[int, int] = {}

        def first_of_each() -> bool:
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen.setdefault(m.partition(), m.offset())
            return len(seen) == 3

        poll_until([], first_of_each)
        assert seen == {0: 8, 1: 4, 2: 8}
    finally:
        c.close()


# ------------------------------------------------------------------ groups: delete-offsets / delete


def test_delete_offsets_and_delete_group(node: NodeProcess, capsys: pytest.CaptureFixture[str]) -> None:
    bs = node.bootstrap
    topic = make_topic(bs)
    other = make_topic(bs, partitions=1)
    produce(bs, topic, per_partition=3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    commit(bs, group, topic, {0: 1, 1: 2, 2: 3})
    commit(bs, group, other, {0: 0})

    rc, out, err = tool(capsys, bs, "groups", "delete-offsets", "--group", group, "--topic", f"{topic}:1")
    assert rc == 0, err
    assert f"Request succeed for deleting offsets with topic {topic} group {group}" in out
    assert table(out, "TOPIC") == [[topic, "1", "Successful"]]
    assert committed(bs, group) == {(topic, 0): 1, (topic, 2): 3, (other, 0): 0}

    rc, out, err = tool(capsys, bs, "groups", "delete-offsets", "--group", group, "--topic", other)
    assert rc == 0, err
    assert committed(bs, group) == {(topic, 0): 1, (topic, 2): 3}

    rc, out, err = tool(capsys, bs, "groups", "delete-offsets", "--group", "no-such-group", "--topic", topic)
    assert rc == 1 and "does not exist" in err

    rc, out, err = tool(capsys, bs, "groups", "delete", "--group", group)
    assert rc == 0, err
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out
    rc, out, _ = tool(capsys, bs, "groups", "list")
    assert group not in out.split()
    assert committed(bs, group) == {}


# ------------------------------------------------------------------ topics


def test_topics_create_list_describe_delete(node: NodeProcess, capsys: pytest.CaptureFixture[str]) -> None:
    bs = node.bootstrap
    name = f"t-{uuid.uuid4().hex[:8]}"
    rc, out, err = tool(capsys, bs, "topics", "create", "--topic", name, "--partitions", "4")
    assert rc == 0 and f"Created topic {name}." in out, err
    rc, out, err = tool(capsys, bs, "topics", "create", "--topic", name, "--partitions", "4")
    assert rc == 1 and "already exists" in err
    rc, out, err = tool(capsys, bs, "topics", "create", "--topic", name, "--if-not-exists")
    assert rc == 0, err

    rc, out, _ = tool(capsys, bs, "topics", "list")
    assert rc == 0 and name in out.split() and "__consumer_offsets" in out.split()
    rc, out, _ = tool(capsys, bs, "topics", "list", "--exclude-internal")
    assert "__consumer_offsets" not in out.split()

    rc, out, err = tool(capsys, bs, "topics", "describe", "--topic", name)
    assert rc == 0, err
    md = AdminClient({"bootstrap.servers": bs}).list_topics(topic=name, timeout=10).topics[name]
    rf = len(md.partitions[0].replicas)  # 1 on a single node, the cluster size under Raft
    assert table(out, "TOPIC")[0] == [name, "4", str(rf)]
    parts = [r.split() for r in out.splitlines() if r.split()[:1] == [name] and len(r.split()) == 5]
    assert [[int(r[1]), int(r[2]), r[3], r[4]] for r in parts] == [
        [p, md.partitions[p].leader, ",".join(map(str, md.partitions[p].replicas)),
         ",".join(map(str, md.partitions[p].isrs))] for p in range(4)]

    rc, out, err = tool(capsys, bs, "topics", "describe", "--topic", "missing-topic")
    assert rc == 1 and "'missing-topic' does not exist" in err
    # Looking at a topic does not create it.
    assert "missing-topic" not in AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10).topics

    rc, out, err = tool(capsys, bs, "topics", "delete", "--topic", name)
    assert rc == 0 and f"Deleted topic {name}." in out, err
    # On a cluster the other nodes apply the metadata change a moment later (as Kafka brokers do).
    for _ in range(50):
        rc, out, _ = tool(capsys, bs, "topics", "list")
        if name not in out.split():
            break
        time.sleep(0.1)
    assert name not in out.split()
    rc, out, err = tool(capsys, bs, "topics", "delete", "--topic", name)
    assert rc == 1
    rc, out, err = tool(capsys, bs, "topics", "delete", "--topic", name, "--if-exists")
    assert rc == 0, err


def test_topics_alter_and_configs_describe_alter(node: NodeProcess, capsys: pytest.CaptureFixture[str]) -> None:
    bs = node.bootstrap
    name = f"c-{uuid.uuid4().hex[:8]}"
    rc, out, err = tool(capsys, bs, "topics", "create", "--topic", name, "--partitions", "2",
                        "--config", "retention.ms=3600000")
    assert rc == 0, err
    rc, out, err = tool(capsys, bs, "topics", "alter", "--topic", name, "--partitions", "3")
    assert rc == 0 and "now has 3 partitions" in out, err
    rc, out, err = tool(capsys, bs, "topics", "alter", "--topic", name, "--partitions", "2")
    assert rc == 1 and "failed to alter" in err
    rc, out, err = tool(capsys, bs, "configs", "alter", "--topic", name, "--add-config",
                        "max.message.bytes=64000,cleanup.policy=compact", "--delete-config", "retention.ms")
    assert rc == 0 and f"Completed updating config for topic {name}." in out, err
    rc, out, err = tool(capsys, bs, "configs", "alter", "--topic", name, "--append-config", "cleanup.policy=delete")
    assert rc == 0, err
    rc, out, err = tool(capsys, bs, "configs", "describe", "--topic", name)
    assert rc == 0, err
    rows = {r[0]: r[1:] for r in (line.split() for line in out.splitlines()) if r and "." in r[0]}
    assert rows == {"cleanup.policy": ["compact,delete", "DYNAMIC_TOPIC_CONFIG"],
                    "max.message.bytes": ["64000", "DYNAMIC_TOPIC_CONFIG"]}, out
    rc, out, err = tool(capsys, bs, "configs", "describe", "--topic", name, "--all")
    assert "retention.ms" in out and "segment.bytes" in out
    rc, out, err = tool(capsys, bs, "configs", "alter", "--topic", name, "--add-config", "retention.ms=soon")
    assert rc == 1 and "INVALID_CONFIG" in err
    group = f"g-{uuid.uuid4().hex[:8]}"  # a group's own configs (KIP-848)
    rc, out, err = tool(capsys, bs, "configs", "alter", "--group", group, "--add-config",
                        "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000")
    assert rc == 0 and f"Completed updating config for group {group}." in out, err
    rc, out, err = tool(capsys, bs, "configs", "describe", "--group", group)
    rows = {r[0]: r[1:] for r in (line.split() for line in out.splitlines()) if r and "." in r[0]}
    assert rc == 0 and rows == {"consumer.heartbeat.interval.ms": ["6000", "GROUP_CONFIG"],
                                "consumer.session.timeout.ms": ["50000", "GROUP_CONFIG"]}, (out, err)
    rc, out, err = tool(capsys, bs, "configs", "alter", "--group", group, "--add-config",
                        "consumer.session.timeout.ms=1000")  # below group.consumer.min.session.timeout.ms
    assert rc == 1 and "INVALID_CONFIG" in err
    rc, out, err = tool(capsys, bs, "configs", "alter", "--broker", "0", "--add-config", "log.retention.ms=3600000")
    assert rc == 0 and "Completed updating config for broker 0." in out, err
    rc, out, err = tool(capsys, bs, "configs", "describe", "--broker", "0")
    rows = {r[0]: r[1:] for r in (line.split() for line in out.splitlines()) if r and "." in r[0]}
    assert rc == 0 and rows["log.retention.ms"] == ["3600000", "DYNAMIC_BROKER_CONFIG"], out
    rc, out, err = tool(capsys, bs, "configs", "alter", "--broker", "0", "--add-config", "log.retention.check.interval.ms=1")
    assert rc == 1 and "INVALID_REQUEST" in err


# ------------------------------------------------------------------ status


def test_status_nodes_partitions_and_groups(node: NodeProcess, capsys: pytest.CaptureFixture[str]) -> None:
    bs = node.bootstrap
    topic = make_topic(bs, partitions=2)
    produce(bs, topic, per_partition=1, partitions=2)
    stable = f"g-{uuid.uuid4().hex[:8]}"
    empty = f"g-{uuid.uuid4().hex[:8]}"
    commit(bs, empty, topic, {0: 1})
    c = consumer(bs, stable, topic)
    try:
        poll_until([c], lambda: str(describe_admin(bs, stable).state.name) == "STABLE")
        n_topics = len(AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10).topics)
        rc, out, err = tool(capsys, bs, "status")
        assert rc == 0, err
        nodes = table(out, "NODE")
        # NODE ADDRESS STATUS DATA-PARTITIONS-LED OFFSETS-PARTITIONS-LED REPLICAS FOLLOWER-LAG
        assert nodes[0][:3] == [str(node.node_id), bs, "up"]
        assert int(nodes[0][3]) >= 2 and n_topics >= 1
        assert int(nodes[0][4]) == 16  # every __consumer_offsets partition (default offsets.topic.num.partitions)
        assert nodes[0][6] == "n/a"
        assert "Follower lag: n/a" in out
        groups = dict((r[0], int(r[1])) for r in table(out, "GROUP-STATE"))
        assert groups.get("Stable", 0) >= 1 and groups.get("Empty", 0) >= 1

        down = f"127.0.0.1:{free_port()}"
        rc, out, err = tool(capsys, f"{bs},{down}", "status", "--probe-timeout", "1000")
        assert rc == 1
        rows = table(out, "NODE")
        assert [r[:3] for r in rows] == [[str(node.node_id), bs, "up"], ["?", down, "down"]]
    finally:
        c.close()

    node.kill()
    rc, out, err = tool(capsys, bs, "status", "--timeout", "2000")
    assert rc == 1 and "cannot reach the cluster" in err


def test_kcoord_entry_point_runs_the_tools(node: NodeProcess) -> None:
    out = subprocess.run([sys.executable, "-m", "cluster.cli", "topics", "list", "--bootstrap-server",
                          node.bootstrap], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "__consumer_offsets" in out.stdout.split()
    help_out = subprocess.run([sys.executable, "-m", "cluster.cli", "groups", "reset-offsets", "--help"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
    for flag in ("--to-earliest", "--to-latest", "--to-offset", "--shift-by", "--to-datetime", "--all-topics",
                 "--dry-run", "--execute", "--bootstrap-server"):
        assert flag in help_out.stdout
