"""A manual-clock harness around the pure coordinator runtime for behaviour tests.

``Harness`` owns one partition (0), commits every append at once unless
``auto_commit=False``, and keeps every response by its token.
"""

from __future__ import annotations

import itertools
from typing import Any

from coordinator import commands as c
from coordinator.codec import decode_batch, encode_batch
from coordinator.config import GroupConfig
from coordinator.group import ClassicGroup
from coordinator.records import Record
from coordinator.runtime import Append, CoordinatorRuntime, Reload, Respond

# Kafka's GroupMetadataManagerTestContext defaults.
TEST_CONFIG = GroupConfig(
    min_session_timeout_ms=10,
    max_session_timeout_ms=600_000,
    initial_rebalance_delay_ms=3_000,
)

CONSUMER_PROTOCOLS = (("range", b"range-meta"), ("roundrobin", b"rr-meta"))


def consumer_subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: int16 version, [string] topics, null user data."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        b = t.encode()
        out += len(b).to_bytes(2, "big") + b
    return out + b"\xff\xff\xff\xff"


class Pending:
    """A request whose response has not been released yet."""

    def __init__(self, harness: Harness, token: int) -> None:
        self.h = harness
        self.token = token

    @property
    def done(self) -> bool:
        return self.token in self.h.responses

    @property
    def response(self) -> Any:
        assert self.done, f"request {self.token} is still pending"
        return self.h.responses[self.token]


class Harness:
    def __init__(self, config: GroupConfig = TEST_CONFIG, auto_commit: bool = True, partition: int = 0,
                 epoch: int = 1) -> None:
        self.config = config
        self.now = 0
        self.auto_commit = auto_commit
        self.partition = partition
        self.epoch = epoch
        self.rt = CoordinatorRuntime(config)
        self.responses: dict[int, Any] = {}
        self.log: list[Record] = []  # every record appended, in order (the "partition")
        self.uncommitted: list[Append] = []
        self.reloads: list[Reload] = []
        self._tokens = itertools.count(1)
        self._handle(self.rt.begin_load(partition, epoch))
        self._handle(self.rt.complete_load(partition, epoch, [], self.now))

    # ---------------------------------------------------------------- plumbing

    def _handle(self, effects: list[Any]) -> None:
        queue = list(effects)
        while queue:
            e = queue.pop(0)
            if isinstance(e, Respond):
                assert e.token not in self.responses, f"token {e.token} answered twice"
                self.responses[e.token] = e.response
            elif isinstance(e, Append):
                # Round-trip through the entry format (Kafka's bytes per record), as the real log would.
                self.log.extend(decode_batch(encode_batch(list(e.records))))
                if self.auto_commit:
                    queue.extend(self.rt.on_committed(e.partition, e.epoch, e.end_offset))
                else:
                    self.uncommitted.append(e)
            elif isinstance(e, Reload):
                self.reloads.append(e)

    def commit_all(self) -> None:
        """Commit every append, including those the runtime sends as earlier ones commit."""
        while self.uncommitted:
            e = self.uncommitted.pop(0)
            self._handle(self.rt.on_committed(e.partition, e.epoch, e.end_offset))

    def fail_appends(self, error: Any) -> None:
        self.uncommitted = []
        self._handle(self.rt.on_append_failed(self.partition, self.epoch, error))

    def send(self, request: c.Request) -> Pending:
        token = next(self._tokens)
        self._handle(self.rt.submit(self.partition, request, token, self.now))
        return Pending(self, token)

    def call(self, request: c.Request) -> Any:
        p = self.send(request)
        return p.response

    def sleep(self, ms: int) -> None:
        """Advance the clock, firing due timers in deadline order (like Kafka's MockTime)."""
        target = self.now + ms
        while True:
            deadline = self.rt.next_deadline()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
            self._handle(self.rt.advance(self.now))
        self.now = target
        self._handle(self.rt.advance(self.now))

    @property
    def shard(self) -> Any:
        s = self.rt.shard(self.partition)
        assert s is not None
        return s

    def group(self, group_id: str) -> ClassicGroup:
        return self.shard.groups[group_id]

    def records_since(self, n: int) -> list[Record]:
        return self.log[n:]

    # ---------------------------------------------------------------- request helpers

    def join(self, group_id: str = "g", member_id: str = "", *, instance_id: str | None = None,
             protocols: tuple[tuple[str, bytes], ...] = CONSUMER_PROTOCOLS, protocol_type: str = "consumer",
             session_ms: int = 10_000, rebalance_ms: int = 10_000, version: int = 3,
             client_id: str = "client", reason: str | None = None) -> Pending:
        """JoinGroup at an API version: v3 = no KIP-394, v4+ = MEMBER_ID_REQUIRED, v9 = skip-assignment."""
        return self.send(c.JoinGroupRequest(
            group_id=group_id, member_id=member_id, session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms, protocol_type=protocol_type, protocols=protocols,
            group_instance_id=instance_id, client_id=client_id, client_host="/127.0.0.1", reason=reason,
            require_known_member_id=version >= 4, supports_skip_assignment=version >= 9))

    def sync(self, group_id: str, member_id: str, generation: int, *, instance_id: str | None = None,
             assignments: dict[str, bytes] | None = None, protocol_type: str | None = None,
             protocol_name: str | None = None) -> Pending:
        return self.send(c.SyncGroupRequest(
            group_id, generation, member_id, instance_id, protocol_type, protocol_name,
            tuple((assignments or {}).items())))

    def heartbeat(self, group_id: str, member_id: str, generation: int,
                  instance_id: str | None = None) -> Any:
        return self.call(c.HeartbeatRequest(group_id, generation, member_id, instance_id)).error

    def leave(self, group_id: str, *members: tuple[str, str | None]) -> Any:
        return self.call(c.LeaveGroupRequest(group_id, tuple(c.LeaveMember(m, i) for m, i in members)))

    def commit(self, group_id: str, offsets: dict[tuple[str, int], int], *, generation: int = -1,
               member_id: str = "", instance_id: str | None = None, metadata: str = "",
               retention_ms: int = -1, v9: bool = False) -> dict[tuple[str, int], Any]:
        by_topic: dict[str, list[c.PartitionCommit]] = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append(c.PartitionCommit(p, o, metadata=metadata))
        resp = self.call(c.OffsetCommitRequest(
            group_id, tuple((t, tuple(ps)) for t, ps in by_topic.items()), generation, member_id,
            instance_id, retention_ms, v9))
        return {(t, p): e for t, ps in resp.topics for p, e in ps}

    def fetch(self, group_id: str, partitions: dict[str, list[int]] | None = None) -> dict[tuple[str, int], int]:
        topics = None if partitions is None else tuple((t, tuple(ps)) for t, ps in partitions.items())
        resp = self.call(c.OffsetFetchRequest(group_id, topics))
        return {(t, f.partition): f.offset for t, fs in resp.topics for f in fs}

    def join_stable(self, group_id: str = "g", n: int = 1, **kw: Any) -> list[str]:
        """Bring ``n`` dynamic members (v3 joins) to a Stable group; returns member ids, leader first."""
        pending = [self.join(group_id, **kw) for _ in range(n)]
        for _ in range(100):  # the initial delay may be extended up to the rebalance timeout
            if all(p.done for p in pending):
                break
            self.sleep(max(self.config.initial_rebalance_delay_ms, 1))
        responses = [p.response for p in pending]
        assert all(r.error == 0 for r in responses), responses
        gen = responses[0].generation_id
        leader = responses[0].leader
        ids = [r.member_id for r in responses]
        syncs = [self.sync(group_id, m, gen, assignments={x: x.encode() for x in ids} if m == leader else None)
                 for m in ids]
        assert all(s.done and s.response.error == 0 for s in syncs)
        return [leader] + [m for m in ids if m != leader]
