"""A simulated consumer: the classic group protocol as a Java/librdkafka consumer speaks it.

One request in flight at a time (one connection); the simulator delivers requests and
responses with delays and losses and tells the client when its request timed out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator import commands as c

TOPIC = "events"
TOPIC_PARTITIONS = 6
PROTOCOL_TYPE = "consumer"


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: int16 version, [string] topics, null user data."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        b = t.encode()
        out += len(b).to_bytes(2, "big") + b
    return out + b"\xff\xff\xff\xff"


PROTOCOLS = (("range", subscription(TOPIC)),)


def range_assign(member_ids: list[str]) -> dict[str, bytes]:
    """Kafka's RangeAssignor for one topic: members sorted, contiguous ranges."""
    members = sorted(member_ids)
    n, k = TOPIC_PARTITIONS, len(members)
    out: dict[str, bytes] = {}
    start = 0
    for i, m in enumerate(members):
        count = n // k + (1 if i < n % k else 0)
        out[m] = encode_assignment(range(start, start + count))
        start += count
    return out


def encode_assignment(partitions: range | list[int]) -> bytes:
    return (TOPIC + ":" + ",".join(str(p) for p in partitions)).encode()


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    if not data:
        return []
    topic, _, parts = data.decode().partition(":")
    return [(topic, int(p)) for p in parts.split(",") if p]


@dataclass(slots=True)
class InFlight:
    seq: int
    kind: str  # find, join, sync, heartbeat, commit, fetch, leave
    node: int | None
    request: c.Request | None
    sent_at: int
    acked_floor: dict[tuple[str, int], int] = field(default_factory=dict)  # fetch: acked before send


@dataclass(slots=True)
class Client:
    cid: str
    group: str
    instance: str | None
    version: int  # JoinGroup version: 4 (KIP-394 two-step) or 9 (skip assignment)
    alive: bool = True
    state: str = "find"  # find, join, sync, fetch, stable, dead
    coordinator: int | None = None
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    join_members: tuple[c.JoinGroupMember, ...] = ()
    skip_assignment: bool = False
    assignment: list[tuple[str, int]] = field(default_factory=list)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)
    inflight: InFlight | None = None
    wake_at: int = 0
    next_hb: int = 0
    next_commit: int = 0
    hb_ok: bool = False  # a heartbeat succeeded in the current generation since its SyncGroup
    restart_at: int = 0
    incarnation: int = 0
    after_find: str = "join"
