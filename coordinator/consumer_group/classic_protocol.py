"""The consumer protocol embedded in classic groups (ConsumerProtocolSubscription and
ConsumerProtocolAssignment, v0-3), read and written where a consumer group holds members that
speak the classic protocol: a classic group converted to a consumer group (the online upgrade),
and classic members joining one (KIP-848 §7). Topics are names here."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from coordinator.binary import Reader, RecordDecodeError

MAX_VERSION = 3


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]] = field(default_factory=dict)  # v1+: what a cooperative client holds
    rack_id: str | None = None  # v3+


def parse_subscription(data: bytes) -> Subscription:
    """Fields of later versions than 3 are left unread, as Kafka's parser does. Raises
    RecordDecodeError on a malformed subscription."""
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise RecordDecodeError(f"subscription version {version}")
    topics = tuple(r.string(False) for _ in range(r.array_len(False)))
    r.bytes_(False)  # user data
    owned: dict[str, frozenset[int]] = {}
    rack = None
    if version >= 1:
        for _ in range(r.array_len(False)):
            topic = r.string(False)
            owned[topic] = owned.get(topic, frozenset()) | frozenset(r.int32() for _ in range(r.array_len(False)))
    if version >= 2:
        r.int32()  # generation id
    if version >= 3:
        rack = r.nstring(False)
    return Subscription(version, topics, owned, rack)


def parse_assignment(data: bytes) -> tuple[dict[str, frozenset[int]], bytes]:
    """A member's assignment by topic name, and its user data; an empty byte string is an empty
    assignment (a member that never synced). Raises RecordDecodeError when malformed."""
    if not data:
        return {}, b""
    r = Reader(data)
    if r.int16() < 0:
        raise RecordDecodeError("negative assignment version")
    parts: dict[str, frozenset[int]] = {}
    for _ in range(r.array_len(False)):
        topic = r.string(False)
        parts[topic] = parts.get(topic, frozenset()) | frozenset(r.int32() for _ in range(r.array_len(False)))
    return parts, r.bytes_(False)


def encode_assignment(version: int, parts: Mapping[str, Iterable[int]]) -> bytes:
    """A ConsumerProtocolAssignment in the member's subscription version (at most 3), no user data."""
    out = [struct.pack(">hi", max(0, min(version, MAX_VERSION)), len(parts))]
    for topic, ps in sorted(parts.items()):
        name = topic.encode()
        sorted_ps = sorted(ps)
        out.append(struct.pack(">h", len(name)) + name + struct.pack(f">i{len(sorted_ps)}i", len(sorted_ps), *sorted_ps))
    out.append(struct.pack(">i", -1))
    return b"".join(out)
