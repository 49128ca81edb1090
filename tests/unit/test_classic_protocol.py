"""The consumer protocol embedded in classic groups (coordinator/consumer_group/classic_protocol.py),
checked against aiokafka's independent encoding of it, and the later fields (owned partitions,
rack) that cooperative clients send."""

from __future__ import annotations

import struct

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

from coordinator.binary import RecordDecodeError
from coordinator.consumer_group.classic_protocol import (
    encode_assignment,
    parse_assignment,
    parse_subscription,
)


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def test_a_v0_subscription_as_aiokafka_writes_it() -> None:
    data = ConsumerProtocolMemberMetadata(0, ["foo", "bar"], b"ud").encode()
    sub = parse_subscription(data)
    assert (sub.version, sub.topics, sub.owned, sub.rack_id) == (0, ("foo", "bar"), {}, None)


def test_a_v3_subscription_carries_owned_partitions_and_the_rack() -> None:
    data = (struct.pack(">hi", 3, 1) + _s("foo") + struct.pack(">i", -1)  # topics, null user data
            + struct.pack(">i", 1) + _s("foo") + struct.pack(">iii", 2, 4, 1)  # owned: foo 4, 1
            + struct.pack(">i", 7) + _s("rack-a"))  # generation, rack
    sub = parse_subscription(data)
    assert (sub.version, sub.topics, sub.owned, sub.rack_id) == (3, ("foo",), {"foo": frozenset({1, 4})}, "rack-a")


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00\x00\x00\x05\x00\x01", b"\xff\xff\x00\x00\x00\x00"])
def test_a_malformed_subscription_is_refused(data: bytes) -> None:
    with pytest.raises(RecordDecodeError):
        parse_subscription(data)


def test_assignments_read_and_written_as_aiokafka_does() -> None:
    theirs = ConsumerProtocolMemberAssignment(0, [("foo", [0, 2]), ("bar", [1])], b"ud").encode()
    assert parse_assignment(theirs) == ({"foo": frozenset({0, 2}), "bar": frozenset({1})}, b"ud")
    ours = encode_assignment(1, {"foo": [2, 0], "bar": [1]})
    decoded = ConsumerProtocolMemberAssignment.decode(ours)
    assert decoded.version == 1 and sorted((t, sorted(ps)) for t, ps in decoded.assignment) == [
        ("bar", [1]), ("foo", [0, 2])]
    assert parse_assignment(b"") == ({}, b"")
