"""Timers as data: a key, a deadline and what to do, owned by a shard.

Scheduling an existing key replaces it; a replaced or cancelled timer never fires.
The runtime asks for the next deadline and fires what is due; nothing here sleeps.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from enum import Enum


class TimerKind(Enum):
    HEARTBEAT = "heartbeat"
    JOIN = "join"
    INITIAL_JOIN = "initial-join"
    SYNC = "sync"
    EXPIRE_OFFSETS = "expire-group-metadata"
    CONSUMER_SESSION = "session-timeout"  # a consumer group member stopped heartbeating
    CONSUMER_REBALANCE = "rebalance-timeout"  # it did not revoke in time; args: its epoch then
    CONSUMER_CLASSIC_JOIN = "classic-join"  # a classic member told to rejoin a consumer group did not
    SHARE_SESSION = "share-session-timeout"  # a share group member stopped heartbeating


@dataclass(frozen=True, slots=True)
class Timer:
    key: str
    deadline_ms: int
    kind: TimerKind
    group_id: str = ""
    member_id: str = ""
    args: tuple[int, ...] = ()


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


def session_key(group_id: str, member_id: str) -> str:
    return f"session-timeout-{group_id}-{member_id}"


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"rebalance-timeout-{group_id}-{member_id}"


def classic_join_key(group_id: str, member_id: str) -> str:
    return f"classic-join-{group_id}-{member_id}"


EXPIRE_KEY = "expire-group-metadata"


class TimerSet:
    __slots__ = ("_by_key", "_heap", "_seq")

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[int, Timer]] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def get(self, key: str) -> Timer | None:
        entry = self._by_key.get(key)
        return entry[1] if entry else None

    def schedule(self, timer: Timer) -> None:
        self._seq += 1
        self._by_key[timer.key] = (self._seq, timer)
        heapq.heappush(self._heap, (timer.deadline_ms, self._seq, timer.key))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._by_key):
            self._compact()

    def cancel(self, key: str) -> None:
        self._by_key.pop(key, None)

    def clear(self) -> None:
        self._by_key.clear()
        self._heap.clear()

    def _compact(self) -> None:
        self._heap = [(t.deadline_ms, seq, k) for k, (seq, t) in self._by_key.items()]
        heapq.heapify(self._heap)

    def _skip_stale(self) -> None:
        while self._heap:
            _, seq, key = self._heap[0]
            entry = self._by_key.get(key)
            if entry is not None and entry[0] == seq:
                return
            heapq.heappop(self._heap)

    def next_deadline(self) -> int | None:
        self._skip_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> Timer | None:
        self._skip_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        _, timer = self._by_key.pop(key)
        return timer

    def keys(self) -> list[str]:
        return list(self._by_key)
