"""Apache Kafka as a bench peer: a 3-broker KRaft cluster on loopback ports (``--peer kafka``).

Each broker has the combined broker+controller roles and the offsets topic is replicated three
times (``offsets.topic.replication.factor=3``, ``min.insync.replicas=2``), so a commit is
acknowledged after the same majority write a kcoord commit waits for. The jars come from Maven
Central through ``mvn dependency:copy-dependencies`` into a cache outside the repository
(``$KCOORD_CACHE`` or ``~/.cache/kcoord``, ``kafka-VERSION/libs``), resolved once; Java 17 and
Maven must be on the PATH. Kafka is never a runtime dependency of kcoord.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.brokers import BenchError, Started, wait_port
from cluster.tools.local_cluster import free_port

KAFKA_VERSION = "4.4.0"
LOG4J_VERSION = "2.25.5"  # binds Kafka's slf4j logging to log4j2, so a failed start says why in its log
HEAP = "-Xmx1g"

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kcoord.bench</groupId><artifactId>kafka-peer</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version></dependency>
  </dependencies>
</project>
"""

# To stdout, which goes to the broker's one log file with whatever the JVM itself prints on a
# failed start (a log4j file of its own held only the former).
LOG4J2 = """status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
logger.server.name = kafka.server.KafkaServer
logger.server.level = INFO
logger.broker.name = kafka.server.BrokerServer
logger.broker.level = INFO
"""


def cache_dir() -> Path:
    return Path(os.environ.get("KCOORD_CACHE") or Path.home() / ".cache" / "kcoord")


def kafka_libs(version: str = KAFKA_VERSION) -> Path:
    """The directory of Kafka's jars, resolved with Maven on first use (a marker file says done)."""
    home = cache_dir() / f"kafka-{version}"
    libs = home / "libs"
    done = home / ".resolved"
    if done.exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BenchError("--peer kafka needs Maven (mvn) on the PATH to fetch Kafka's jars")
    home.mkdir(parents=True, exist_ok=True)
    (home / "pom.xml").write_text(POM.format(kafka=version, log4j=LOG4J_VERSION))
    shutil.rmtree(libs, ignore_errors=True)
    proc = subprocess.run([mvn, "-q", "-B", "-f", str(home / "pom.xml"), "dependency:copy-dependencies",
                           f"-DoutputDirectory={libs}", "-DincludeScope=runtime"],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not any(libs.glob(f"kafka_2.13-{version}.jar")):
        raise BenchError(f"mvn could not resolve org.apache.kafka:kafka_2.13:{version}:\n"
                         f"{(proc.stdout + proc.stderr)[-2000:]}")
    done.write_text(version + "\n")
    return libs


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise BenchError("--peer kafka needs Java 17+ (java) on the PATH")
    return java


# A secured peer's SASL users (PLAIN) and super users: the PLAINTEXT listener's ANONYMOUS (its
# brokers' own traffic, and the admin requests of a test) and admin.
SASL_USERS = {"admin": "a-secret", "alice": "b-secret", "bob": "c-secret"}
SUPER_USERS = "User:ANONYMOUS;User:admin"


def _secured(sasl_port: int) -> list[str]:
    """A SASL_PLAINTEXT listener with PLAIN users, and Kafka's StandardAuthorizer."""
    users = " ".join(f'user_{u}="{p}"' for u, p in SASL_USERS.items())
    return [
        "sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        f"required {users};",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        f"super.users={SUPER_USERS}",
    ]


def _properties(i: int, ports: list[int], controller_ports: list[int], log_dir: Path,
                sasl_ports: list[int] | None = None) -> str:
    voters = ",".join(f"{j}@127.0.0.1:{p}" for j, p in enumerate(controller_ports))
    sasl = f",SASL_PLAINTEXT://127.0.0.1:{sasl_ports[i]}" if sasl_ports else ""
    return "\n".join([
        "process.roles=broker,controller",
        f"node.id={i}",
        f"controller.quorum.voters={voters}",
        f"listeners=PLAINTEXT://127.0.0.1:{ports[i]}{sasl},CONTROLLER://127.0.0.1:{controller_ports[i]}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{ports[i]}{sasl}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        + (",SASL_PLAINTEXT:SASL_PLAINTEXT" if sasl_ports else ""),
        *(_secured(sasl_ports[i]) if sasl_ports else []),
        f"log.dirs={log_dir}",
        f"offsets.topic.replication.factor={len(ports)}",
        f"transaction.state.log.replication.factor={len(ports)}",
        f"min.insync.replicas={min(2, len(ports))}",
        "group.initial.rebalance.delay.ms=0",  # as the kcoord node the bench starts
        "auto.create.topics.enable=false",
        "",
    ])


def _jvm(libs: Path, log4j: Path) -> list[str]:
    return [_java(), HEAP, "-Xms256m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{libs}/*"]


def start_kafka(nodes: int = 3, version: str = KAFKA_VERSION, timeout: float = 120.0,
                sasl_ports: list[int] | None = None) -> list[Started]:
    """Start ``nodes`` combined-role KRaft brokers; returns one ``Started`` per broker, each with the
    whole cluster's bootstrap. Stopped with SIGKILL: the data is a temporary directory. With
    ``sasl_ports`` (one per broker), each has a SASL_PLAINTEXT listener there too and an authorizer
    (``SASL_USERS``, ``SUPER_USERS``)."""
    libs = kafka_libs(version)
    tmp = Path(tempfile.mkdtemp(prefix="kcoord-bench-kafka-"))
    ports = [free_port() for _ in range(nodes)]
    controller_ports = [free_port() for _ in range(nodes)]
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    configs = []
    for i in range(nodes):
        cfg = tmp / f"server-{i}.properties"
        cfg.write_text(_properties(i, ports, controller_ports, tmp / f"data-{i}", sasl_ports))
        configs.append(cfg)
    log4j = tmp / "log4j2.properties"
    log4j.write_text(LOG4J2)

    def fmt(i: int) -> subprocess.CompletedProcess[str]:
        # --cluster-id=ID: a base64 id may begin with '-', which the tool's parser takes for an option
        return subprocess.run(_jvm(libs, log4j) + ["kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                                                   "-c", str(configs[i])], capture_output=True, text=True,
                              timeout=120)

    with ThreadPoolExecutor(nodes) as pool:
        formats = list(pool.map(fmt, range(nodes)))
    for i, res in enumerate(formats):
        if res.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise BenchError(f"kafka storage format of broker {i} failed:\n{(res.stdout + res.stderr)[-2000:]}")
    started: list[Started] = []
    for i, cfg in enumerate(configs):
        log_path = tmp / f"kafka-{i}.log"
        with open(log_path, "w") as out:
            proc = subprocess.Popen(_jvm(libs, log4j) + ["kafka.Kafka", str(cfg)], stdout=out,
                                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
        # The last broker owns the temporary directory, so it is removed once all have stopped.
        started.append(Started(f"kafka-{i}", bootstrap, proc, log_path,
                               str(tmp) if i == nodes - 1 else None, kill_on_stop=True))
    try:
        deadline = time.monotonic() + timeout
        for i, s in enumerate(started):
            if not wait_port("127.0.0.1", ports[i], max(1.0, deadline - time.monotonic())) or not s.alive():
                raise BenchError(f"kafka broker {i} did not start on port {ports[i]}:\n{s.log_tail()}")
        _wait_ready(bootstrap, nodes, deadline)
    except BaseException:
        for s in started:
            s.stop()
        raise
    return started


def _wait_ready(bootstrap: str, nodes: int, deadline: float) -> None:
    """Every broker registered, and the offsets topic created with leaders (a first OffsetFetch makes
    the coordinator create it, so its creation is not timed as part of a workload)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    while len(admin.list_topics(timeout=10).brokers) < nodes:
        if time.monotonic() > deadline:
            raise BenchError(f"kafka: fewer than {nodes} brokers registered")
        time.sleep(0.2)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kcoord-bench-warmup",
                         "enable.auto.commit": False})
    try:
        while True:
            try:
                consumer.committed([TopicPartition("kcoord-bench-warmup", 0)], timeout=10)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise BenchError("kafka: the offsets topic did not come up") from None
                time.sleep(0.2)
    finally:
        consumer.close()
