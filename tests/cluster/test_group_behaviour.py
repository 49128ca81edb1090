"""Group behaviour through real clients against one node.

Static members restart without a rebalance; a member killed without LeaveGroup is
evicted after its session timeout and its partitions move; commit metadata strings
round-trip; each client's admin API lists, describes and deletes groups.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.harness import NodeProcess

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
JS_DIR = Path(__file__).parent / "js"


@pytest.fixture
def fast_node(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A node whose first rebalance is not delayed, as Kafka's test clusters run."""
    node = NodeProcess(tmp_path, settings={"group.initial.rebalance.delay.ms": 0}).start()
    yield node
    node.kill()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(f"--- node log ---\n{node.log_text()[-5000:]}")


def make_topic(bootstrap: str, partitions: int = 4) -> str:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        f.result(timeout=15)
    return topic


def poll_until(consumers: list[Consumer], cond, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            c.poll(0.1)
        if cond():
            return
    raise AssertionError("condition not reached in time")


def describe(bootstrap: str, group: str):  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=15)


def test_static_member_restart_within_session_timeout_causes_no_rebalance(fast_node: NodeProcess) -> None:
    bs = fast_node.bootstrap
    topic = make_topic(bs)
    group = f"g-{uuid.uuid4().hex[:8]}"
    assigns: dict[str, int] = {"s1": 0, "s2": 0}

    def consumer(instance: str) -> Consumer:
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "group.instance.id": instance,
                      "session.timeout.ms": 10000, "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"})

        def on_assign(cons, parts) -> None:  # type: ignore[no-untyped-def]
            assigns[instance] += 1

        c.subscribe([topic], on_assign=on_assign)
        return c

    s1, s2 = consumer("s1"), consumer("s2")
    poll_until([s1, s2], lambda: len(s1.assignment()) + len(s2.assignment()) == 4
               and describe(bs, group).state == ConsumerGroupState.STABLE)
    before = describe(bs, group)
    s1_parts = sorted(tp.partition for tp in s1.assignment())
    s2_assigns = assigns["s2"]
    s1.close()  # static members send no LeaveGroup
    time.sleep(1.0)
    s1b = consumer("s1")
    poll_until([s1b, s2], lambda: len(s1b.assignment()) > 0)
    for _ in range(20):
        s2.poll(0.1)
        s1b.poll(0.1)
    after = describe(bs, group)
    assert after.state == ConsumerGroupState.STABLE
    assert sorted(tp.partition for tp in s1b.assignment()) == s1_parts
    assert assigns["s2"] == s2_assigns, "the other member was rebalanced"
    ids_before = {m.group_instance_id: m.member_id for m in before.members}
    ids_after = {m.group_instance_id: m.member_id for m in after.members}
    assert set(ids_after) == {"s1", "s2"}
    assert ids_after["s2"] == ids_before["s2"]
    assert ids_after["s1"] != ids_before["s1"], "the restarted static member got a new member id"
    s1b.close()
    s2.close()


VICTIM = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    bs, group, topic = sys.argv[1:4]
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500})
    c.subscribe([topic])
    printed = False
    while True:
        c.poll(0.2)
        if c.assignment() and not printed:
            print("assigned", len(c.assignment()), flush=True)
            printed = True
""")


def test_killed_member_is_evicted_after_session_timeout(fast_node: NodeProcess) -> None:
    bs = fast_node.bootstrap
    topic = make_topic(bs)
    group = f"g-{uuid.uuid4().hex[:8]}"
    victim = subprocess.Popen([sys.executable, "-c", VICTIM, bs, group, topic], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT)
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline().startswith("assigned")
        survivor = Consumer({"bootstrap.servers": bs, "group.id": group, "session.timeout.ms": 6000,
                             "heartbeat.interval.ms": 500})
        survivor.subscribe([topic])
        poll_until([survivor], lambda: 0 < len(survivor.assignment()) < 4
                   and len(describe(bs, group).members) == 2)
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.time()
        poll_until([survivor], lambda: len(survivor.assignment()) == 4, timeout=30)
        waited = time.time() - killed_at
        assert waited >= 4.0, f"evicted after {waited:.1f}s, before the 6 s session timeout could expire"
        assert len(describe(bs, group).members) == 1
        survivor.close()
    finally:
        victim.kill()
        victim.wait()


def test_commit_metadata_round_trips_through_confluent_and_kafka_python(fast_node: NodeProcess) -> None:
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTP

    bs = fast_node.bootstrap
    topic = make_topic(bs, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    tp = TopicPartition(topic, 0, 42, "checkpoint=é✓ 42")
    c.commit(offsets=[tp], asynchronous=False)
    got = c.committed([TopicPartition(topic, 0)], timeout=10)[0]
    assert (got.offset, got.metadata) == (42, "checkpoint=é✓ 42")
    # librdkafka sends its C string with the NUL terminator and the broker keeps it verbatim, as Kafka
    # does; confluent-kafka strips it on the way back, kafka-python shows it.
    stored = "checkpoint=é✓ 42\x00"
    c.close()

    kc = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    kc.assign([KTP(topic, 1)])
    kc.commit({KTP(topic, 1): OffsetAndMetadata(7, "kafka-python says hi", -1)})
    om = kc.committed(KTP(topic, 1), metadata=True)
    assert (om.offset, om.metadata) == (7, "kafka-python says hi")
    om0 = kc.committed(KTP(topic, 0), metadata=True)
    assert (om0.offset, om0.metadata) == (42, stored)
    kc.close()


def stable_group(bs: str, topic: str, group: str, n: int = 2) -> list[Consumer]:
    consumers = []
    for i in range(n):
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "client.id": f"member-{i}",
                      "heartbeat.interval.ms": 500})
        c.subscribe([topic])
        consumers.append(c)
    poll_until(consumers, lambda: sum(len(c.assignment()) for c in consumers) == 4
               and all(c.assignment() for c in consumers)
               and describe(bs, group).state == ConsumerGroupState.STABLE)
    return consumers


def test_confluent_admin_lists_describes_and_deletes_groups(fast_node: NodeProcess) -> None:
    bs = fast_node.bootstrap
    topic = make_topic(bs)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumers = stable_group(bs, topic, group)
    admin = AdminClient({"bootstrap.servers": bs})
    listed = admin.list_consumer_groups().result(timeout=15)
    assert group in {g.group_id for g in listed.valid}
    d = describe(bs, group)
    assert d.state == ConsumerGroupState.STABLE and len(d.members) == 2
    assert sorted(m.client_id for m in d.members) == ["member-0", "member-1"]
    assigned = sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions)
    assert assigned == [0, 1, 2, 3]
    for m, c in zip(sorted(d.members, key=lambda m: m.client_id), consumers, strict=True):
        assert sorted(tp.partition for tp in m.assignment.topic_partitions) == sorted(
            tp.partition for tp in c.assignment())
    busy = admin.delete_consumer_groups([group])[group]
    with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty|non-empty"):
        busy.result(timeout=15)
    for c in consumers:
        c.close()
    admin.delete_consumer_groups([group])[group].result(timeout=15)
    listed = admin.list_consumer_groups().result(timeout=15)
    assert group not in {g.group_id for g in listed.valid}


def test_kafka_python_admin_lists_describes_and_deletes_groups(fast_node: NodeProcess) -> None:
    from kafka import KafkaAdminClient

    bs = fast_node.bootstrap
    topic = make_topic(bs)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumers = stable_group(bs, topic, group)
    admin = KafkaAdminClient(bootstrap_servers=bs)
    listed = {g["group_id"]: g for g in admin.list_groups()}
    assert listed[group]["group_state"] == "Stable"
    desc = admin.describe_groups([group])[group]
    assert desc["group_state"] == "Stable" and desc["protocol_type"] == "consumer"
    assert sorted(m["client_id"] for m in desc["members"]) == ["member-0", "member-1"]
    parts = sorted(p for m in desc["members"] for a in m["member_assignment"]["assigned_partitions"]
                   for p in a["partitions"])
    assert parts == [0, 1, 2, 3]
    for c in consumers:
        c.close()
    assert admin.delete_groups([group]) == {group: "OK"}
    assert admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
    assert group not in {g["group_id"] for g in admin.list_groups()}
    admin.close()


def test_aiokafka_admin_lists_and_describes_groups(fast_node: NodeProcess) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    bs = fast_node.bootstrap
    topic = make_topic(bs)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumers = stable_group(bs, topic, group)

    async def main() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bs)
        await admin.start()
        try:
            assert group in [g[0] for g in await admin.list_consumer_groups()]
            (resp,) = await admin.describe_consumer_groups([group])
            (error, group_id, state, protocol_type, protocol, members) = resp.groups[0]
            assert (error, group_id, state, protocol_type, protocol) == (0, group, "Stable", "consumer", "range")
            assert sorted(m[1] for m in members) == ["member-0", "member-1"]
            for c in consumers:
                c.close()
            # aiokafka 0.14's admin has no DeleteGroups; the group is seen going Empty instead.
            (resp,) = await admin.describe_consumer_groups([group])
            assert resp.groups[0][2] == "Empty" and resp.groups[0][5] == []
        finally:
            await admin.close()

    asyncio.run(main())


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_kafkajs_admin_lists_describes_and_deletes_groups(fast_node: NodeProcess) -> None:
    bs = fast_node.bootstrap
    topic = make_topic(bs)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumers = stable_group(bs, topic, group)
    try:
        proc = subprocess.run(["node", str(JS_DIR / "admin_groups.js"), bs, group, "describe"],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert group in out["listed"]
        assert out["state"] == "Stable"
        assert sorted(out["clients"]) == ["member-0", "member-1"]
    finally:
        for c in consumers:
            c.close()
    proc = subprocess.run(["node", str(JS_DIR / "admin_groups.js"), bs, group, "delete"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert group not in out["listed"]
