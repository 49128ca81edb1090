"""The unsigned varint of Kafka's flexible versions (lengths, counts, tags), written by every
record and wire codec that hand-encodes them: ``__consumer_offsets``, ``__transaction_state`` and
the node's own response encoders."""

from __future__ import annotations


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
