"""A topic's cleanup.policy as Kafka applies it (replication/compacted.py): retention by time or
size deletes only where the policy includes ``delete`` (a ``compact``-only topic, such as a Kafka
Streams changelog or Kafka Connect's config topic, keeps everything), -1 means no bound, and a
record without a key is refused on a topic whose policy includes ``compact``."""

from __future__ import annotations

import asyncio
import gzip
import struct
from pathlib import Path

import pytest

from cluster.config import load_config
from cluster.data_plane import Err, PartitionStore
from replication.record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, build_batch, crc32c
from tests.unit.test_data_log import put


def _store(tmp_path: Path, **settings: object) -> PartitionStore:
    cfg = load_config(None, env={}, overrides={"data_dir": str(tmp_path), **settings})
    return PartitionStore(str(tmp_path), cfg)


def _fill_old(store: PartitionStore, configs: dict[str, str]) -> int:
    """30 records from 1970 in ~1 KB segments; returns the segment count."""
    part = store.open("t", 0, {"segment.bytes": "1024", **configs})
    for i in range(30):
        put(part.data, 1, ts=1_000 + i, size=100)
    return part.data.segment_count


BY_TIME = {"retention.ms": "5000", "retention.bytes": "-1"}
BY_SIZE = {"retention.ms": "-1", "retention.bytes": "2000"}


@pytest.mark.parametrize("retention", [BY_TIME, BY_SIZE], ids=["by-time", "by-size"])
@pytest.mark.parametrize("policy", [None, "delete", "compact", "compact,delete", "delete,compact"])
def test_retention_deletes_only_with_the_delete_policy(tmp_path: Path, retention: dict[str, str],
                                                       policy: str | None) -> None:
    store = _store(tmp_path)
    configs = dict(retention) if policy is None else {**retention, "cleanup.policy": policy}
    segments = _fill_old(store, configs)
    assert segments > 3
    deleted = store.enforce_retention()
    data = store.get("t", 0)
    assert data is not None
    if policy == "compact":  # Kafka never deletes a compact-only topic's data by time or size
        assert deleted == 0 and data.data.segment_count == segments and data.data.log_start_offset == 0
    else:  # no policy is Kafka's default, delete
        assert deleted > 0 and data.data.log_start_offset > 0
    assert data.data.log_end_offset == 30


def test_minus_one_keeps_everything(tmp_path: Path) -> None:
    store = _store(tmp_path / "topic")  # -1 in the topic's configs
    segments = _fill_old(store, {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"})
    assert store.enforce_retention() == 0
    node = _store(tmp_path / "node", log_retention_ms=-1, log_retention_bytes=-1)  # -1 as the node's defaults
    assert _fill_old(node, {}) == segments and node.enforce_retention() == 0
    for s in (store, node):
        part = s.get("t", 0)
        assert part is not None and part.data.log_start_offset == 0 and part.data.segment_count == segments


def _compressed(batch: bytes, codec: int = 1) -> bytes:
    """The batch with its records compressed by kafka-python's encoder for ``codec`` (gzip,
    snappy, lz4, zstd), its attributes, length and CRC fixed up."""
    from kafka import codec as reference

    encode = {1: gzip.compress, 2: lambda b: reference.snappy_encode(b, xerial_compatible=True),
              3: reference.lz4_encode, 4: reference.zstd_encode}[codec]
    buf = bytearray(batch[:HEADER_SIZE] + encode(batch[HEADER_SIZE:]))
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, codec)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete,compact", "delete"])
def test_a_record_without_a_key_is_refused_on_a_compacted_topic(tmp_path: Path, policy: str) -> None:
    part = _store(tmp_path).open("t", 0, {"cleanup.policy": policy})
    compacted = "compact" in policy
    keyless = build_batch([(b"k1", b"v"), (None, b"no key"), (b"k3", b"v")])
    large = build_batch([(b"k1", b"x" * 20_000), (None, b"no key")])  # walked off the event loop

    async def main() -> None:
        for batch in (keyless, *(_compressed(keyless, codec) for codec in (1, 2, 3, 4)), large):
            res = await part.produce(batch)
            if compacted:
                assert res.error is Err.INVALID_RECORD and int(res.error) == 87
                assert res.message == "Compacted topic cannot accept message without key in topic partition t-0."
            else:
                assert res.error is Err.NONE
        keyed = await part.produce(build_batch([(b"k1", b"v"), (b"k2", None)]))  # a tombstone has a key
        assert keyed.error is Err.NONE
        for codec in (1, 2, 3, 4):
            keyed_compressed = await part.produce(_compressed(build_batch([(b"k4", b"v")]), codec))
            assert keyed_compressed.error is Err.NONE

    asyncio.run(main())
    assert part.data.log_end_offset == (6 if compacted else 23)
