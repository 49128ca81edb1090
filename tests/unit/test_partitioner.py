"""Group -> ``__consumer_offsets`` partition, bit-exact with Kafka's ``Utils.abs(groupId.hashCode()) % n``."""

from __future__ import annotations

import pytest

from coordinator.partitioner import java_abs, java_string_hashcode, partition_for

INT_MIN = -(2**31)


@pytest.mark.parametrize(("s", "expected"), [
    ("", 0),
    ("hello", 99162322),
    ("hello world", 1794106052),
    ("Hello World", -862545276),  # wraps to a negative int
    ("Aa", 2112),
    ("BB", 2112),  # the classic Java collision
    ("polygenelubricants", INT_MIN),
])
def test_java_string_hashcode_of_known_strings(s: str, expected: int) -> None:
    """testPartitionFor: Java String.hashCode() values"""
    assert java_string_hashcode(s) == expected


def test_non_bmp_characters_hash_as_utf16_surrogate_pairs() -> None:
    """testPartitionFor: U+1F600 is the surrogate pair D83D DE00 in Java"""
    assert java_string_hashcode("\U0001F600") == 31 * 0xD83D + 0xDE00 == 1772899
    assert java_string_hashcode("g\U0001F600x") == 58028462
    assert java_string_hashcode("\U0001F600") != ord("\U0001F600")


def test_java_abs() -> None:
    """Utils.abs: Integer.MIN_VALUE maps to 0"""
    assert java_abs(INT_MIN) == 0
    assert java_abs(-5) == 5 and java_abs(7) == 7


def test_partition_for() -> None:
    """testPartitionFor: Utils.abs(hashCode) % partitions"""
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("polygenelubricants", 7) == 0
    assert partition_for("hello", 50) == 99162322 % 50 == 22
    assert partition_for("Hello World", 50) == 862545276 % 50 == 26
    assert partition_for("", 50) == 0
    assert partition_for("anything", 1) == 0
    with pytest.raises(ValueError):
        partition_for("g", 0)
