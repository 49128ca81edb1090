"""Helpers shared by the API handlers: version-specific kio classes and conversions."""

from __future__ import annotations

import dataclasses
import datetime
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

ZERO = datetime.timedelta(0)


@cache
def resp_mod(api_key: int, version: int) -> ModuleType:
    """The kio response module of ``api_key`` at ``version`` (nested classes live there)."""
    return load_payload_module(api_key, version, EntityType.response)


@cache
def req_mod(api_key: int, version: int) -> ModuleType:
    """The kio request module of ``api_key`` at ``version`` (for requests a node sends)."""
    return load_payload_module(api_key, version, EntityType.request)


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def mk(cls: type, **kw: Any) -> Any:
    """Build a kio entity, dropping keyword arguments this version does not have."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in kw.items() if k in names})


def has_field(obj_or_cls: Any, name: str) -> bool:
    cls = obj_or_cls if isinstance(obj_or_cls, type) else type(obj_or_cls)
    return name in _field_names(cls)


def to_ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def version_of(request: Any) -> int:
    return int(type(request).__version__)
