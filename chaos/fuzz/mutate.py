"""Mutations of a request frame, and the other ways a hostile client misbehaves.

A ``Case`` is what one connection does: the bytes it sends (size prefix included, possibly a
lying one), whether it drips them slowly, and whether it half-closes. Mutations: bit flips,
a count/length-sized window set to huge or negative values, truncation, extension, random API
keys and versions, lying frame lengths, zero-length frames and several frames at once.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

HUGE = (b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff\x0f", b"\xff\xfe",
        b"\x7f\xff", b"\x00\x00\x00\x00", b"\xff")


@dataclass(frozen=True, slots=True)
class Case:
    kind: str
    data: bytes
    drip: bool = False  # send a byte at a time
    half_close: bool = False  # shut our side once sent


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _flip(rng: random.Random, b: bytearray, start: int) -> None:
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(start, len(b))
        b[i] ^= 1 << rng.randrange(8)


def mutate(rng: random.Random, request: bytes, body_offset: int) -> Case:
    """One mutation of ``request`` (header + body, no size prefix)."""
    b = bytearray(request)
    kind = rng.choice(("flip", "flip_body", "huge", "huge", "huge", "truncate", "extend", "api_key", "version",
                       "lie_long", "lie_short", "zero", "pair", "valid"))
    if kind == "flip":
        _flip(rng, b, 0)
    elif kind == "flip_body" and len(b) > body_offset:
        _flip(rng, b, body_offset)
    elif kind == "huge":
        junk = rng.choice(HUGE)
        at = rng.randrange(body_offset, len(b) + 1) if len(b) > body_offset else len(b)
        b[at:at + (len(junk) if rng.random() < 0.7 else 1)] = junk
    elif kind == "truncate":
        del b[rng.randrange(0, len(b) + 1):]
    elif kind == "extend":
        b += rng.randbytes(rng.choice((1, 4, 100, 5000)))
    elif kind == "api_key":
        struct.pack_into(">h", b, 0, rng.choice((-1, 999, 32767, rng.randrange(0, 80))))
    elif kind == "version":
        struct.pack_into(">h", b, 2, rng.choice((-1, 99, rng.randrange(0, 20))))
    elif kind == "lie_long":  # the frame claims more than is sent, then the client stops
        return Case(kind, struct.pack(">i", len(b) + rng.randint(1, 1 << 20)) + bytes(b), half_close=True)
    elif kind == "lie_short":  # the frame claims less: the rest is read as the next frame
        return Case(kind, struct.pack(">i", max(0, len(b) - rng.randint(1, 8))) + bytes(b))
    elif kind == "zero":
        return Case(kind, frame(b"") * rng.randint(1, 3))
    elif kind == "pair":
        return Case(kind, frame(bytes(b)) + frame(rng.randbytes(rng.randint(0, 30))))
    return Case(kind, frame(bytes(b)), drip=rng.random() < 0.01)
