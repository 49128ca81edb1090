"""A share partition: one group's view of one topic-partition on the partition's leader (Kafka's
SharePartition), as a pure state machine. Records are acquired by one member at a time under a
lock, then acknowledged (ACCEPT), released (RELEASE: delivered again), rejected (REJECT) or let go
when the lock expires; a record delivered ``delivery_limit`` times is archived instead of being
made available again. The start offset (SPSO) is the first offset not yet acknowledged or
archived; at most ``max_record_locks`` offsets from it are in flight.

Every change but an acquisition is to be persisted (the group coordinator keeps the share state)
before it is answered: the caller takes a ``snapshot`` before its changes (one for several) and
``rollback``s to it should that write fail; ``state_batches`` gives what to write. Time comes in
as ``now_ms``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from coordinator.errors import ErrorCode

from .records import StateBatch

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
ACK_TYPES = frozenset({GAP, ACCEPT, RELEASE, REJECT, RENEW})


@dataclass(slots=True)
class InFlight:
    state: int
    delivery_count: int
    member: str | None = None
    deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class Undo:
    """The whole partition as it was (a change moves the start over records it then forgets, so
    only a whole copy can put it back; at most ``max_record_locks`` entries)."""

    start: int
    end: int
    entries: dict[int, InFlight]


@dataclass(frozen=True, slots=True)
class Acquired:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass
class SharePartition:
    start: int  # SPSO
    end: int  # the next offset never acquired (SPEO + 1)
    lock_ms: int = 30_000
    delivery_limit: int = 5
    max_record_locks: int = 2000
    records: dict[int, InFlight] = field(default_factory=dict)

    @classmethod
    def loaded(cls, start: int, batches: Iterable[StateBatch], lock_ms: int = 30_000, delivery_limit: int = 5,
               max_record_locks: int = 2000) -> SharePartition:
        """From the persisted state (its start offset already chosen, -1 resolved by the caller)."""
        sp = cls(start, start, lock_ms, delivery_limit, max_record_locks)
        for b in batches:
            for o in range(max(b.first_offset, start), b.last_offset + 1):
                sp.records[o] = InFlight(b.delivery_state if b.delivery_state != ACQUIRED else AVAILABLE,
                                         b.delivery_count)
                sp.end = max(sp.end, o + 1)
        for o in range(start, sp.end):
            # not persisted: acquired by the last leader and never acknowledged (its lock did not
            # outlive it), or never fetched at all: available, as Kafka's initial read gap is
            sp.records.setdefault(o, InFlight(AVAILABLE, 0))
        sp._advance()
        return sp

    # ------------------------------------------------------------------ reading

    def fetch_from(self) -> int:
        """Where the next fetch reads the log: the first record available again, else the end."""
        again = [o for o, r in self.records.items() if r.state == AVAILABLE]
        return min(again) if again else self.end

    def room(self) -> int:
        """How many offsets past the end may still be acquired."""
        return max(self.max_record_locks - (self.end - self.start), 0)

    def done_count(self) -> int:
        """Offsets from the start on whose delivery is complete (acknowledged or archived): Kafka's
        DeliveryCompleteCount, which the group's offsets describe subtracts from the lag."""
        return sum(1 for r in self.records.values() if r.state in (ACKNOWLEDGED, ARCHIVED))

    def next_deadline(self) -> int | None:
        locks = [r.deadline_ms for r in self.records.values() if r.state == ACQUIRED]
        return min(locks) if locks else None

    def acquired_by(self, member: str) -> list[int]:
        return sorted(o for o, r in self.records.items() if r.state == ACQUIRED and r.member == member)

    # ------------------------------------------------------------------ changes

    def snapshot(self) -> Undo:
        return Undo(self.start, self.end, {o: InFlight(r.state, r.delivery_count, r.member, r.deadline_ms)
                                           for o, r in self.records.items()})

    def rollback(self, undo: Undo) -> None:
        """Back to ``undo``: the caller holds the partition for the whole change and its write, so
        nothing else happened in between."""
        self.records = {o: InFlight(r.state, r.delivery_count, r.member, r.deadline_ms)
                        for o, r in undo.entries.items()}
        self.start, self.end = undo.start, undo.end

    def acquire(self, member: str, present: Sequence[int], upto: int, max_records: int, now_ms: int,
                first: int | None = None) -> list[Acquired]:
        """Acquire for ``member`` what the fetched log data holds: ``present`` its deliverable
        offsets in order, ``first``..``upto`` the offsets it covers. An offset covered but not
        present (compacted away, a transaction marker) can never be delivered: archived. In
        memory only."""
        got: list[tuple[int, int]] = []
        prev = (first if first is not None else (present[0] if present else upto + 1)) - 1
        stopped = False
        for o in present:
            if len(got) >= max_records or not self._gaps(prev + 1, o):
                stopped = True
                break
            prev = o
            if o < self.start:
                continue
            r = self.records.get(o)
            if r is None:
                if o < self.end:
                    continue  # acknowledged or archived
                if o - self.start >= self.max_record_locks:
                    stopped = True
                    break
                r = self.records[o] = InFlight(AVAILABLE, 0)
                self.end = o + 1
            if r.state != AVAILABLE:
                continue
            r.state, r.member, r.deadline_ms = ACQUIRED, member, now_ms + self.lock_ms
            r.delivery_count += 1
            got.append((o, r.delivery_count))
        if not stopped:
            self._gaps(prev + 1, upto + 1)
        self._advance()
        out: list[Acquired] = []
        for o, n in got:
            last = out[-1] if out else None
            if last is not None and last.last_offset + 1 == o and last.delivery_count == n:
                out[-1] = Acquired(last.first_offset, o, n)
            else:
                out.append(Acquired(o, o, n))
        return out

    def _gaps(self, first: int, stop: int) -> bool:
        """Archive the offsets first..stop-1, which hold no deliverable record: those available
        (a new leader knows them only as not written) and those past the end. False when the
        window cannot take them all."""
        for o in range(max(first, self.start), stop):
            r = self.records.get(o)
            if r is None:
                if o < self.end:
                    continue
                if o - self.start >= self.max_record_locks:
                    return False
                self.records[o] = InFlight(ARCHIVED, 0)
                self.end = o + 1
            elif r.state == AVAILABLE:
                r.state = ARCHIVED
        return True

    def below_log_start(self, log_start: int) -> bool:
        """The log no longer holds offsets below ``log_start`` (retention, DeleteRecords): what
        is available there is archived and the start moves on (Kafka's
        archiveAvailableRecordsOnLsoMovement). Whether anything changed."""
        if self.start >= log_start:
            return False
        for o in range(self.start, min(log_start, self.end)):
            r = self.records.get(o)
            if r is not None and r.state == AVAILABLE:
                r.state = ARCHIVED
        self._advance()
        if self.start >= self.end and self.end < log_start:
            self.start = self.end = log_start
        return True

    def acknowledge(self, member: str, first: int, last: int, types: Sequence[int],
                    now_ms: int) -> tuple[ErrorCode, list[int]]:
        """A member's acknowledgement of first..last (one type for all, or one per offset): every
        offset must be acquired by it, else INVALID_RECORD_STATE and nothing changes."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1) \
                or any(t not in ACK_TYPES for t in types):
            return ErrorCode.INVALID_REQUEST, []
        offsets = range(first, last + 1)
        for o in offsets:
            r = self.records.get(o)
            if r is None or r.state != ACQUIRED or r.member != member:
                return ErrorCode.INVALID_RECORD_STATE, []
        changed: list[int] = []
        for i, o in enumerate(offsets):
            t = types[0] if len(types) == 1 else types[i]
            r = self.records[o]
            if t == RENEW:
                r.deadline_ms = now_ms + self.lock_ms
                continue
            if t == ACCEPT:
                r.state = ACKNOWLEDGED
            elif t == RELEASE:
                r.state = self._released_state(r)
            else:  # REJECT, GAP
                r.state = ARCHIVED
            r.member = None
            changed.append(o)
        self._advance()
        return ErrorCode.NONE, changed

    def _released_state(self, r: InFlight) -> int:
        return ARCHIVED if r.delivery_count >= self.delivery_limit else AVAILABLE

    def release(self, offsets: Iterable[int]) -> list[int]:
        """Give back acquired offsets (their lock expired, or their member left)."""
        offsets = [o for o in offsets if (r := self.records.get(o)) is not None and r.state == ACQUIRED]
        for o in offsets:
            r = self.records[o]
            r.state, r.member = self._released_state(r), None
        self._advance()
        return offsets

    def expired(self, now_ms: int) -> list[int]:
        return sorted(o for o, r in self.records.items() if r.state == ACQUIRED and r.deadline_ms <= now_ms)

    def _advance(self) -> None:
        while (r := self.records.get(self.start)) is not None and r.state in (ACKNOWLEDGED, ARCHIVED):
            del self.records[self.start]
            self.start += 1
        if self.start > self.end:
            self.end = self.start

    # ------------------------------------------------------------------ persisting

    def state_batches(self, offsets: Iterable[int]) -> tuple[StateBatch, ...]:
        """What to persist of ``offsets`` (acquired ones as available: a lock does not outlive its
        leader), as batches; offsets below the start are implied by it."""
        out: list[StateBatch] = []
        for o in sorted(set(offsets)):
            if o < self.start:
                continue
            r = self.records.get(o)
            if r is None:
                continue
            state = AVAILABLE if r.state == ACQUIRED else r.state
            prev = out[-1] if out else None
            if prev is not None and prev.last_offset + 1 == o and (prev.delivery_state, prev.delivery_count) == (
                    state, r.delivery_count):
                out[-1] = StateBatch(prev.first_offset, o, state, r.delivery_count)
            else:
                out.append(StateBatch(o, o, state, r.delivery_count))
        return tuple(out)
