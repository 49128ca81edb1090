"""What one step of a shard produces: the records to append, the completions to release,
and the timers it arms, at the one ``now`` the step runs at.

Every handler writes through the same ``WriteContext``; the shard opens it at the start of
a request or a timer (``begin``) and takes the step's ``Result`` at the end (``take``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import commands as c
from .group import Token
from .records import Record
from .timers import Timer, TimerKind, TimerSet


@dataclass(slots=True)
class Result:
    records: list[Record] = field(default_factory=list)
    completions: list[tuple[Token, c.Response]] = field(default_factory=list)


class WriteContext:
    def __init__(self, timers: TimerSet) -> None:
        self.timers = timers
        self.now = 0
        self._out = Result()
        # What an operator should read in the log (a rebalance and its reason, a member expired):
        # (event, fields); kept across steps until the runtime takes them.
        self.notes: list[tuple[str, tuple[tuple[str, object], ...]]] = []

    def begin(self, now_ms: int) -> None:
        self._out = Result()
        self.now = now_ms

    def take(self) -> Result:
        out, self._out = self._out, Result()
        return out

    @property
    def records(self) -> list[Record]:
        """The records written so far in this step."""
        return self._out.records

    def respond(self, token: Token, response: c.Response) -> None:
        self._out.completions.append((token, response))

    def note(self, event: str, **fields: object) -> None:
        self.notes.append((event, tuple(fields.items())))

    def take_notes(self) -> list[tuple[str, tuple[tuple[str, object], ...]]]:
        notes, self.notes = self.notes, []
        return notes

    def write(self, record: Record) -> None:
        self._out.records.append(record)

    def schedule(self, key: str, delay_ms: int, kind: TimerKind, group_id: str = "",
                 member_id: str = "", args: tuple[int, ...] = ()) -> None:
        self.timers.schedule(Timer(key, self.now + delay_ms, kind, group_id, member_id, args))
