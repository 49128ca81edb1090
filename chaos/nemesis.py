"""The nemesis: seeded node and network faults, and the scenarios that schedule them.

Every fault is one line in ``RUN_DIR/faults.jsonl``: ``t, end, type, node, detail``
(``chaos/history.py``). A windowed fault (kill → restart, pause → resume, partition →
heal, transfer) is written when its window closes, with ``t`` its start and ``end`` its
end, followed by the closing event (``restart``, ``resume``, ``heal``) with ``end``
null. ``node`` is the node id, or null for ``kill_all``/``restart_all``.

All choices come from one ``random.Random(seed)``; wall-clock timing still varies run to
run, so a seed fixes the plan (which faults, in which order, aimed how), not the
interleaving with the clients.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos.cluster import ChaosCluster
from chaos.eos_workload import OUTPUT_PARTITIONS
from chaos.history import FAULT_TYPES, run_clock
from chaos.net import ChaosNet
from chaos.observe import PARTITIONS
from coordinator.partitioner import partition_for
from replication.durable import drop_unsynced


class FaultLog:
    def __init__(self, path: Path) -> None:
        self._fh = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self._lock = threading.Lock()
        self.count = 0

    def write(self, type_: str, node: int | None, detail: dict[str, Any] | None = None,
              t: float | None = None, end: float | None = None) -> None:
        if type_ not in FAULT_TYPES:
            raise ValueError(f"unknown fault type {type_!r}")
        event = {"t": round(run_clock() if t is None else t, 6), "end": None if end is None else round(end, 6),
                 "type": type_, "node": node, "detail": detail or {}}
        with self._lock:
            self._fh.write(json.dumps(event, separators=(",", ":")) + "\n")
            self.count += 1

    def close(self) -> None:
        self._fh.close()


def wipe_dir(path: Path) -> int:
    """Delete everything in ``path`` (a lost disk); the bytes it held."""
    wiped = 0
    for entry in list(path.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            wiped += sum(f.stat().st_size for f in entry.rglob("*") if f.is_file())
            shutil.rmtree(entry)
        else:
            wiped += entry.lstat().st_size
            entry.unlink()
    return wiped


def all_voters(cluster: ChaosCluster) -> bool:
    """Whether every member's directory is its node's voter, as every running member's
    ``voters.json`` says (which also names removed nodes' last directories)."""
    try:
        dirs = {str(i): json.loads((cluster.layout[i].data_dir / "node.identity").read_text())["directory_id"]
                for i in cluster.members}
        views = [json.loads((cluster.layout[i].data_dir / "voters.json").read_text())["voters"]
                 for i in cluster.members if cluster.alive(i)]
    except (OSError, ValueError, KeyError):
        return False
    return bool(views) and all(v.get(k) == d for v in views for k, d in dirs.items())


def node_promoted(cluster: ChaosCluster, i: int) -> float | None:
    """How long node ``i`` took from its start to vote in every group it has, as it logged
    (``event=node_promoted``); None until then."""
    found = _PROMOTED.search(cluster.log_text(i))
    return None if found is None else float(found.group(1))


_PROMOTED = re.compile(r"event=node_promoted node=\d+ groups=\d+ after_s=([0-9.]+)")


class Nemesis:
    def __init__(self, seed: int, cluster: ChaosCluster, net: ChaosNet, faults: FaultLog, bootstrap: str,
                 groups: list[str], client_ops: dict[str, Callable[..., Any]] | None = None,
                 data_topic: str | None = None, *, offsets_partitions: int,
                 transactional_ids: list[str] | None = None, eos_topics: list[str] | None = None,
                 durability: str = "replicated") -> None:
        self.rng = random.Random(seed)
        self.transactional_ids = transactional_ids or []  # the exactly-once workers' (chaos/eos_workload.py)
        self.eos_topics = eos_topics or []  # the topics those workers read and write
        self.offsets_partitions = offsets_partitions  # the nodes' offsets.topic.num.partitions
        self.seed = seed
        self.cluster = cluster
        self.net = net
        self.data_topic = data_topic
        self.faults = faults
        self.bootstrap = bootstrap
        self.groups = groups
        self.client_ops = client_ops or {}
        self.deadline = 0.0
        self.partitioned: dict[int, tuple[float, str]] = {}
        self.ops_done: list[str] = []
        self.durability = durability  # the nodes': power loss of every node only where fsync makes it survivable
        self.power_losses: list[dict[str, Any]] = []  # what each simulated power loss dropped
        self.disk_losses: list[dict[str, Any]] = []  # each wiped data directory: node, when, bytes
        self.joins: list[dict[str, Any]] = []  # each node that joined: node, when, how long to vote everywhere
        self._admin: Any = None

    # ---------------------------------------------------------------- helpers

    def _sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def coordinator_of(self, group: str) -> int:
        """The leader of the group's ``__consumer_offsets`` partition (random node if unknown)."""
        return self.leader_of("__consumer_offsets", partition_for(group, self.offsets_partitions))

    def _partitions(self, topic: str) -> int:
        if topic == "__consumer_offsets":
            return self.offsets_partitions
        return PARTITIONS if topic == self.data_topic else OUTPUT_PARTITIONS

    def leader_of(self, topic: str, p: int) -> int:
        """The leader of a partition, as Metadata names it (random node if unknown)."""
        from confluent_kafka.admin import AdminClient

        if self._admin is None:  # one long-lived client (see chaos.run._admin)
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 5000,
                                       "log_level": 2})
        admin = self._admin
        end = time.monotonic() + 8
        while time.monotonic() < end:
            try:
                md = admin.list_topics(topic, timeout=5)
                leader = md.topics[topic].partitions[p].leader
                if leader >= 0:
                    return int(leader)
            except Exception:  # noqa: BLE001 - metadata unavailable during faults: retry
                pass
            time.sleep(0.2)
        return self.rng.choice(self.cluster.members)

    def txn_coordinator_of(self, transactional_id: str) -> int:
        """The node FindCoordinator (key type 1) names for a transactional id (random node if
        no node answers): ``__transaction_state`` partitions are not in Metadata."""
        import asyncio

        from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

        from cluster.peer_client import PeerClient

        async def ask() -> int:
            client = PeerClient("kcoord-chaos", 3.0)
            try:
                for addr in self.bootstrap.split(","):
                    host, _, port = addr.rpartition(":")
                    try:
                        r = await client.request(host, int(port), 10, 3,
                                                 FindCoordinatorRequest(key=transactional_id,
                                                                        key_type=1))  # type: ignore[arg-type]
                    except (OSError, TimeoutError):
                        continue
                    if int(r.error_code) == 0:
                        return int(r.node_id)
                return -1
            finally:
                client.close()

        end = time.monotonic() + 8
        while time.monotonic() < end:
            node = asyncio.run(ask())
            if node >= 0:
                return node
            time.sleep(0.2)
        return self.rng.choice(self.cluster.members)

    def _restart(self, i: int, kill_t: float, kind: str, detail: dict[str, Any]) -> None:
        try:
            self.cluster.start(i)
        finally:
            now = run_clock()
            self.faults.write(kind, i, detail, t=kill_t, end=now)
            self.faults.write("restart", i, detail, t=now)

    # ---------------------------------------------------------------- node faults

    def kill_node(self, i: int, down: float, clean: bool = False, **detail: Any) -> None:
        t = run_clock()
        (self.cluster.terminate if clean else self.cluster.kill)(i)
        self._sleep(down)
        self._restart(i, t, "kill", {"signal": "TERM" if clean else "KILL", **detail})
        self.ops_done.append("kill")

    def kill_coordinator(self, group: str | None = None, down: float | None = None) -> None:
        group = group or self.rng.choice(self.groups)
        down = self.rng.uniform(2, 6) if down is None else down
        node = self.coordinator_of(group)
        self.kill_node(node, down, reason="coordinator", group=group,
                       offsets_partition=partition_for(group, self.offsets_partitions))
        self.ops_done[-1] = "kill_coordinator"

    def kill_txn_coordinator(self, down: float | None = None) -> None:
        """Kill the transaction coordinator of one exactly-once worker."""
        tid = self.rng.choice(self.transactional_ids)
        down = self.rng.uniform(2, 6) if down is None else down
        self.kill_node(self.txn_coordinator_of(tid), down, reason="txn_coordinator", transactional_id=tid)
        self.ops_done[-1] = "kill_txn_coordinator"

    def kill_data_leader(self, down: float | None = None) -> None:
        """Kill the leader of a partition of the exactly-once input or output topic."""
        topic = self.rng.choice(self.eos_topics or [self.data_topic or "__consumer_offsets"])
        p = self.rng.randrange(self._partitions(topic))
        down = self.rng.uniform(2, 6) if down is None else down
        self.kill_node(self.leader_of(topic, p), down, reason="data_leader", topic=topic, partition=p)
        self.ops_done[-1] = "kill_data_leader"

    def pause_node(self, i: int | None = None, seconds: float | None = None) -> None:
        i = self.rng.choice(self.cluster.members) if i is None else i
        seconds = self.rng.uniform(2, 6) if seconds is None else seconds
        t = run_clock()
        if not self.cluster.pause(i):
            return
        self._sleep(seconds)
        self.cluster.resume(i)
        now = run_clock()
        self.faults.write("pause", i, {"signal": "STOP"}, t=t, end=now)
        self.faults.write("resume", i, {"signal": "CONT"}, t=now)
        self.ops_done.append("pause")

    def transfer(self, group: str | None = None, rounds: int | None = None) -> None:
        """Leadership-transfer storm: SIGSTOP the group's coordinator just long enough
        (> 2 × the 500 ms election timeout) for another node to win the partition, SIGCONT,
        repeat on the new leader."""
        group = group or self.rng.choice(self.groups)
        rounds = self.rng.randint(2, 4) if rounds is None else rounds
        for _ in range(rounds):
            node = self.coordinator_of(group)
            t = run_clock()
            if not self.cluster.pause(node):
                continue
            self._sleep(self.rng.uniform(1.5, 2.5))
            self.cluster.resume(node)
            after = run_clock()
            self.faults.write("transfer", node, {"method": "pause-leader", "group": group,
                                                 "offsets_partition": partition_for(group, self.offsets_partitions)},
                              t=t, end=after)
            self._sleep(self.rng.uniform(1.0, 2.0))
        self.ops_done.append("transfer")

    def rolling_restart(self, clean: bool = True, settle: float = 3.0) -> None:
        for i in list(self.cluster.members):
            t = run_clock()
            (self.cluster.terminate if clean else self.cluster.kill)(i)
            self._sleep(1.0)
            self._restart(i, t, "kill", {"signal": "TERM" if clean else "KILL", "rolling": True})
            self._sleep(settle)
        self.ops_done.append("rolling_restart")

    def _lose_power(self, i: int) -> dict[str, Any]:
        """Node ``i`` is already killed: drop what its page cache held and its disk did not."""
        dropped = drop_unsynced(self.cluster.layout[i].data_dir, self.rng)
        loss = {"node": i, "dropped_bytes": sum(dropped.values()), "files": len(dropped),
                "journal_bytes": sum(v for k, v in dropped.items() if k.endswith(".kcj"))}
        self.power_losses.append(loss)
        return loss

    def power_loss(self, i: int | None = None, down: float | None = None) -> None:
        """One node loses power: SIGKILL, then its files lose what was not fsync'd."""
        i = self.rng.choice(self.cluster.members) if i is None else i
        down = self.rng.uniform(1, 4) if down is None else down
        t = run_clock()
        self.cluster.kill(i)
        loss = self._lose_power(i)
        self._sleep(down)
        self._restart(i, t, "power_loss", {"signal": "KILL", **loss})
        self.ops_done.append("power_loss")

    def power_loss_all(self, down: float | None = None) -> None:
        """Every node loses power at once (injected only with durability = fsync)."""
        down = self.rng.uniform(1, 4) if down is None else down
        t = run_clock()
        for i in list(self.cluster.members):
            self.cluster.kill(i)
        losses = [self._lose_power(i) for i in self.cluster.members]
        self._sleep(down)
        try:
            self.cluster.start()
        finally:
            now = run_clock()
            self.faults.write("power_loss_all", None, {"signal": "KILL", "dropped_bytes":
                                                       sum(x["dropped_bytes"] for x in losses)}, t=t, end=now)
            self.faults.write("restart_all", None, {}, t=now)
        self.ops_done.append("power_loss_all")

    def disk_loss(self, i: int | None = None, down: float | None = None) -> None:
        """A node's disk dies: SIGKILL, its data directory emptied, and back on the empty one (a new
        replica of the node: a learner until it has caught up, ``replication/raft/voters.py``)."""
        i = self.rng.choice(self.cluster.members) if i is None else i
        down = self.rng.uniform(1, 4) if down is None else down
        if not self._wait_all_voters(60.0):
            # One disk at a time, as an operator replaces them: a second loss before the first
            # replica caught up leaves groups whose only copies of their last entries are gone.
            self.ops_done.append("disk_loss_skipped")
            return
        t = run_clock()
        self.cluster.kill(i)
        wiped = wipe_dir(self.cluster.layout[i].data_dir)
        loss = {"node": i, "wiped_bytes": wiped, "t": round(t, 3)}
        self.disk_losses.append(loss)
        self._sleep(down)
        self._restart(i, t, "disk_loss", {"signal": "KILL", "wiped_bytes": wiped})
        self.ops_done.append("disk_loss")

    def _wait_all_voters(self, timeout: float) -> bool:
        """Until every node's data directory is its node's voting replica, as the running nodes'
        ``voters.json`` say (each node writes it as its metadata log names the voters)."""
        end = time.monotonic() + min(timeout, max(0.0, self._remaining()))
        while True:
            if all_voters(self.cluster):
                return True
            if time.monotonic() > end:
                return False
            time.sleep(0.5)

    # ---------------------------------------------------------------- nodes come and go

    def add_node(self) -> int | None:
        """The next spare node joins the cluster (``join``); returns it once it votes in every
        group (None: no spare left, or it did not get there in time)."""
        spares = self.cluster.spares()
        if not spares or not self._wait_all_voters(60.0):
            self.ops_done.append("add_node_skipped")
            return None
        j = spares[0]
        t = run_clock()
        self.cluster.start(j)
        self.cluster.members.append(j)
        end = time.monotonic() + 180
        while node_promoted(self.cluster, j) is None and time.monotonic() < end and self.cluster.alive(j):
            time.sleep(0.5)
        took = node_promoted(self.cluster, j)
        self.joins.append({"node": j, "t": round(t, 3), "promoted_s": took})
        self.faults.write("add_node", j, {"promoted_s": took}, t=t, end=run_clock())
        self.ops_done.append("add_node")
        return j if took is not None else None

    def remove_node(self, i: int | None = None) -> bool:
        """Node ``i`` (a random member) leaves the cluster (RemoveRaftVoter): it hands over what
        it leads and stops; the others take it out of every group."""
        from cluster.tools import quorum

        if len(self.cluster.members) < 2 or not self._wait_all_voters(60.0):
            self.ops_done.append("remove_node_skipped")
            return False
        i = self.rng.choice(self.cluster.members) if i is None else i
        asked = next(j for j in self.cluster.members if j != i)
        host, _, port = self.cluster.address(asked).rpartition(":")
        t = run_clock()
        why: str | None = "not asked"
        end = time.monotonic() + 60
        while why is not None and time.monotonic() < end:
            why = quorum.remove_node(host, int(port), i, 10.0)
            if why is not None:
                time.sleep(1.0)
        if why is not None:
            self.faults.write("remove_node", i, {"refused": why}, t=t, end=run_clock())
            self.ops_done.append("remove_node_failed")
            return False
        self.cluster.members.remove(i)
        end = time.monotonic() + 90
        while self.cluster.alive(i) and time.monotonic() < end:
            time.sleep(0.2)
        stopped = not self.cluster.alive(i)
        if not stopped:  # it should have stopped by itself; the run goes on without it
            self.cluster.kill(i)
        self.faults.write("remove_node", i, {"stopped_by_itself": stopped, "asked": asked}, t=t, end=run_clock())
        self.ops_done.append("remove_node")
        return True

    def replace(self) -> None:
        """A node is retired and a new one takes its place: the new one joins first (the
        cluster never has fewer nodes than it started with), then the old one leaves."""
        if not self.cluster.spares():
            self.ops_done.append("replace_skipped")
            return
        old = self.rng.choice(self.cluster.members)
        if self.add_node() is not None:
            self.remove_node(old)
            self.ops_done.append("replace")

    def grow_shrink(self) -> None:
        """3 -> 5 -> 3: two nodes join one at a time, then two nodes leave one at a time."""
        if len(self.cluster.spares()) < 2:
            self.ops_done.append("grow_shrink_skipped")
            return
        added = [j for j in (self.add_node(), self.add_node()) if j is not None]
        for _ in added:
            self.remove_node()
        self.ops_done.append("grow_shrink")

    def kill_all(self, down: float | None = None) -> None:
        down = self.rng.uniform(1, 4) if down is None else down
        t = run_clock()
        for i in list(self.cluster.members):
            self.cluster.kill(i)
        self._sleep(down)
        try:
            self.cluster.start()
        finally:
            now = run_clock()
            self.faults.write("kill_all", None, {"signal": "KILL"}, t=t, end=now)
            self.faults.write("restart_all", None, {}, t=now)
        self.ops_done.append("kill_all")

    def partition_node(self, i: int | None = None, mode: str | None = None, seconds: float | None = None) -> None:
        """Cut a node off from the clients (the links between nodes are untouched)."""
        i = self.rng.choice(self.cluster.members) if i is None else i
        mode = self.rng.choice(self.net.client_modes) if mode is None else mode
        seconds = self.rng.uniform(3, 8) if seconds is None else seconds
        delay_ms = self.rng.choice([200, 500, 1500]) if mode == "delay" else 0
        t = run_clock()
        self.net.set_clients(i, mode, delay_ms)
        self.partitioned[i] = (t, mode)
        self._sleep(seconds)
        self.heal_partition(i, {"mode": mode, "delay_ms": delay_ms, "scope": "clients", "net": self.net.mode})
        self.ops_done.append("partition")

    def _window(self, kind: str, node: int | None, seconds: float, detail: dict[str, Any],
                hold: Callable[[], None] | None = None) -> None:
        """Hold the fault that was just set for ``seconds`` (or run ``hold``, which may add to
        ``detail``), heal every link, log the window."""
        t = run_clock()
        try:
            (hold or (lambda: self._sleep(seconds)))()
        finally:
            self.net.heal()
            now = run_clock()
            self.faults.write("raft_partition", node, {"kind": kind, "net": self.net.mode, **detail}, t=t, end=now)
            self.faults.write("raft_heal", node, {"kind": kind}, t=now)
        self.ops_done.append(kind)

    def _isolation(self, k: int) -> dict[int, list[int]]:
        """Cuts that leave node ``k`` alone (both ends given)."""
        others = [j for j in self.cluster.members if j != k]
        return {k: others, **{j: [k] for j in others}}

    def cut_raft(self, cuts: dict[int, list[int]], seconds: float, node: int | None = None, kind: str = "cut",
                 **detail: Any) -> None:
        """Cut these links between nodes (``{node: [nodes it cannot reach]}``, both ends
        given), clients untouched, for ``seconds``; then heal."""
        self.net.cut(cuts)
        self._window(kind, node, seconds, {"cuts": {str(k): v for k, v in cuts.items()}, **detail})

    def isolate(self, k: int, seconds: float, kind: str, **detail: Any) -> None:
        self.cut_raft(self._isolation(k), seconds, node=k, kind=kind, **detail)

    def isolate_coordinator(self, group: str | None = None, seconds: float | None = None) -> None:
        """Cut a group's coordinator off from the other nodes while its clients still reach it."""
        group = group or self.rng.choice(self.groups)
        seconds = self.rng.uniform(3, 8) if seconds is None else seconds
        self.isolate(self.coordinator_of(group), seconds, "isolate_coordinator", group=group)

    def isolate_txn_coordinator(self, seconds: float | None = None) -> None:
        """Cut an exactly-once worker's transaction coordinator off from the other nodes."""
        tid = self.rng.choice(self.transactional_ids)
        seconds = self.rng.uniform(3, 8) if seconds is None else seconds
        self.isolate(self.txn_coordinator_of(tid), seconds, "isolate_txn_coordinator", transactional_id=tid)

    def isolate_data_leader(self, seconds: float | None = None, topic: str | None = None) -> None:
        """Cut off the leader of a partition of the workload's topic, under produce load."""
        topic = topic or self.data_topic or "__consumer_offsets"
        p = self.rng.randrange(self._partitions(topic))
        seconds = self.rng.uniform(3, 8) if seconds is None else seconds
        self.isolate(self.leader_of(topic, p), seconds, "isolate_data_leader", topic=topic, partition=p)

    def majority_split(self, seconds: float | None = None) -> None:
        """A minority (one node of three, whatever it leads) apart from the majority; clients
        keep reaching both sides, so some of them keep talking to the minority."""
        seconds = self.rng.uniform(3, 8) if seconds is None else seconds
        members = self.cluster.members
        minority = self.rng.sample(members, (len(members) - 1) // 2)
        majority = [j for j in members if j not in minority]
        self.cut_raft({**{i: majority for i in minority}, **{j: minority for j in majority}}, seconds,
                      node=minority[0] if len(minority) == 1 else None, kind="majority_split",
                      minority=minority)

    def bridge(self, seconds: float | None = None) -> None:
        """Two nodes cannot see each other; the third sees both."""
        seconds = self.rng.uniform(3, 8) if seconds is None else seconds
        a, b = self.rng.sample(self.cluster.members, 2)
        self.cut_raft({a: [b], b: [a]}, seconds, kind="bridge", nodes=[a, b])

    def flapping(self, seconds: float | None = None) -> None:
        """A node's links to the others go down and up every few hundred ms."""
        seconds = self.rng.uniform(4, 8) if seconds is None else seconds
        k = self.rng.choice(self.cluster.members)
        down_ms, up_ms = self.rng.choice([(200, 300), (300, 700), (800, 1200)])
        detail: dict[str, Any] = {"down_ms": down_ms, "up_ms": up_ms, "flips": 0}

        def flap() -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                self.net.cut(self._isolation(k))
                self._sleep(min(down_ms / 1000, end - time.monotonic()))
                self.net.cut({})
                detail["flips"] += 1
                self._sleep(min(up_ms / 1000, end - time.monotonic()))

        self._window("flapping", k, seconds, detail, hold=flap)

    def packet_loss(self, seconds: float | None = None) -> None:
        """Every node loses a share (10-40 %) of what the others send it."""
        seconds = self.rng.uniform(4, 8) if seconds is None else seconds
        pct = self.rng.choice([10, 20, 40])
        self.net.set_loss({i: pct for i in self.cluster.members})
        self._window("packet_loss", None, seconds, {"percent": pct})

    def one_way_loss(self, seconds: float | None = None) -> None:
        """What one node sends another is lost, while the other direction still arrives (in the
        Raft transport: over TCP an IP-level one-way drop stalls both directions)."""
        seconds = self.rng.uniform(3, 8) if seconds is None else seconds
        a, b = self.rng.sample(self.cluster.members, 2)
        self.net.set_transport({a: {"mute": [b]}})
        self._window("one_way_loss", a, seconds, {"from": a, "to": b})

    def link_chaos(self, seconds: float | None = None) -> None:
        """Raft messages delayed (so reordered) and duplicated on every node's links."""
        seconds = self.rng.uniform(4, 8) if seconds is None else seconds
        delay_s = self.rng.choice([0.05, 0.2, 0.5])
        spec = {"delay_s": delay_s, "hold": 0.3, "duplicate": 0.2}
        self.net.set_transport({i: {**spec, "seed": self.seed * 31 + i} for i in self.cluster.members})
        self._window("delay_duplicate_reorder", None, seconds, spec)

    def heal_partition(self, i: int, detail: dict[str, Any]) -> None:
        if i not in self.partitioned:
            return
        t, _mode = self.partitioned.pop(i)
        self.net.set_clients(i, "ok")
        now = run_clock()
        self.faults.write("partition", i, detail, t=t, end=now)
        self.faults.write("heal", i, detail, t=now)

    def heal_all(self) -> None:
        """End every fault: heal proxies, resume paused nodes, start dead nodes."""
        for i in list(self.partitioned):
            self.heal_partition(i, {"mode": self.partitioned[i][1], "final_heal": True})
        self.net.heal()
        for i in list(self.cluster.paused):
            self.cluster.resume(i)
            self.faults.write("resume", i, {"final_heal": True})
        for i in list(self.cluster.members):
            if not self.cluster.alive(i):
                self.cluster.start(i)
                self.faults.write("restart", i, {"final_heal": True})

    # ---------------------------------------------------------------- client faults

    def client(self, op: str, **kw: Any) -> None:
        fn = self.client_ops.get(op)
        if fn is not None:
            fn(self.rng, **kw)
            self.ops_done.append(op)

    # ---------------------------------------------------------------- scenarios

    def run(self, scenario: str, duration: float) -> None:
        self.deadline = time.monotonic() + duration
        SCENARIOS[scenario](self)

    def _gap(self, lo: float = 2.0, hi: float = 5.0) -> bool:
        """Sleep between faults; False when the run's fault window is over."""
        self._sleep(min(self.rng.uniform(lo, hi), max(0.0, self._remaining())))
        return self._remaining() > 0

    def _random_op(self) -> Callable[[], None]:
        ops: list[tuple[float, Callable[[], None]]] = [
            (3, self.kill_coordinator),
            (2, lambda: self.kill_node(self.rng.choice(self.cluster.members), self.rng.uniform(2, 6),
                                       clean=self.rng.random() < 0.3)),
            (2, self.pause_node),
            (2, self.transfer),
            (2, self.partition_node),
            (2, self.isolate_coordinator),
            (1, self.isolate_data_leader),
            (1, self.majority_split),
            (1, self.bridge),
            (1, self.flapping),
            (0.5, self.packet_loss),
            (0.5, self.one_way_loss),
            (0.5, self.link_chaos),
            (1, self.kill_all),
            (1, self.power_loss),
            (1.5, self.disk_loss),
            (1, self.replace),
            (0.5, self.grow_shrink),
            *([(0.5, self.power_loss_all)] if self.durability == "fsync" else []),
            (0.5, lambda: self.rolling_restart(clean=self.rng.random() < 0.7, settle=2.0)),
            (2, lambda: self.client("crash_consumer")),
            (1, lambda: self.client("bounce_group", clean=self.rng.random() < 0.5)),
            (1, lambda: self.client("bounce_static")),
        ]
        total = sum(w for w, _ in ops)
        x = self.rng.uniform(0, total)
        for w, fn in ops:
            x -= w
            if x <= 0:
                return fn
        return ops[-1][1]


def _coordinator_kill(n: Nemesis) -> None:
    while n._gap(3, 6):
        n.kill_coordinator()


def _broker_rolling_bounce(n: Nemesis) -> None:
    while n._gap(2, 4):
        n.rolling_restart(clean=True)


def _consumer_bounce_hard(n: Nemesis) -> None:
    while n._gap(2, 5):
        if n.rng.random() < 0.25:
            n.client("bounce_group", clean=False)
        else:
            n.client("crash_consumer")


def _static_consumer_bounce(n: Nemesis) -> None:
    while n._gap(3, 6):
        n.client("bounce_static")


def _broker_failure(n: Nemesis) -> None:
    while n._gap(3, 6):
        n.kill_node(n.rng.choice(n.cluster.members), n.rng.uniform(3, 8), clean=n.rng.random() < 0.5)


def _eos_op(n: Nemesis) -> Callable[[], None]:
    """One fault aimed at what exactly-once depends on: the transaction coordinator, the
    group coordinator, the input and output leaders, the workers themselves."""
    ops: list[tuple[float, Callable[[], None]]] = [
        (3, n.kill_txn_coordinator),
        (2, n.kill_coordinator),
        (2, n.kill_data_leader),
        (2, n.isolate_txn_coordinator),
        (1, n.isolate_coordinator),
        (1, lambda: n.isolate_data_leader(topic=n.rng.choice(n.eos_topics))),
        (1, lambda: n.partition_node(mode=n.rng.choice(["drop", "close"]))),
        (1, n.pause_node),
        (1, lambda: n.kill_node(n.rng.choice(n.cluster.members), n.rng.uniform(2, 5), clean=True)),
        (1, lambda: n.client("crash_eos_worker")),
        (0.5, n.majority_split),
        (0.5, lambda: n.kill_all(down=n.rng.uniform(1, 3))),
    ]
    x = n.rng.uniform(0, sum(w for w, _ in ops))
    for w, fn in ops:
        x -= w
        if x <= 0:
            return fn
    return ops[-1][1]


def _eos(n: Nemesis) -> None:
    while n._gap(2, 5):
        _eos_op(n)()


def _eos_bounded(n: Nemesis) -> None:
    """The CI version: each exactly-once fault once, transaction coordinator first."""
    plan: list[Callable[[], None]] = [
        lambda: n.kill_txn_coordinator(down=3),
        lambda: n.kill_coordinator(down=3),
        lambda: n.kill_data_leader(down=3),
        lambda: n.isolate_txn_coordinator(seconds=4),
        lambda: n.client("crash_eos_worker"),
        lambda: n.isolate_data_leader(seconds=4, topic=n.rng.choice(n.eos_topics)),
    ]
    first, rest = plan[0], plan[1:]
    n.rng.shuffle(rest)
    for op in [first, *rest]:
        if not n._gap(3, 5):
            return
        op()


def _every_few_seconds(fault: Callable[[Nemesis], None]) -> Callable[[Nemesis], None]:
    """A scenario that repeats one network fault, 3-6 s apart."""
    def scenario(n: Nemesis) -> None:
        while n._gap(3, 6):
            fault(n)
    return scenario


def _random(n: Nemesis) -> None:
    while n._gap(1, 4):
        n._random_op()()


def _bounded(n: Nemesis) -> None:
    """A short CI mix: every fault kind once (seeded order after the first two), as many as fit."""
    plan: list[Callable[[], None]] = [
        n.kill_coordinator,
        lambda: n.pause_node(seconds=n.rng.uniform(2, 4)),
        lambda: n.transfer(rounds=2),
        lambda: n.partition_node(mode="drop", seconds=4),
        lambda: n.isolate_coordinator(seconds=4),
        lambda: n.majority_split(seconds=3),
        lambda: n.bridge(seconds=3),
        lambda: n.flapping(seconds=3),
        lambda: n.one_way_loss(seconds=3),
        lambda: n.link_chaos(seconds=3),
        lambda: n.client("crash_consumer"),
        lambda: n.kill_all(down=1.5),
        lambda: n.partition_node(mode="close", seconds=3),
        lambda: n.client("bounce_static"),
        lambda: n.kill_node(n.rng.choice(n.cluster.members), 3, clean=True),
        lambda: n.rolling_restart(clean=False, settle=2.0),
    ]
    # a coordinator kill, a lost disk (a wiped node back as a learner) and a node replaced (a new
    # one joins, an old one leaves) first, the rest shuffled
    first, rest = [plan[0], lambda: n.disk_loss(down=1.5), n.replace], plan[1:]
    n.rng.shuffle(rest)
    for op in [*first, *rest]:
        if not n._gap(1.5, 3):
            return
        op()


SCENARIOS: dict[str, Callable[[Nemesis], None]] = {
    "coordinator-kill": _coordinator_kill,
    "broker-rolling-bounce": _broker_rolling_bounce,
    "consumer-bounce-hard": _consumer_bounce_hard,
    "static-consumer-bounce": _static_consumer_bounce,
    "broker-failure": _broker_failure,
    "partition-coordinator": _every_few_seconds(lambda n: n.isolate_coordinator()),
    "partition-bridge": _every_few_seconds(lambda n: n.bridge()),
    "partition-majority": _every_few_seconds(lambda n: n.majority_split()),
    "partition-flapping": _every_few_seconds(lambda n: n.flapping()),
    "power-loss": _every_few_seconds(lambda n: n.power_loss_all() if n.durability == "fsync" and n.rng.random() < 0.3
                                     else n.power_loss()),
    "disk-loss": _every_few_seconds(lambda n: n.disk_loss()),
    "membership": _every_few_seconds(lambda n: n.rng.choice([n.replace, n.replace, n.grow_shrink, n.disk_loss])()),
    "random": _random,
    "bounded": _bounded,
    "eos": _eos,
    "eos-bounded": _eos_bounded,
}
