"""A batch header that lies is refused with Kafka's error, and later produces are unaffected."""

from __future__ import annotations

import struct

import pytest

from replication.record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, build_batch, crc32c, iter_records
from tests.cluster.test_data_plane import _fetch_raw, _produce_raw, create_topic
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster


def test_negative_last_offset_delta_is_refused_and_the_log_end_holds(bootstrap) -> None:
    create_topic(bootstrap, "hostile", 1)
    c = RawConn(bootstrap)
    first = _produce_raw(c, "hostile", build_batch([(None, b"a"), (None, b"b"), (None, b"c")]))
    assert first.error_code == 0 and first.base_offset == 0
    hostile = bytearray(build_batch([(None, b"x"), (None, b"y")]))
    struct.pack_into(">i", hostile, 23, -3)  # lastOffsetDelta = -3 ...
    struct.pack_into(">I", hostile, CRC_OFFSET, crc32c(memoryview(hostile)[ATTRIBUTES_OFFSET:]))  # ... correct CRC
    refused = _produce_raw(c, "hostile", bytes(hostile))
    assert refused.error_code == 87  # INVALID_RECORD
    assert "lastOffsetDelta" in (refused.error_message or "")
    after = _produce_raw(c, "hostile", build_batch([(None, b"d")]))
    assert after.error_code == 0 and after.base_offset == 3  # not an offset that already exists
    too_big = _produce_raw(c, "hostile", build_batch([(None, b"z" * 1_100_000)]))
    assert too_big.error_code == 10  # MESSAGE_TOO_LARGE (max.message.bytes 1048588)
    fetched = _fetch_raw(c, "hostile", 0, max_wait_ms=0)
    values = [(r.offset, r.value) for r in iter_records(bytes(fetched.records))]
    assert values == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    c.close()
