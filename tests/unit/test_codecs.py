"""Kafka's record codecs (replication/codecs.py), checked against kafka-python's own decoders and
encoders (python-snappy with its own xerial framing, python-lz4, zstandard): what we write they
read, what they write we read, and inflating stops at its bound."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as reference

from replication import codecs
from replication.codecs import GZIP, LZ4, NONE, SNAPPY, ZSTD

THEIRS = {GZIP: (reference.gzip_encode, reference.gzip_decode),
          SNAPPY: (lambda b: reference.snappy_encode(b, xerial_compatible=True), reference.snappy_decode),
          LZ4: (reference.lz4_encode, reference.lz4_decode), ZSTD: (reference.zstd_encode, reference.zstd_decode)}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(THEIRS)), st.binary(max_size=200_000) | st.builds(lambda n: b"ab" * n,
                                                                                 st.integers(0, 100_000)))
def test_what_we_write_they_read_and_the_other_way(codec: int, plain: bytes) -> None:
    encode, decode = THEIRS[codec]
    assert decode(codecs.deflate(codec, plain)) == plain
    assert codecs.inflate(codec, encode(plain), 1 << 24) == plain


def test_snappy_is_written_in_xerial_framing_and_read_raw_too() -> None:
    plain = os.urandom(100) * 2000  # several xerial blocks
    framed = codecs.deflate(SNAPPY, plain)
    assert framed.startswith(codecs.XERIAL_MAGIC)
    assert codecs.inflate(SNAPPY, reference.snappy_encode(plain, xerial_compatible=False), 1 << 24) == plain


def test_lz4_frames_have_flags_kafkas_reader_takes() -> None:
    frame = codecs.deflate(LZ4, b"x" * 100_000)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flg = frame[4]  # version 1, independent blocks; no content size, content checksum or dictionary
    assert flg >> 6 == 1 and flg & 0x20 and not flg & 0x0D, hex(flg)  # block checksums: Kafka verifies them


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_inflating_stops_at_its_bound_and_damage_reads_as_none(codec: int) -> None:
    bomb = codecs.deflate(codec, bytes(8 << 20))  # 8 MiB of zeros: a few KiB compressed
    assert len(bomb) < 400_000
    assert codecs.inflate(codec, bomb, 1 << 20) is None
    assert codecs.inflate(codec, bomb, 8 << 20) == bytes(8 << 20)
    assert codecs.inflate(codec, b"\x00\x01garbage" * 20, 1 << 20) is None
    assert codecs.inflate(codec, codecs.deflate(codec, b"abc" * 1000)[:-3], 1 << 20) is None  # cut short


def test_no_codec_is_the_bytes_themselves_and_an_unknown_one_reads_as_none() -> None:
    assert codecs.inflate(NONE, b"abc", 10) == b"abc" and codecs.deflate(NONE, b"abc") == b"abc"
    assert codecs.inflate(5, b"abc", 10) is None
    with pytest.raises(ValueError):
        codecs.deflate(7, b"abc")
