"""Which ``__consumer_offsets`` partition owns a group: bit-exact with Kafka.

Kafka uses ``Utils.abs(groupId.hashCode()) % numPartitions``: Java's String.hashCode
over UTF-16 code units with 32-bit wraparound, and an ``abs`` that maps
Integer.MIN_VALUE to 0. Python's ``hash()`` is salted per process and must never
be used for this.
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode()`` as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        unit = (data[i] << 8) | data[i + 1]
        h = (31 * h + unit) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: Integer.MIN_VALUE maps to 0, not to itself."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return java_abs(java_string_hashcode(group_id)) % num_partitions
