"""``__transaction_state`` records in Kafka's byte layout (TransactionLogTest, restated)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transactions.codec import TxnRecordDecodeError, decode, encode, encode_key, encode_value
from transactions.records import TxnRecord, TxnValue
from transactions.state import TxnState

_partitions = st.frozensets(st.tuples(st.text(min_size=1, max_size=8), st.integers(0, 1000)), max_size=6)


@st.composite
def _values(draw: st.DrawFn) -> TxnValue:
    state = draw(st.sampled_from([s for s in TxnState if s not in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)]))
    parts = frozenset() if state is TxnState.EMPTY else draw(_partitions)
    return TxnValue(draw(st.integers(0, 2**63 - 1)), draw(st.integers(-1, 32767)), draw(st.integers(1, 2**31 - 1)),
                    state, parts, draw(st.integers(-1, 2**62)), draw(st.integers(-1, 2**62)),
                    draw(st.integers(-1, 2**63 - 1)), draw(st.integers(-1, 2**63 - 1)), draw(st.sampled_from([0, 1, 2])))


@given(st.text(max_size=40), st.none() | _values())
def test_records_round_trip(tid: str, value: TxnValue | None) -> None:
    key, raw = encode(TxnRecord(tid, value))
    assert decode(key, raw) == TxnRecord(tid, value)


def test_the_v0_layout_is_kafkas() -> None:
    v = TxnValue(7, 3, 60_000, TxnState.ONGOING, frozenset({("t", 1), ("t", 0)}), 11, 10)
    assert encode_key("id") == b"\x00\x00\x00\x02id"
    assert encode_value(v) == (struct.pack(">hqhib", 0, 7, 3, 60_000, 1) + struct.pack(">i", 1)
                               + b"\x00\x01t" + struct.pack(">iii", 2, 0, 1) + struct.pack(">qq", 11, 10))
    empty = TxnValue(7, 3, 60_000, TxnState.EMPTY, frozenset(), 11, -1)
    assert encode_value(empty) == struct.pack(">hqhib", 0, 7, 3, 60_000, 0) + struct.pack(">iqq", -1, 11, -1)


def test_a_flexible_v1_value_is_read_with_its_tags() -> None:
    body = (struct.pack(">hqhib", 1, 7, 3, 60_000, 2)
            + bytes([2, 2]) + b"t" + bytes([2]) + struct.pack(">i", 4) + bytes([0])  # one topic, one partition
            + struct.pack(">qq", 11, 10)
            + bytes([3, 0, 8]) + struct.pack(">q", 6)  # tag 0 (previous producer id) = 6
            + bytes([2, 2]) + struct.pack(">h", 2)  # tag 2 (client transaction version) = 2
            + bytes([9, 1, 0]))  # an unknown tag: skipped
    expected = TxnRecord("id", TxnValue(7, 3, 60_000, TxnState.PREPARE_COMMIT, frozenset({("t", 4)}), 11, 10,
                                        previous_producer_id=6, client_version=2))
    assert decode(encode_key("id"), body) == expected
    # written back in the same layout (Kafka's tag order), without the unknown tag
    assert encode_value(expected.value) == body[:-3].replace(bytes([3, 0, 8]), bytes([2, 0, 8]), 1)


def test_a_version_2_value_is_written_flexible_and_a_version_1_one_as_v0() -> None:
    v1 = TxnValue(7, 3, 60_000, TxnState.ONGOING, frozenset({("t", 1)}), 11, 10)
    v2 = TxnValue(7, 4, 60_000, TxnState.PREPARE_ABORT, frozenset({("t", 1)}), 11, 10, next_producer_id=99,
                  client_version=2)
    assert struct.unpack_from(">h", encode_value(v1) or b"")[0] == 0
    assert struct.unpack_from(">h", encode_value(v2) or b"")[0] == 1
    assert decode(encode_key("id"), encode_value(v2)).value == v2


def test_an_empty_transaction_with_partitions_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_value(TxnValue(1, 0, 1, TxnState.EMPTY, frozenset({("t", 0)}), 0, -1))


@pytest.mark.parametrize(("key", "value"), [
    (b"\x00\x01\x00\x02id", None), (b"\x00\x00\x00\x09id", None),
    (encode_key("id"), b"\x00\x05" + bytes(30)), (encode_key("id"), b"\x00\x00\x00")])
def test_malformed_records_raise_a_decode_error(key: bytes, value: bytes | None) -> None:
    with pytest.raises(TxnRecordDecodeError):
        decode(key, value)
