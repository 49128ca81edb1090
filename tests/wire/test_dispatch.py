"""In-process dispatch: handler crashes, error responses, ApiVersions from the registry."""

from __future__ import annotations

import asyncio
import io
import struct
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from cluster.apis import api_versions, find_coordinator, metadata
from cluster.dispatch import ApiRegistry, CloseConnection, ConnInfo, Dispatcher


class FakeTopology:
    def lowest_metadata_version(self) -> int:
        return 8


class FakeNode:
    def __init__(self) -> None:
        self.registry = ApiRegistry()
        self.topology = FakeTopology()


def frame(api_key: int, version: int, body: Any, corr: int = 7) -> bytes:
    cls = load_request_schema(api_key, version)
    buf = io.BytesIO()
    buf.write(struct.pack(">hhi", api_key, version, corr) + struct.pack(">h", 3) + b"cid")
    if cls.__flexible__:
        buf.write(b"\0")
    entity_writer(cls)(buf, body)
    return buf.getvalue()


def decode(api_key: int, version: int, data: bytes) -> Any:
    (size, corr) = struct.unpack_from(">ii", data, 0)
    assert size == len(data) - 4 and corr == 7
    cls = load_response_schema(api_key, version)
    pos = 8 + (1 if cls.__flexible__ and api_key != 18 else 0)
    obj, n = entity_reader(cls)(data, pos)
    assert pos + n == len(data)
    return obj


CONN = ConnInfo("127.0.0.1", 5555, 1)


def test_handler_crash_gives_unknown_server_error_or_close() -> None:
    node = FakeNode()
    seen: dict[str, Any] = {}

    async def boom(ctx: Any, request: Any) -> Any:
        seen["host"] = ctx.client_host
        seen["client_id"] = ctx.client_id
        raise RuntimeError("kaboom")

    node.registry.register(10, 0, 6, boom, error_response=lambda req, code: find_coordinator.build(None, req,
                                                                                                  error=code))
    node.registry.register(3, 0, 12, boom)  # no error responder → close
    d = Dispatcher(node.registry, node)
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

    out = asyncio.run(d.handle(frame(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=("a", "b"))), CONN))
    resp = decode(10, 4, out)
    assert [c.error_code for c in resp.coordinators] == [ErrorCode.unknown_server_error] * 2
    assert seen == {"host": "/127.0.0.1", "client_id": "cid"}
    from kio.schema.metadata.v12.request import MetadataRequest

    with pytest.raises(CloseConnection):
        asyncio.run(d.handle(frame(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                           include_topic_authorized_operations=False)), CONN))


def test_api_versions_advertises_exactly_the_registry() -> None:
    node = FakeNode()
    api_versions.register(node)
    metadata.register(node)
    d = Dispatcher(node.registry, node)
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    out = asyncio.run(d.handle(frame(18, 3, ApiVersionsRequest(client_software_name="x",
                                                                client_software_version="1.0")), CONN))
    resp = decode(18, 3, out)
    assert resp.error_code == ErrorCode.none
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(3, 0, 13), (18, 0, 4), (60, 0, 2)]
    bad = asyncio.run(d.handle(frame(18, 3, ApiVersionsRequest(client_software_name="-bad-",
                                                                client_software_version="1.0")), CONN))
    assert decode(18, 3, bad).error_code == ErrorCode.invalid_request


def test_register_rejects_versions_without_schema() -> None:
    reg = ApiRegistry()

    async def h(ctx: Any, req: Any) -> Any:
        return None

    with pytest.raises(ValueError):
        reg.register(0, 0, 9, h)  # Produce v0–2 have no kio schema: use advertised_min instead
    reg.register(0, 3, 9, h, advertised_min=0)
    assert reg.advertised() == [(0, 0, 9)]


def test_register_takes_a_handler_or_a_raw_handler() -> None:
    reg = ApiRegistry()

    async def h(ctx: Any, req: Any) -> Any:
        return None

    async def raw(ctx: Any, header: Any, frame: bytes) -> Any:
        return None

    with pytest.raises(ValueError):
        reg.register(12, 0, 4, None)
    with pytest.raises(ValueError):
        reg.register(12, 0, 4, h, raw=raw)
    reg.register(12, 0, 4, None, raw=raw)
    spec = reg.get(12)
    assert spec is not None and spec.handler is None and spec.raw is raw
