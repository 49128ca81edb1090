"""Size-prefixed frames (int32 big-endian length, then that many bytes), bounded."""

from __future__ import annotations

import asyncio
import struct

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The peer sent something that is not a valid frame; close the connection."""


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """Read one frame. ``None`` on a clean EOF between frames; ``FrameError`` otherwise."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise FrameError(f"truncated size prefix ({len(e.partial)} of 4 bytes)") from None
    (size,) = _SIZE.unpack(head)
    if size < 0:
        raise FrameError(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameError(f"frame size {size} larger than socket.request.max.bytes={max_bytes}")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as e:
        raise FrameError(f"truncated frame: got {len(e.partial)} of {size} bytes") from None


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
