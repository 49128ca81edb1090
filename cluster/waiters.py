"""Requests waiting for a sans-IO runtime's answer: a token per request, resolved by a
``Respond`` effect (both coordinator drivers)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Waiters(Generic[T]):
    def __init__(self) -> None:
        self._futures: dict[object, asyncio.Future[T]] = {}

    async def wait(self, submit: Callable[[object], None]) -> T:
        """``submit(token)`` hands the request to the runtime; the answer for ``token``."""
        token = object()
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._futures[token] = fut
        try:
            submit(token)
            return await fut
        finally:
            self._futures.pop(token, None)

    def resolve(self, token: object, value: T) -> None:
        fut = self._futures.pop(token, None)
        if fut is not None and not fut.done():
            fut.set_result(value)
