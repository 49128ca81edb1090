"""The record codecs of Kafka's batches, for the few places that must read or write a batch's
records (the log cleaner, the keyless-record check of compacted topics): gzip (zlib), snappy,
lz4 and zstd (cramjam), each in the framing Kafka's clients write and read.

- snappy: Kafka's Java client writes xerial's framing (a magic header, then blocks of raw snappy,
  each after its length); librdkafka writes one raw block and reads both. Both are read; xerial's
  is written, which every client reads.
- lz4: the LZ4 frame format, with independent blocks and no content checksum as Kafka writes it
  (each block with its checksum, which Kafka's reader verifies).
- zstd: zstd frames.

Inflating is bounded: past ``max_plain`` bytes it stops and answers None (a small batch can
claim gigabytes), as it does for damaged data.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # the framing's version, and the oldest it needs
XERIAL_BLOCK = 32 * 1024  # xerial's default block
_FIRST_GUESS = 4  # inflated size guessed at first, as a multiple of the compressed (doubled if short)


def inflate(codec: int, data: bytes | memoryview, max_plain: int) -> bytes | None:
    """``data`` decompressed with ``codec``; None if damaged, of an unknown codec, or past ``max_plain``."""
    try:
        if codec == NONE:
            return bytes(data) if len(data) <= max_plain else None
        if codec == GZIP:
            inflater = zlib.decompressobj(wbits=47)
            plain = inflater.decompress(data, max_plain)
            return None if inflater.unconsumed_tail or not inflater.eof else plain
        if codec == SNAPPY:
            return _snappy(bytes(data), max_plain)
        if codec in (LZ4, ZSTD):
            return _bounded(cramjam.lz4 if codec == LZ4 else cramjam.zstd, bytes(data), max_plain)
    except (zlib.error, cramjam.DecompressionError, ValueError, struct.error):
        return None
    return None


def deflate(codec: int, plain: bytes) -> bytes:
    """``plain`` compressed with ``codec``, framed as Kafka's Java client frames it."""
    if codec == NONE:
        return plain
    if codec == GZIP:
        packer = zlib.compressobj(wbits=31)
        return packer.compress(plain) + packer.flush()
    if codec == SNAPPY:
        blocks = [XERIAL_HEADER]
        for at in range(0, max(len(plain), 1), XERIAL_BLOCK):  # one block at least: a reader wants one
            block = bytes(cramjam.snappy.compress_raw(plain[at:at + XERIAL_BLOCK]))
            blocks.append(struct.pack(">i", len(block)) + block)
        return b"".join(blocks)
    if codec == LZ4:
        frame = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        frame.compress(plain)
        return bytes(frame.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(plain))
    raise ValueError(f"unknown compression codec {codec}")


def _snappy(data: bytes, max_plain: int) -> bytes | None:
    if not data.startswith(XERIAL_MAGIC):
        if cramjam.snappy.decompress_raw_len(data) > max_plain:
            return None
        return bytes(cramjam.snappy.decompress_raw(data))
    parts, total, at = [], 0, len(XERIAL_HEADER)
    while at < len(data):
        (length,) = struct.unpack_from(">i", data, at)
        block = data[at + 4:at + 4 + length]
        if length < 0 or len(block) != length:
            return None
        total += cramjam.snappy.decompress_raw_len(block)  # what the block says it holds, checked first
        if total > max_plain:
            return None
        parts.append(bytes(cramjam.snappy.decompress_raw(block)))
        at += 4 + length
    return b"".join(parts)


def _bounded(codec: object, data: bytes, max_plain: int) -> bytes | None:
    """lz4 or zstd into a buffer that doubles until the output fits (or would pass ``max_plain``)."""
    size = min(max(len(data) * _FIRST_GUESS, 1024), max_plain)
    while True:
        out = bytearray(size + 1)  # one byte more: a full buffer means there may be more
        try:
            n = codec.decompress_into(data, out)  # type: ignore[attr-defined]
        except cramjam.DecompressionError as e:
            if "whole buffer" not in str(e):
                raise  # damaged, not short of room
            n = size + 1
        if n <= size:
            return bytes(out[:n])
        if size >= max_plain:
            return None
        size = min(size * 2, max_plain)
