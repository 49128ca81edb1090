"""``python -m chaos run --scenario NAME --duration S --seed N [--out RUN_DIR]``.

A fresh local 3-node cluster (``RUN_DIR/cluster``) behind one fault proxy per node, a
6-partition topic, real clients as separate processes (one producer, two consumer groups
mixing confluent-kafka and kafka-python, dynamic and static members) and/or exactly-once
workers (``--workload``), and a seeded nemesis for ``duration`` seconds. Then: heal
everything, stop the producer, let the groups drain to the end of the topic, close the
consumers cleanly, stop the exactly-once workers and scan their end state, stop the nodes
(SIGTERM), export each node's replicated offsets state offline, copy the logs.

The run directory:
- ``history/<proc>.jsonl``: one file per client process incarnation (``chaos/history.py``);
- ``faults.jsonl``: the nemesis' faults, and the leadership transfers the nodes logged
  (``leader_transfer``, appended after the run: ``chaos/node_logs.py``);
- ``offsets-node-N.jsonl`` (and ``groups-node-N.jsonl``): each node's replayed
  ``__consumer_offsets`` records (``chaos/export.py``);
- ``groups.jsonl``: DescribeGroups + committed offsets sampled by the runner every ~2 s;
- ``final.json``: end offsets, final committed offsets, whether the groups drained;
- ``eos-final.jsonl``: with exactly-once workers, the input and output as scanned at the end;
- ``logs/``: node logs and client stderr; ``run.json``: scenario, seed, ports, versions.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.cluster import ChaosCluster, free_port
from chaos.eos_workload import BOUNDED_HANG_S, EOS_GROUP, HANG_S, OUTPUT_PARTITIONS, OUTPUT_TOPIC
from chaos.history import HistoryWriter, run_clock
from chaos.nemesis import SCENARIOS, FaultLog, Nemesis
from chaos.net import ChaosNet, netns_unavailable
from chaos.node_logs import leader_transfers, learners
from chaos.observe import PARTITIONS, TOPIC
from chaos.proxy import ProxySet
from chaos.workload import member_name
from cluster.tools import netns
from replication.durable import POWER_LOSS_ENV

GROUPS = ["chaos-group-a", "chaos-group-b"]
WORKLOADS = ("classic", "eos", "both")  # the consumer groups, the exactly-once workers, or both
EOS_WORKERS = 2
MAX_BOUNDED = 150.0
# Nodes laid out beyond the three the cluster starts with, for the nodes that join during a run
# (``replace``, ``grow_shrink``: each joiner takes the next node id, never one used before).
SPARE_NODES = {"random": 8, "bounded": 1, "membership": 8}
REPO = Path(__file__).resolve().parents[1]


@dataclass
class Client:
    base: str  # e.g. "ck-a1"; each incarnation is "<base>.<n>"
    role: str  # producer | ck-consumer | kp-consumer | eos-worker | rc-reader
    group: str = ""
    instance_id: str | None = None
    session_ms: int = 10000
    java: bool = False  # an eos-worker on the Java client (chaos/java/EosWorker.java), not confluent-kafka
    incarnation: int = -1
    proc: subprocess.Popen[bytes] | None = None
    stopping: bool = False  # a stop (SIGTERM) is under way: its exit is not a crash
    history: list[Path] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.base}.{self.incarnation}"

    @property
    def consumer(self) -> bool:
        """A member of a classic group (the checker's I1-I9 are about these)."""
        return self.role.endswith("-consumer")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Clients:
    def __init__(self, run_dir: Path, bootstrap: str, rate: float, group_protocol: str = "classic",
                 hang_s: float = HANG_S) -> None:
        self.run_dir = run_dir
        self.hang_s = hang_s  # an exactly-once worker's watchdog
        self.bootstrap = bootstrap
        self.rate = rate
        self.group_protocol = group_protocol  # of the confluent-kafka consumers (kafka-python: classic)
        self.clients: list[Client] = []
        self._java_cp: str | None = None
        self.lock = threading.Lock()
        (run_dir / "history").mkdir(parents=True, exist_ok=True)
        (run_dir / "logs" / "clients").mkdir(parents=True, exist_ok=True)

    on_spawn: Any = None  # called with each new client pid (the reaper's pid file)

    def add(self, c: Client) -> Client:
        self.clients.append(c)
        return c

    def protocol_of(self, c: Client) -> str:
        """A confluent-kafka consumer's group protocol: ``mixed`` gives the first group's the
        consumer protocol and keeps the second group classic."""
        if self.group_protocol == "mixed":
            return "consumer" if c.group == GROUPS[0] else "classic"
        return self.group_protocol

    def consumers(self) -> list[Client]:
        return [c for c in self.clients if c.consumer]

    def start(self, c: Client) -> None:
        c.stopping = False
        c.incarnation += 1
        path = self.run_dir / "history" / f"{c.name}.jsonl"
        c.history.append(path)
        cmd = self._java_command(c, path) if c.java else self._command(c, path)
        with open(self.run_dir / "logs" / "clients" / f"{c.name}.log", "ab") as err:
            c.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO, env=dict(os.environ))
        if self.on_spawn is not None:
            self.on_spawn(c.proc.pid)

    def _command(self, c: Client, path: Path) -> list[str]:
        topic = OUTPUT_TOPIC if c.role == "rc-reader" else TOPIC
        cmd = [sys.executable, "-m", "chaos.workload", c.role, "--bootstrap", self.bootstrap, "--topic", topic,
               "--proc", c.name, "--history", str(path), "--rate", str(self.rate),
               "--session-ms", str(c.session_ms)]
        if c.group:
            cmd += ["--group", c.group]
        if c.instance_id:
            cmd += ["--instance-id", c.instance_id]
        if c.role == "ck-consumer":
            cmd += ["--group-protocol", self.protocol_of(c)]
        if c.role == "eos-worker":
            cmd += ["--out-topic", OUTPUT_TOPIC, "--hang-s", str(self.hang_s)]
        return cmd

    def _java_command(self, c: Client, path: Path) -> list[str]:
        """An eos-worker on the Java client (its arguments: chaos/java/EosWorker.java)."""
        return ["java", "-cp", self._java_classpath(), "EosWorker", self.bootstrap, TOPIC, OUTPUT_TOPIC, c.group,
                c.instance_id or c.base, c.name, str(path), str(self.hang_s)]

    def _java_classpath(self) -> str:
        """The Java worker compiled against kafka-clients (resolved once into the cache)."""
        if self._java_cp is None:
            from chaos.java_client import compile_program

            self._java_cp = compile_program(REPO / "chaos" / "java" / "EosWorker.java", self.run_dir / "java-classes")
        return self._java_cp

    def _record_crash(self, c: Client, **extra: Any) -> None:
        if c.consumer:
            h = HistoryWriter(str(c.history[-1]), c.name)
            h.write("crash", group=c.group, member=member_name(c.name, c.instance_id), instance=c.instance_id,
                    **extra)
            h.close()

    def crash(self, c: Client) -> None:
        """SIGKILL the client and record ``crash`` in its history on its behalf."""
        if c.proc is None:
            return
        if c.proc.poll() is None:
            c.proc.send_signal(signal.SIGKILL)
            c.proc.wait(10)
            self._record_crash(c)
        c.proc = None

    def reap(self, restart: bool) -> list[str]:
        """Clients that exited on their own (an uncaught client error): record ``crash``
        (with ``exit``, the exit code) and, if asked, start a new incarnation."""
        died = []
        with self.lock:
            for c in self.clients:
                if c.proc is not None and not c.stopping and c.proc.poll() is not None:
                    self._record_crash(c, exit=c.proc.returncode)
                    died.append(c.name)
                    c.proc = None
                    if restart:
                        self.start(c)
        return died

    def stop(self, c: Client, timeout: float = 30.0) -> None:
        """SIGTERM: the client closes cleanly and writes ``leave``; crashed if it hangs."""
        if c.proc is None:
            return
        if c.proc.poll() is not None:
            self._record_crash(c, exit=c.proc.returncode)
        else:
            c.stopping = True
            c.proc.send_signal(signal.SIGTERM)
            try:
                c.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.crash(c)
        c.proc = None

    def stop_many(self, cs: list[Client], timeout: float = 40.0) -> None:
        threads = [threading.Thread(target=self.stop, args=(c, timeout)) for c in cs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    # ------------------------------------------------------------ client faults for the nemesis

    def crash_consumer(self, rng: random.Random, down: float | None = None) -> None:
        with self.lock:
            c = rng.choice(self.consumers())
            self.crash(c)
        time.sleep(rng.uniform(0.5, 3.0) if down is None else down)
        with self.lock:
            self.start(c)

    def bounce_group(self, rng: random.Random, clean: bool = True) -> None:
        """All members of one group at once (Kafka test_consumer_bounce, bounce_mode=all)."""
        group = rng.choice(GROUPS)
        with self.lock:
            members = [c for c in self.consumers() if c.group == group]
            if clean:
                self.stop_many(members)
            else:
                for c in members:
                    self.crash(c)
        time.sleep(rng.uniform(0.5, 2.0))
        with self.lock:
            for c in members:
                self.start(c)

    def crash_eos_worker(self, rng: random.Random) -> None:
        """SIGKILL an exactly-once worker and start its next incarnation (same transactional.id:
        it fences the transaction the killed one left open)."""
        with self.lock:
            workers = [c for c in self.clients if c.role == "eos-worker"]
            if not workers:
                return
            c = rng.choice(workers)
            self.crash(c)
        time.sleep(rng.uniform(0.5, 3.0))
        with self.lock:
            self.start(c)

    def bounce_static(self, rng: random.Random) -> None:
        """Clean-bounce every static member but the first of each group (Kafka
        test_static_consumer_bounce: the kept-alive members must see no revocation)."""
        with self.lock:
            victims = []
            for group in GROUPS:
                statics = [c for c in self.consumers() if c.group == group and c.instance_id]
                victims += statics[1:] if len(statics) > 1 else statics
            self.stop_many(victims)
        time.sleep(rng.uniform(0.5, 2.0))
        with self.lock:
            for c in victims:
                self.start(c)


def plan_clients(clients: Clients, scenario: str, workload: str = "classic", eos_clients: str = "confluent") -> None:
    """``eos_clients``: the exactly-once workers' client, confluent-kafka for all (transaction
    version 1) or ``mixed``: the last one on the Java client (version 2 where finalized)."""
    clients.add(Client("producer", "producer"))
    if workload in ("eos", "both"):
        for k in range(1, EOS_WORKERS + 1):
            clients.add(Client(f"eos-w{k}", "eos-worker", EOS_GROUP, instance_id=f"chaos-eos-txn-{k}",
                               java=eos_clients == "mixed" and k == EOS_WORKERS))
        clients.add(Client("rc-reader", "rc-reader"))
    if workload == "eos":
        return
    all_static = scenario == "static-consumer-bounce"
    # group a: confluent dynamic, confluent static, kafka-python dynamic
    # group b: kafka-python dynamic, kafka-python static, confluent dynamic
    layout = [
        ("a", [("ck", False), ("ck", True), ("kp", False)]),
        ("b", [("kp", False), ("kp", True), ("ck", False)]),
    ]
    for g, members in layout:
        group = f"chaos-group-{g}"
        for k, (kind, static) in enumerate(members, 1):
            static = static or all_static
            base = f"{kind}-{g}{k}"
            clients.add(Client(base, f"{kind}-consumer", group, instance_id=f"{base}-static" if static else None,
                               session_ms=20000 if static else 10000))


# ------------------------------------------------------------------ cluster-side observation

_ADMINS = threading.local()


def _admin(bootstrap: str) -> Any:
    """One long-lived AdminClient per thread: creating and dropping admin clients while
    requests time out during faults has aborted the runner inside librdkafka."""
    from confluent_kafka.admin import AdminClient

    admin = getattr(_ADMINS, "admin", None)
    if admin is None or getattr(_ADMINS, "bootstrap", None) != bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, "log_level": 2})
        _ADMINS.admin, _ADMINS.bootstrap = admin, bootstrap
    return admin


class Watchdog(threading.Thread):
    """Restarts client processes that died on their own (each death is a ``crash`` event)."""

    def __init__(self, clients: Clients) -> None:
        super().__init__(daemon=True, name="client-watchdog")
        self.clients = clients
        self.stop_ev = threading.Event()
        self.died: list[str] = []

    def run(self) -> None:
        while not self.stop_ev.wait(1.0):
            for name in self.clients.reap(restart=True):
                self.died.append(name)
                _progress(f"client {name} exited on its own; restarted")


class Sampler(threading.Thread):
    """Keeps ``python -m chaos.observe sample`` running (DescribeGroups + committed offsets
    every ~2 s into ``groups.jsonl``), restarting it if it dies. The coordinator-routed
    admin calls run in that child process: librdkafka has aborted the whole process
    (``rd_kafka_enq_once_del_source_return`` assertion) when such a request was pending
    while brokers were killed, and the runner must survive that."""

    def __init__(self, run_dir: Path, bootstrap: str, on_spawn: Any = None, groups: list[str] | None = None) -> None:
        super().__init__(daemon=True, name="describe-sampler")
        self.groups = GROUPS if groups is None else groups
        self.run_dir = run_dir
        self.bootstrap = bootstrap
        self.stop_ev = threading.Event()
        self.on_spawn = on_spawn
        self.restarts = 0

    def run(self) -> None:
        while not self.stop_ev.is_set():
            with open(self.run_dir / "logs" / "observe.log", "ab") as err:
                proc = subprocess.Popen([sys.executable, "-m", "chaos.observe", "sample", str(self.run_dir / "groups.jsonl"),
                                         self.bootstrap, *self.groups], cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
            if self.on_spawn is not None:
                self.on_spawn(proc.pid)
            while proc.poll() is None and not self.stop_ev.wait(0.5):
                pass
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
                return
            self.restarts += 1
            self.stop_ev.wait(1.0)

    def stop(self) -> None:
        self.stop_ev.set()
        self.join(30)


def observe_state(bootstrap: str, describe: bool = False, groups: list[str] | None = None) -> dict[str, Any]:
    """End offsets and committed offsets (and DescribeGroups) from a ``chaos.observe`` child."""
    cmd = [sys.executable, "-m", "chaos.observe", "state", bootstrap, *(GROUPS if groups is None else groups)]
    if describe:
        cmd.append("--describe")
    try:
        out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=40)
    except subprocess.TimeoutExpired:
        return {"error": "chaos.observe state timed out"}
    if out.returncode != 0:
        return {"error": f"chaos.observe state exited {out.returncode}: {out.stderr.strip()[-300:]}"}
    state: dict[str, Any] = json.loads(out.stdout)
    return state


def wait_healthy(bootstrap: str, timeout: float = 90.0) -> bool:
    """Every offsets and topic partition has a leader in Metadata."""
    admin = _admin(bootstrap)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(timeout=5)
            offs = admin.list_topics("__consumer_offsets", timeout=5).topics["__consumer_offsets"]
            parts = list(md.topics[TOPIC].partitions.values()) + list(offs.partitions.values())
            if len(md.brokers) == 3 and all(p.leader >= 0 for p in parts):
                return True
        except Exception:  # noqa: BLE001 - not yet
            pass
        time.sleep(0.5)
    return False


def create_topic(bootstrap: str, topic: str = TOPIC, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    admin = _admin(bootstrap)
    deadline = time.monotonic() + 60
    while True:
        try:
            for f in admin.create_topics([NewTopic(topic, partitions, 3)]).values():
                f.result(timeout=30)
            return
        except Exception as e:  # noqa: BLE001 - the cluster may still be forming
            if "TOPIC_ALREADY_EXISTS" in str(e) or time.monotonic() > deadline:
                if "TOPIC_ALREADY_EXISTS" in str(e):
                    return
                raise
            time.sleep(0.5)


def wait_drained(bootstrap: str, timeout: float, groups: list[str] | None = None) -> tuple[bool, dict[str, Any]]:
    groups = GROUPS if groups is None else groups
    deadline = time.monotonic() + timeout
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        state = observe_state(bootstrap, groups=groups)
        ends, committed = state.get("end_offsets"), state.get("committed")
        if ends and committed:
            behind = [[g, p, committed[g].get(str(p), -1), ends[str(p)]] for g in groups for p in range(PARTITIONS)
                      if committed[g].get(str(p), -1) < ends[str(p)]]
            state["behind"] = behind  # [group, partition, committed, end offset]
            if not behind:
                return True, state
        time.sleep(1.0)
    return False, state


def node_settings() -> dict[str, object]:
    """The nodes run with their defaults, except a short initial rebalance delay. If the
    default Raft timings do not pass the node's own validation (election timeout must be
    more than 3 x heartbeat), the heartbeat is lowered so the election timeout stays the
    default; run.json records the settings used."""
    from cluster.config import ConfigError, NodeConfig

    # raft_fault_injection: the nemesis cuts Raft links through each node's fault file
    # consumer-protocol members (KIP-848) get the classic members' 10 s session and 1 s heartbeat,
    # which the checker's bounds assume
    settings: dict[str, object] = {"group.initial.rebalance.delay.ms": 500, "raft_fault_injection": "true",
                                   "group.consumer.session.timeout.ms": 10000,
                                   "group.consumer.min.session.timeout.ms": 10000,
                                   "group.consumer.heartbeat.interval.ms": 1000,
                                   "group.consumer.min.heartbeat.interval.ms": 1000}
    defaults = NodeConfig()
    try:
        NodeConfig(raft_election_timeout_ms=defaults.raft_election_timeout_ms,
                   raft_heartbeat_ms=defaults.raft_heartbeat_ms).validate()
    except ConfigError as e:
        if "raft_" in str(e):
            hb = max(5, defaults.raft_election_timeout_ms // 4)
            settings["raft_heartbeat_ms"] = hb
            settings["raft_tick_ms"] = min(defaults.raft_tick_ms, hb)
    return settings


def offsets_partitions(settings: dict[str, object]) -> int:
    """The nodes' ``__consumer_offsets`` partition count under ``settings`` (a group's coordinator
    is found from it)."""
    from cluster.config import NodeConfig

    value = settings.get("offsets.topic.num.partitions", settings.get("offsets_topic_num_partitions"))
    return int(str(value)) if value is not None else NodeConfig().offsets_topic_num_partitions


def versions() -> dict[str, Any]:
    import confluent_kafka
    import kafka

    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             timeout=10).stdout.strip()
    except OSError:
        rev = ""
    return {"python": platform.python_version(), "confluent_kafka": confluent_kafka.version()[0],
            "librdkafka": confluent_kafka.libversion()[0], "kafka_python": kafka.__version__, "kcoord_git": rev}


def count_events(run_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in sorted((run_dir / "history").glob("*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip():
                t = json.loads(line)["type"]
                counts[t] = counts.get(t, 0) + 1
    return dict(sorted(counts.items()))


def run(scenario: str, duration: float, seed: int, out: str | None = None, rate: float = 50.0,
        drain_timeout: float = 120.0, net_mode: str = "auto", workload: str = "classic",
        group_protocol: str = "classic", durability: str = "replicated", eos_clients: str = "confluent") -> Path:
    if scenario not in SCENARIOS:
        raise SystemExit(f"unknown scenario {scenario!r}; one of {', '.join(SCENARIOS)}")
    if workload not in WORKLOADS:
        raise SystemExit(f"unknown workload {workload!r}; one of {', '.join(WORKLOADS)}")
    if scenario.startswith("eos") and workload == "classic":
        workload = "eos"  # the exactly-once scenarios aim at the exactly-once workers
    if scenario in ("bounded", "eos-bounded"):
        duration = min(duration, MAX_BOUNDED)
    classic, eos = workload in ("classic", "both"), workload in ("eos", "both")
    groups = (GROUPS if classic else []) + ([EOS_GROUP] if eos else [])
    run_dir = Path(out).resolve() if out else Path(tempfile.mkdtemp(prefix=f"kcoord-chaos-{scenario}-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    if any((run_dir / x).exists() for x in ("history", "faults.jsonl", "run.json")):
        raise SystemExit(f"{run_dir} already holds a run")
    t0 = time.time()
    os.environ["KCOORD_CHAOS_T0"] = repr(t0)
    started = time.monotonic()
    info: dict[str, Any] = {"scenario": scenario, "seed": seed, "duration": duration, "t0": t0,
                            "topic": TOPIC, "partitions": PARTITIONS, "groups": groups, "rate": rate,
                            "workload": workload, "group_protocol": group_protocol, "eos_clients": eos_clients,
                            "versions": versions(), "status": "running"}
    faulthandler.enable()  # a C-level abort in a client library still shows every thread's stack
    pidfile = run_dir / "pids.txt"

    def remember(pid: int) -> None:
        with open(pidfile, "a", encoding="utf-8") as f:
            f.write(f"{pid}\n")

    why_not = netns_unavailable() if net_mode != "proxy" else "--net proxy"
    if net_mode == "netns" and why_not:
        raise SystemExit(f"--net netns: {why_not}")
    spare = SPARE_NODES.get(scenario, 0)  # laid out for the nodes that join during the run
    layout = netns.up(3 + spare) if why_not is None else None  # owned by this process: reaped if it dies
    info["net"] = {"mode": "netns" if layout else "proxy", **({"layout": layout.to_json()} if layout else
                                                             {"why_not_netns": why_not})}
    reaper = subprocess.Popen([sys.executable, "-m", "chaos.reaper", str(os.getpid()), str(pidfile),
                               *([layout.prefix] if layout else [])], cwd=REPO)
    settings = node_settings()
    settings["durability"] = durability
    os.environ[POWER_LOSS_ENV] = "1"  # every node keeps the ledger a simulated power loss needs
    info["node_settings"] = settings
    info["offsets_partitions"] = offsets_partitions(settings)
    proxies: ProxySet | None = None
    if layout is None:
        proxy_ports = [free_port() for _ in range(3 + spare)]
        proxies = ProxySet(proxy_ports)
        cluster = ChaosCluster(run_dir / "cluster", proxy_ports, settings=settings, spare=spare)
        proxies.start([n.kafka_port for n in cluster.layout])
    else:
        cluster = ChaosCluster(run_dir / "cluster", [], settings=settings, net=layout, spare=spare)
    cluster.on_spawn = remember
    net = ChaosNet(cluster, proxies)
    bootstrap = cluster.bootstrap
    info["ports"] = {"bootstrap": bootstrap, "proxy": proxies.listen_ports if proxies else None,
                     "kafka": [n.kafka_port for n in cluster.layout], "raft": [n.raft_port for n in cluster.layout]}
    (run_dir / "run.json").write_text(json.dumps(info, indent=2))
    faults = FaultLog(run_dir / "faults.jsonl")
    # A bounded run is short: a worker hung in librdkafka (its transactional calls can outlive
    # their timeout when the coordinator's broker goes) is restarted sooner, still past the
    # workers' 30 s call timeouts.
    clients = Clients(run_dir, bootstrap, rate, group_protocol, BOUNDED_HANG_S if scenario in ("bounded", "eos-bounded")
                      else HANG_S)
    clients.on_spawn = remember
    sampler = Sampler(run_dir, bootstrap, on_spawn=remember, groups=groups)
    watchdog = Watchdog(clients)
    nemesis: Nemesis | None = None
    log = _progress
    try:
        cluster.start()
        create_topic(bootstrap)
        if eos:
            create_topic(bootstrap, OUTPUT_TOPIC, OUTPUT_PARTITIONS)
        if not wait_healthy(bootstrap, 60):
            raise RuntimeError("cluster not healthy after start")
        log(f"cluster up ({net.mode}{'' if why_not is None else ': ' + why_not}): bootstrap {bootstrap}, "
            f"run dir {run_dir}")
        plan_clients(clients, scenario, workload, eos_clients)
        for c in clients.clients:
            clients.start(c)
        sampler.start()
        watchdog.start()
        _wait_consuming(run_dir, 45, classic, eos)
        info["nemesis_start"] = round(run_clock(), 3)
        log(f"workload running; nemesis '{scenario}' for {duration:.0f}s (seed {seed})")
        client_ops = {"crash_eos_worker": clients.crash_eos_worker}
        if classic:
            client_ops.update(crash_consumer=clients.crash_consumer, bounce_group=clients.bounce_group,
                              bounce_static=clients.bounce_static)
        nemesis = Nemesis(seed, cluster, net, faults, bootstrap, groups, client_ops=client_ops, data_topic=TOPIC,
                          offsets_partitions=info["offsets_partitions"],
                          transactional_ids=[c.instance_id for c in clients.clients
                                             if c.role == "eos-worker" and c.instance_id],
                          eos_topics=[TOPIC, OUTPUT_TOPIC] if eos else [], durability=durability)
        nemesis.run(scenario, duration)
        info["nemesis_end"] = round(run_clock(), 3)
        info["ops"] = nemesis.ops_done
        info["power_losses"] = nemesis.power_losses
        info["disk_losses"] = nemesis.disk_losses
        info["joins"] = nemesis.joins
        log(f"nemesis done ({len(nemesis.ops_done)} ops: {', '.join(nemesis.ops_done)}); healing")
        nemesis.heal_all()
        info["healthy_after_heal"] = wait_healthy(bootstrap, 90)
        clients.reap(restart=True)
        producer = [c for c in clients.clients if c.role == "producer"]
        clients.stop_many(producer, timeout=60)
        log("producer stopped; draining the groups")
        drained, state = wait_drained(bootstrap, drain_timeout, groups)
        info["drained"] = drained
        if not drained:
            info["not_drained"] = state.get("behind") or state.get("error")
            log(f"groups did not drain in {drain_timeout:.0f}s: {info['not_drained']}")
        watchdog.stop_ev.set()
        watchdog.join(5)
        clients.stop_many(clients.consumers(), timeout=30)
        if eos:
            info["eos"] = _finish_eos(clients, bootstrap, run_dir)
        sampler.stop()
        info["observer_restarts"] = sampler.restarts
        info["clients_died"] = watchdog.died
        sampler.stop_ev.set()
        final_state: dict[str, Any] = dict(state, drained=drained)
        after = observe_state(bootstrap, describe=True, groups=groups)
        final_state["describe"] = after.get("describe")
        final_state["committed_after_close"] = after.get("committed")
        if "error" in after:
            final_state["error_after_close"] = after["error"]
        (run_dir / "final.json").write_text(json.dumps(final_state, indent=2))
        info["status"] = "ok" if drained else "not-drained"
        if eos and "scan_error" in info["eos"]:
            info["status"] = "eos-scan-failed"
    except BaseException as e:
        info["status"] = "error"
        info["error"] = f"{type(e).__name__}: {e}"[:2000]
        raise
    finally:
        if sampler.is_alive():
            sampler.stop()
        watchdog.stop_ev.set()
        for c in clients.clients:
            if c.alive():
                clients.crash(c)
        if nemesis is not None:
            try:
                nemesis.heal_all()
            except Exception:  # noqa: BLE001 - best effort, the nodes are stopped next
                pass
        for i in list(cluster.paused):
            cluster.resume(i)
        cluster.stop_all()
        if proxies is not None:
            proxies.stop()
        if layout is not None:
            netns.teardown(layout.prefix)
        faults.close()
        _finish(run_dir, cluster, info)
        info["elapsed"] = round(time.monotonic() - started, 1)
        (run_dir / "run.json").write_text(json.dumps(info, indent=2))
        reaper.terminate()
        reaper.wait(10)
    log(f"done: {run_dir} ({info['status']}); events {info.get('events')}; faults {info.get('faults')}")
    return run_dir


def _finish(run_dir: Path, cluster: ChaosCluster, info: dict[str, Any]) -> None:
    from chaos.export import export_node

    exported = {}
    info["members"] = list(cluster.members)  # the cluster's nodes at the end (nodes join and leave)
    for n in cluster.layout:
        if not (n.data_dir / "node.identity").exists():
            continue  # a spare that never joined
        # The checker compares the replicas of the cluster's nodes at the end; a node that left
        # stopped with the state it had then (kept apart, for a look).
        name = f"node-{n.node_id}" if n.node_id in cluster.members else f"left-node-{n.node_id}"
        try:
            exported[n.node_id] = export_node(n.data_dir, run_dir / f"offsets-{name}.jsonl",
                                              run_dir / f"groups-{name}.jsonl")
        except Exception as e:  # noqa: BLE001 - recorded in run.json
            exported[n.node_id] = -1
            info.setdefault("export_errors", {})[n.node_id] = f"{type(e).__name__}: {e}"[:500]
    info["offsets_exported"] = exported
    logs = run_dir / "logs"
    logs.mkdir(exist_ok=True)
    for f in cluster.base_dir.glob("node-*.*"):
        if f.is_file():
            shutil.copy2(f, logs / f.name)
    # the nodes' own leadership moves join the fault timeline (the checker dates reloads by them)
    transfers = FaultLog(run_dir / "faults.jsonl")
    try:
        for r in leader_transfers(logs, float(info["t0"])):
            transfers.write("leader_transfer", r["node"], r["detail"], t=r["t"])
    finally:
        transfers.close()
    info["learners"] = learners(logs, float(info["t0"]))  # each wiped node's catch-up (disk_loss)
    info["events"] = count_events(run_dir)
    faults = run_dir / "faults.jsonl"
    kinds: dict[str, int] = {}
    if faults.exists():
        for line in faults.read_text().splitlines():
            if line.strip():
                k = json.loads(line)["type"]
                kinds[k] = kinds.get(k, 0) + 1
    info["faults"] = kinds


def _finish_eos(clients: Clients, bootstrap: str, run_dir: Path) -> dict[str, Any]:
    """Stop the exactly-once workers (each ends its transaction), let the reader catch up, stop
    it, and scan the input and output topics into ``eos-final.jsonl`` (``chaos/eos_scan.py``)."""
    clients.stop_many([c for c in clients.clients if c.role == "eos-worker"], timeout=60)
    time.sleep(5.0)
    clients.stop_many([c for c in clients.clients if c.role == "rc-reader"], timeout=30)
    cmd = [sys.executable, "-m", "chaos.eos_scan", bootstrap, TOPIC, OUTPUT_TOPIC, str(run_dir / "eos-final.jsonl")]
    with open(run_dir / "logs" / "eos_scan.log", "ab") as err:
        try:
            out = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            return {"scan_error": "chaos.eos_scan timed out"}
    if out.returncode != 0:
        return {"scan_error": f"chaos.eos_scan exited {out.returncode} (logs/eos_scan.log)"}
    counts: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return counts


def _wait_consuming(run_dir: Path, timeout: float, classic: bool = True, eos: bool = False) -> None:
    """Until both groups have assignments and some commits, and the exactly-once workers have
    committed a transaction (or the timeout)."""
    want = ({"a", "b"} if classic else set()) | ({"eos"} if eos else set())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ok_groups = set()
        for f in (run_dir / "history").glob("*.jsonl"):
            text = f.read_text()
            if '"commit.ok"' in text:
                ok_groups.add(f.name.split("-")[1][0])
            if '"txn.commit.ok"' in text:
                ok_groups.add("eos")
        if ok_groups >= want:
            return
        time.sleep(0.5)


def _progress(msg: str) -> None:
    print(f"[chaos {run_clock():7.1f}s] {msg}", file=sys.stderr, flush=True)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of faults (bounded: at most 150)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="run directory (default: a new temp dir)")
    ap.add_argument("--rate", type=float, default=50.0, help="produce rate, messages/s")
    ap.add_argument("--drain-timeout", type=float, default=120.0)
    ap.add_argument("--workload", choices=list(WORKLOADS), default="classic",
                    help="classic consumer groups, exactly-once workers (the eos scenarios' default), or both")
    ap.add_argument("--eos-clients", choices=["confluent", "mixed"], default="confluent",
                    help="the exactly-once workers' client: confluent-kafka (transaction version 1), or mixed: "
                         "one on the Java client (transaction version 2; needs Java 17 and Maven)")
    ap.add_argument("--durability", choices=["replicated", "fsync"], default="replicated",
                    help="the nodes' durability; power loss of every node at once is injected only with fsync "
                         "(replicated promises nothing once a majority loses its page cache)")
    ap.add_argument("--group-protocol", choices=["classic", "consumer", "mixed"], default="classic",
                    help="the confluent-kafka consumers' group protocol (consumer: KIP-848; the kafka-python "
                         "members stay classic, so the groups hold both kinds; mixed: KIP-848 in the first "
                         "group only, the second one stays classic)")
    ap.add_argument("--net", choices=["auto", "netns", "proxy"], default="auto",
                    help="network faults: nodes in namespaces with nftables (needs root), or the TCP proxies and "
                         "Raft-transport drops; auto = netns where possible (run.json records which)")


def run_from_args(args: argparse.Namespace) -> int:
    run_dir = run(args.scenario, args.duration, args.seed, args.out, args.rate, args.drain_timeout, args.net,
                  args.workload, args.group_protocol, args.durability, args.eos_clients)
    print(run_dir)
    info = json.loads((run_dir / "run.json").read_text())
    return 0 if info.get("status") == "ok" else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos run")
    add_arguments(ap)
    return run_from_args(ap.parse_args(argv))
