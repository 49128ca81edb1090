"""Apache Kafka's own command-line tools (4.4, from the ``kafka-tools`` jar, resolved from Maven
Central into the cache outside the repository) against a 3-node cluster, as an operator runs them:
``kafka-topics`` creates, describes (DescribeTopicPartitions and DescribeConfigs), grows
(CreatePartitions) and lists topics; ``kafka-configs`` alters and describes a topic's configs
a consumer group's and the nodes' dynamic log defaults (IncrementalAlterConfigs); ``kafka-leader-election`` runs a preferred election (ElectLeaders);
``kafka-log-dirs`` describes every node's directory (DescribeLogDirs); ``kafka-metadata-quorum``
describes the metadata group's voters (DescribeQuorum); ``kafka-delete-records``
moves a partition's log start (DeleteRecords), which every replica keeps: the partition's next
leader, after the first is killed, starts there too. Then ``kafka-metadata-quorum
remove-controller`` (RemoveRaftVoter) takes a node out of the cluster: it stops by itself and the
quorum lists the two others. Last, a new node started with only ``bootstrap`` and without
auto-join follows as an observer, votes nowhere, and ``kafka-metadata-quorum add-controller``
(AddRaftVoter, reading its directory id from the meta.properties kcoord keeps) makes it a voter."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest
from kio.static.primitive import i32

from tests.cluster.cluster_harness import Cluster, report_apis
from tests.cluster.java_client import SLF4J_VERSION, maven_classpath
from tests.wire.raw import ask

pytestmark = pytest.mark.cluster

TOOLS_VERSION = "4.4.0"


def _tools_classpath() -> str:
    return maven_classpath(f"kafka-tools-{TOOLS_VERSION}", [
        ("org.apache.kafka", "kafka-tools", TOOLS_VERSION), ("org.slf4j", "slf4j-nop", SLF4J_VERSION)])


def _tool(cp: str, main: str, *args: str) -> str:
    java = shutil.which("java")
    assert java is not None, "the Kafka tools need a Java runtime"
    proc = subprocess.run([java, "-cp", cp, f"org.apache.kafka.tools.{main}", *args], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"{main} {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_the_kafka_tools_create_describe_grow_and_configure_a_topic(tmp_path: Path) -> None:
    cp = _tools_classpath()
    cluster = Cluster(tmp_path, nodes=4, settings={"group.initial.rebalance.delay.ms": 0},
                      per_node={3: {"controller.quorum.auto.join.enable": "false"}}, metrics=True)
    cluster.joining = cluster.bootstrapping = {3}
    cluster.start(0, 1, 2)
    try:
        boot = ["--bootstrap-server", _bootstrap(cluster)]
        _tool(cp, "TopicCommand", *boot, "--create", "--topic", "tools-t", "--partitions", "2",
              "--config", "retention.ms=3600000")
        described = _tool(cp, "TopicCommand", *boot, "--describe", "--topic", "tools-t")
        assert "PartitionCount: 2" in described and "retention.ms=3600000" in described, described
        _tool(cp, "TopicCommand", *boot, "--alter", "--topic", "tools-t", "--partitions", "4")
        described = _tool(cp, "TopicCommand", *boot, "--describe", "--topic", "tools-t")
        assert "PartitionCount: 4" in described and described.count("Partition: ") == 4, described
        assert "tools-t" in _tool(cp, "TopicCommand", *boot, "--list").split()
        _tool(cp, "ConfigCommand", *boot, "--alter", "--entity-type", "topics", "--entity-name", "tools-t",
              "--add-config", "cleanup.policy=compact,max.message.bytes=64000")
        _tool(cp, "ConfigCommand", *boot, "--alter", "--entity-type", "topics", "--entity-name", "tools-t",
              "--delete-config", "retention.ms")
        configs = _tool(cp, "ConfigCommand", *boot, "--describe", "--entity-type", "topics", "--entity-name",
                        "tools-t")
        assert "cleanup.policy=compact" in configs and "max.message.bytes=64000" in configs, configs
        assert "retention.ms=3600000" not in configs, configs
        _tool(cp, "ConfigCommand", *boot, "--alter", "--entity-type", "groups", "--entity-name", "tools-g",
              "--add-config", "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000")
        configs = _tool(cp, "ConfigCommand", *boot, "--describe", "--entity-type", "groups", "--entity-name",
                        "tools-g")
        assert "consumer.session.timeout.ms=50000" in configs and "consumer.heartbeat.interval.ms=6000" in configs, \
            configs
        _tool(cp, "ConfigCommand", *boot, "--alter", "--entity-type", "brokers", "--entity-default",
              "--add-config", "log.retention.ms=3600000")
        configs = _tool(cp, "ConfigCommand", *boot, "--describe", "--entity-type", "brokers", "--entity-default")
        assert "log.retention.ms=3600000" in configs, configs
        _tool(cp, "LeaderElectionCommand", *boot, "--election-type", "preferred", "--all-topic-partitions")
        dirs = _tool(cp, "LogDirsCommand", *boot, "--describe", "--topic-list", "tools-t")
        report = json.loads(next(line for line in dirs.splitlines() if line.startswith("{")))
        assert sorted(b["broker"] for b in report["brokers"]) == [0, 1, 2], report
        for b in report["brokers"]:
            assert sorted(p["partition"] for d in b["logDirs"] for p in d["partitions"]) == [
                f"tools-t-{i}" for i in range(4)], b
        status = _tool(cp, "MetadataQuorumCommand", *boot, "describe", "--status")
        assert "LeaderId:" in status and "HighWatermark:" in status and "CurrentVoters:" in status, status
        voters = next(line for line in status.splitlines() if line.startswith("CurrentVoters:"))
        assert all(f'"id": {i}' in voters for i in range(3)), status
        replication = _tool(cp, "MetadataQuorumCommand", *boot, "describe", "--replication")
        rows = [line.split() for line in replication.splitlines()[1:] if line.strip()]
        assert sorted(int(r[0]) for r in rows) == [0, 1, 2] and sum("Leader" in r for r in rows) == 1, replication
        _deleted_records_stay_deleted(cp, cluster, tmp_path)
        _a_node_is_removed(cp, cluster)
        _an_observer_is_added(cp, cluster, tmp_path)
    finally:
        report_apis(cluster)
        cluster.kill_all()


def _kcoord(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster.cli", *args], capture_output=True, text=True, timeout=60)


def _bootstrap(cluster: Cluster) -> str:
    """The nodes the cluster was formed with (node 3 joins later)."""
    return ",".join(cluster.address(i) for i in range(3))


def _deleted_records_stay_deleted(cp: str, cluster: Cluster, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    boot = ["--bootstrap-server", _bootstrap(cluster)]
    _tool(cp, "TopicCommand", *boot, "--create", "--topic", "tools-d", "--partitions", "1")
    producer = Producer({"bootstrap.servers": _bootstrap(cluster), "linger.ms": 0})
    for i in range(30):
        producer.produce("tools-d", value=b"%d" % i)
        producer.flush(10)
    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "tools-d", "partition": 0, "offset": 12}]}))
    out = _tool(cp, "DeleteRecordsCommand", *boot, "--offset-json-file", str(plan))
    assert "partition: tools-d-0\tlow_watermark: 12" in out, out

    def earliest() -> int:
        c = Consumer({"bootstrap.servers": _bootstrap(cluster), "group.id": "tools-d-probe"})
        try:
            return int(c.get_watermark_offsets(TopicPartition("tools-d", 0), timeout=10)[0])
        finally:
            c.close()

    assert earliest() == 12
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": _bootstrap(cluster)})
    leader = admin.list_topics("tools-d", timeout=10).topics["tools-d"].partitions[0].leader
    cluster.kill(leader)
    from tests.cluster.cluster_harness import wait_for

    wait_for(lambda: earliest() == 12, 30, "the next leader serving from offset 12", tolerate=(Exception,))
    cluster.start(leader)


def _a_node_is_removed(cp: str, cluster: Cluster) -> None:
    from tests.cluster.cluster_harness import wait_for

    boot = ["--bootstrap-server", cluster.address(0)]
    replication = _tool(cp, "MetadataQuorumCommand", *boot, "describe", "--replication")
    directory = next(r[1] for r in (line.split() for line in replication.splitlines()[1:]) if r and r[0] == "2")
    _tool(cp, "MetadataQuorumCommand", *boot, "remove-controller", "--controller-id", "2",
          f"--controller-directory-id={directory}")  # (an id may begin with "-": not an option)
    wait_for(lambda: not cluster.alive(2), 60, "node 2 to hand over and stop")
    proc = cluster.procs[2]
    assert proc is not None and proc.returncode == 0 and "event=node_left" in cluster.log_text(2)
    status = _tool(cp, "MetadataQuorumCommand", *boot, "describe", "--status")
    voters = next(line for line in status.splitlines() if line.startswith("CurrentVoters:"))
    assert '"id": 0' in voters and '"id": 1' in voters and '"id": 2' not in voters, status


def _an_observer_is_added(cp: str, cluster: Cluster, tmp_path: Path) -> None:
    from tests.cluster.cluster_harness import wait_for

    boot = ["--bootstrap-server", cluster.address(0)]
    cluster.start(3)

    def rows() -> dict[int, list[str]]:
        out = _tool(cp, "MetadataQuorumCommand", *boot, "describe", "--replication")
        return {int(r[0]): r for r in (line.split() for line in out.splitlines()[1:]) if r}

    wait_for(lambda: rows().get(3, [""])[-1] == "Observer", 60, "node 3 to follow as an observer")
    time.sleep(3.0)  # caught up long since: a node with auto-join would vote by now
    assert rows()[3][-1] == "Observer" and "op=promote" not in "".join(cluster.log_text(i) for i in (0, 1))
    directory = rows()[3][1]
    meta = (cluster.layout[3].data_dir / "meta.properties").read_text()
    assert f"directory.id={directory}" in meta and "node.id=3" in meta, meta
    props = tmp_path / "controller-3.properties"
    props.write_text(f"node.id=3\nprocess.roles=controller\nlog.dirs={cluster.layout[3].data_dir}\n"
                     f"controller.listener.names=CONTROLLER\nlisteners=CONTROLLER://127.0.0.1:{cluster.layout[3].raft_port}\n")
    refused = _kcoord("cluster", "add-node", "9", "--bootstrap-server", cluster.address(0))
    assert refused.returncode == 1 and "not an observer" in refused.stderr, refused
    out = _tool(cp, "MetadataQuorumCommand", *boot, "--command-config", str(props), "add-controller")
    assert "Added controller 3" in out, out
    status = _tool(cp, "MetadataQuorumCommand", *boot, "describe", "--status")
    voters = next(line for line in status.splitlines() if line.startswith("CurrentVoters:"))
    assert '"id": 3' in voters, status
    wait_for(lambda: "event=node_promoted node=3" in cluster.log_text(3), 60, "node 3 to vote in every group")
    again = _kcoord("cluster", "add-node", "3", "--bootstrap-server", cluster.address(0))
    assert again.returncode == 1 and "a voter already" in again.stderr, again
    # with node 3 down, removing node 1 would leave 0 and 3, only one of them up: refused
    cluster.kill(3)
    time.sleep(2.0)  # node 0 has read node 3's connection ending
    directory_1 = uuid.UUID(bytes=base64.urlsafe_b64decode(rows()[1][1] + "=="))
    resp = ask(cluster.address(0), 81, 0, RemoveRaftVoterRequest(cluster_id=None, voter_id=i32(1),
                                                                 voter_directory_id=directory_1))
    assert resp.error_code == ErrorCode.invalid_request and "not a majority" in resp.error_message, resp
