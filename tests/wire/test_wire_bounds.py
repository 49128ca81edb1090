"""Array counts and lengths are bounded by the frame before kio reads a body.

kio's native reader sizes an array from its count before reading it: a 20-byte Metadata
request claiming 0xFFFFFFFF topics made a node allocate 34 GB and die. These tests take a
valid encoding of every request schema kio knows (every served API and version among them),
write a huge or negative count/length at every byte offset (so at the start of every field),
cut it at every offset, and check that what ``check_body`` lets through kio reads without
a huge allocation. The decoding runs in a child process whose address space is capped at
2 GiB: an allocation like the one that killed the node kills the child, and the test names
the case.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap

import pytest

from cluster.wire_bounds import BoundsError, check_body
from tests.wire.examples import encode, example, request_schemas

HUGE = (b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff\x0f", b"\xff\xfe")


def mutations(body: bytes) -> list[bytes]:
    out = []
    for i in range(len(body) + 1):
        out.append(body[:i])
        for junk in HUGE:
            out.append(body[:i] + junk + body[i + len(junk):])  # overwrite the field at i
            out.append(body[:i] + junk + body[i + 1:])  # a one-byte field (varint) grows
    return out


def test_valid_requests_pass_and_round_trip() -> None:
    from kio.serial import entity_reader

    schemas = request_schemas()
    assert len(schemas) > 250  # every API and version kio knows
    for key, version, schema in schemas:
        body = encode(example(schema))
        check_body(schema, body, 0)
        _, size = entity_reader(schema)(body, 0)
        assert size == len(body), (key, version)


def test_the_20_byte_metadata_frame_is_rejected() -> None:
    from kio.index import load_request_schema

    schema = load_request_schema(3, 12)
    body = b"\x00\xff\xff\xff\xff\x0f"  # topics: compact array claiming 0xFFFFFFFE entries
    with pytest.raises(BoundsError, match="cannot fit"):
        check_body(schema, body, 0)
    legacy = load_request_schema(3, 1)
    with pytest.raises(BoundsError, match="cannot fit"):
        check_body(legacy, struct.pack(">i", 0x7FFFFFFF), 0)


_CHILD = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    from kio.serial import entity_reader
    from cluster.wire_bounds import BoundsError, check_body
    from tests.wire.examples import encode, example, request_schemas
    from tests.wire.test_wire_bounds import mutations
    cases = passed = 0
    for key, version, schema in request_schemas():
        read = entity_reader(schema)
        for body in mutations(encode(example(schema))):
            cases += 1
            try:
                check_body(schema, body, 0)
            except BoundsError:
                continue
            passed += 1
            print(f"case api_key={key} v{version} body={body.hex()}", file=sys.stderr, flush=True)
            try:
                read(body, 0)
            except Exception:
                pass
    print(cases, passed)
""")


def test_huge_counts_and_lengths_at_every_offset_never_reach_a_huge_allocation() -> None:
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=240)
    last_case = proc.stderr.strip().splitlines()[-1:] if proc.returncode else []
    assert proc.returncode == 0, f"kio died decoding a body check_body let through: {last_case} {proc.stderr[-2000:]}"
    cases, passed = map(int, proc.stdout.split())
    assert cases > 100_000
    assert passed < cases  # most mutations are rejected before kio


def test_array_items_per_request_are_capped() -> None:
    from kio.index import load_request_schema

    schema = load_request_schema(3, 1)
    n = 1_000_000  # a 3 MB Metadata request naming a million topics
    body = struct.pack(">i", n) + (struct.pack(">h", 1) + b"x") * n
    check_body(schema, body, 0)  # fits its frame ...
    with pytest.raises(BoundsError, match="request_max_array_items"):
        check_body(schema, body, 0, max_items=50_000)  # ... but costs too much loop time to answer


def test_nulls_only_where_the_schema_allows_them() -> None:
    """kio reads a null (-1 / compact 0) into any string or array field; a handler then fails on
    a None the schema never allows (the fuzzer found 'NoneType' object is not iterable in eleven
    APIs). Nulls in nullable fields pass, nulls elsewhere are refused before kio reads them."""
    import dataclasses

    from kio.index import load_request_schema
    from kio.serial._introspect import get_field_tag, is_optional

    for _key, _version, schema in request_schemas():
        obj = example(schema)
        nulled = dataclasses.replace(obj, **{f.name: None for f in dataclasses.fields(schema)
                                             if is_optional(f) and get_field_tag(f) is None})
        check_body(schema, encode(nulled), 0)  # every nullable field null: accepted
    metadata_v1 = load_request_schema(3, 1)
    check_body(metadata_v1, struct.pack(">i", -1), 0)  # null = all topics
    join_v5 = load_request_schema(11, 5)
    body = encode(example(join_v5))
    with pytest.raises(BoundsError, match="null array"):
        check_body(join_v5, encode(dataclasses.replace(example(join_v5), protocols=None)), 0)
    group_null = struct.pack(">h", -1) + body[2 + 2:]  # group id "ab" -> null
    with pytest.raises(BoundsError, match="null string"):
        check_body(join_v5, group_null, 0)
