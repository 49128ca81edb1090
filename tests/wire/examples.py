"""Every request schema kio knows, and a valid example of each (chaos.fuzz.requests builds it)."""

from __future__ import annotations

from typing import Any

from kio.index import load_request_schema

from chaos.fuzz.requests import encode_body as encode
from chaos.fuzz.requests import example_entity as example

__all__ = ["encode", "example", "request_schemas"]


def request_schemas(max_key: int = 100, max_version: int = 20) -> list[tuple[int, int, type[Any]]]:
    """Every request schema kio knows: ``(api_key, version, schema)``."""
    out = []
    for key in range(max_key):
        for version in range(max_version):
            try:
                out.append((key, version, load_request_schema(key, version)))
            except Exception:  # noqa: BLE001 - no such key or version
                continue
    return out
