"""Sending a snapshot to a lagging follower in bounded pieces, paced by the link.

pysyncobj sends a snapshot by reading its dump file in chunks, as fast as one pass allows, and the
follower writes them to a file it then loads whole. For a state machine whose state lives in files
of its own (a data partition: ``StreamedState``), that would send the whole partition through one
in-memory blob. ``StreamingSerializer`` wraps pysyncobj's serializer: for such a state machine the
leader asks it for the stream's next piece (read from disk), at most ``PASS_BYTES`` per follower per
pass and none while ``BACKLOG_BYTES`` still wait on the link to it; the follower hands each piece to
the state machine and, at the end, writes the leader's dump (which then loads as any snapshot).
Other state machines keep pysyncobj's own transfer.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import msgpack

from replication.durable import renamed, sync
from replication.failstop import fail_stop
from replication.raft.settings import SNAPSHOT_VERSION

log = logging.getLogger("kcoord.raft")

PASS_BYTES = 4 << 20  # per follower per pass (appendEntriesPeriod): ~80 MB/s at 50 ms
BACKLOG_BYTES = 16 << 20  # unsent bytes to a follower past which no piece is read
WARN_EVERY_S = 60.0
NOT_READY = b""  # ``StreamedState.stream_next``: the next piece is still being read (ask next pass)



def newer_snapshot(blob: Any) -> str | None:
    """Why a snapshot blob cannot be read by this build (a later version), or None."""
    version = blob.get("v", 0) if isinstance(blob, dict) else 0
    if isinstance(version, int) and version <= SNAPSHOT_VERSION:
        return None
    return (f"a snapshot of version {version!r}; this build reads up to {SNAPSHOT_VERSION}: written by a newer "
            "release (downgrades are not supported)")

class InstallError(Exception):
    """A stream is not what it must be (a gap, a bad batch, a short copy, a deleted file): start again."""


@dataclass
class StreamCursor:
    """The leader's place in one follower's stream: None before it began."""

    base: int | None = None
    pos: int = 0
    sid: int = 0  # the stream's id: a follower that refuses a piece names it, and it starts over
    ahead: Any = None  # the state machine's reads for this stream, done ahead of it
    started: bool = False  # its first piece was handed out (that one tells the follower to begin)
    generation: int | None = None  # the segment being sent, as compaction had left it when its sending began


@runtime_checkable
class StreamedState(Protocol):
    """A state machine whose snapshot names files that are sent piece by piece."""

    def stream_next(self, snapshot: bytes, cursor: StreamCursor) -> bytes | None:
        """The next piece, ``NOT_READY`` while it is read (off the loop), None once all is sent."""

    def install(self, message: bytes) -> None: ...

    def install_end(self, snapshot: bytes) -> None: ...

    def install_abort(self) -> None: ...


class StreamingSerializer:
    """pysyncobj's ``Serializer`` with the transfer of a ``StreamedState``'s snapshot replaced."""

    def __init__(self, inner: Any, path: str, sm: Any, snapshot_last: Callable[[], tuple[int, int]],
                 backlog: Callable[[Any], int], name: Callable[[], str],
                 behind: Callable[[Any], bool] = lambda node: True) -> None:
        self._inner = inner
        self._path = path  # the dump file (fullDumpFile)
        self._sm = sm if isinstance(sm, StreamedState) else None
        self._snapshot_last = snapshot_last  # (index, term) of the journal's snapshot entry
        self._backlog = backlog  # bytes queued on the link to a node
        self._name = name
        self._behind = behind  # whether a node needs the snapshot (its next entry is compacted away)
        self._cursors: dict[Any, StreamCursor] = {}
        self._sent: dict[Any, int] = {}  # bytes handed out this pass, per node
        self._dump: tuple[float, int, bytes, Any] | None = None  # (mtime, size, bytes, decoded) cache
        self.paused: set[Any] = set()  # nodes that get nothing more this pass (see ``pace``)
        self._next_sid = random.getrandbits(30)  # the leader's last stream id (distinct from another leader's)
        self.accepted = False  # the last piece received was taken (the follower then answers it)
        self._sid = -1  # the stream this follower installs
        self._refused = -1  # the last stream it refused
        self.refusal: int | None = None  # a stream to tell its leader about (``take_refusal``)
        self._connected: set[Any] = set()
        self._warned_at = -WARN_EVERY_S

    def __getattr__(self, name: str) -> Any:  # checkSerializing, serialize, deserialize
        return getattr(self._inner, name)

    # ---------------------------------------------------------------- the leader's side

    def pace(self, connected: set[Any]) -> None:
        """At the start of a pass, given pysyncobj's set of connected nodes: a node being streamed
        to whose link is still full gets nothing this pass, and one that got its share gets no
        more. Such a node leaves ``connected`` until ``resume`` (pysyncobj's sending loop stops for
        a node that is not connected, which nothing else makes it do but time)."""
        self._sent.clear()
        self._connected = connected
        self.paused = set()
        for node in list(self._cursors):
            if not self._behind(node):  # caught up otherwise (another leader's snapshot, entries)
                del self._cursors[node]
            elif node in connected and self._backlog(node) >= BACKLOG_BYTES:
                self._pause(node)

    def resume(self) -> None:
        """After the pass: the nodes paused in it are connected again."""
        self._connected |= self.paused
        self.paused = set()

    def _pause(self, node: Any) -> None:
        self.paused.add(node)
        self._connected.discard(node)

    def getTransmissionData(self, node: Any) -> Any:  # noqa: N802 - pysyncobj's interface
        if self._sm is None:
            return self._inner.getTransmissionData(node)
        dump = self._read_dump()
        if dump is None or self._backlog(node) >= BACKLOG_BYTES:  # (other groups' pieces count too)
            self._pause(node)
            return None
        raw, blob = dump
        cursor = self._cursors.get(node)
        if cursor is None:
            self._next_sid += 1
            cursor = self._cursors[node] = StreamCursor(sid=self._next_sid)
        try:
            piece = self._sm.stream_next(blob["state"], cursor)
        except InstallError as e:
            self._warn("event=snapshot_stream_restarted group=%s node=%s why=%r", self._name(), getattr(node, "id", node),
                       str(e))
            self._cursors.pop(node, None)
            self._pause(node)
            return None
        if piece == NOT_READY:  # still being read from disk: next pass
            self._pause(node)
            return None
        if piece is None:  # every byte the snapshot names is sent: its dump ends the stream
            if tuple(blob["last"][1:3]) != self._snapshot_last():
                self._pause(node)  # a snapshot written but not yet taken by the journal: next pass
                return None
            del self._cursors[node]
            return raw, (cursor.sid, False), True
        first, cursor.started = not cursor.started, True
        self._sent[node] = self._sent.get(node, 0) + len(piece)
        if self._sent[node] >= PASS_BYTES:
            self._pause(node)
        return piece, (cursor.sid, first), False  # (pysyncobj reads only the last item)

    def sent(self, node: Any, delivered: bool) -> None:
        """A piece was queued (or not: the link was gone or full; the stream starts over, in a
        later pass)."""
        if not delivered and self._cursors.pop(node, None) is not None:
            self._pause(node)
            log.info("event=snapshot_stream_restarted group=%s node=%s why='a piece was not sent'", self._name(),
                     getattr(node, "id", node))

    def refused(self, node: Any, sid: int) -> None:
        """The follower refused a piece of stream ``sid`` (it missed the beginning, or a piece did
        not check): if that stream is still being sent, it starts over."""
        cursor = self._cursors.get(node)
        if cursor is not None and cursor.sid == sid:
            del self._cursors[node]
            log.info("event=snapshot_stream_restarted group=%s node=%s why='the follower refused a piece'",
                     self._name(), getattr(node, "id", node))

    def cancelTransmisstion(self, node: Any) -> None:  # noqa: N802 - pysyncobj's (misspelt) interface
        if self._sm is None:
            self._inner.cancelTransmisstion(node)
        elif node not in self.paused:  # a node this pass hides is still connected
            self._cursors.pop(node, None)

    def _read_dump(self) -> tuple[bytes, Any] | None:
        try:
            st = os.stat(self._path)
            if self._dump is None or self._dump[:2] != (st.st_mtime, st.st_size):
                with open(self._path, "rb") as f:
                    raw = f.read()
                self._dump = (st.st_mtime, st.st_size, raw, msgpack.unpackb(raw, raw=False))
        except (OSError, ValueError) as e:
            self._warn("event=snapshot_stream_failed group=%s why=%r", self._name(), f"{type(e).__name__}: {e}")
            return None
        return self._dump[2], self._dump[3]

    def _warn(self, fmt: str, *args: Any) -> None:
        """A warning that a stream cannot go on, once a minute at most (it is retried every pass)."""
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY_S:
            self._warned_at = now
            log.warning(fmt, *args)

    # ---------------------------------------------------------------- the follower's side

    def setTransmissionData(self, data: Any) -> bool:  # noqa: N802 - pysyncobj's interface
        if self._sm is None:
            return bool(self._inner.setTransmissionData(data))
        if not isinstance(data, (tuple, list)) or len(data) != 3 or not isinstance(data[0], bytes) \
                or not isinstance(data[1], (tuple, list)) or len(data[1]) != 2:
            return False
        piece, (sid, first), last = data
        self.accepted = False
        try:
            if sid != self._sid and not first:
                raise InstallError(f"a piece of stream {sid}, not of the one followed ({self._sid})")
            self._sid = sid
            if not last:
                self._sm.install(piece)
                self.accepted = True
                return False
            blob = msgpack.unpackb(piece, raw=False)
            newer = newer_snapshot(blob)
            if newer is not None:
                raise InstallError(newer)
            self._sm.install_end(blob["state"])
        except Exception as e:  # noqa: BLE001 - whatever a piece holds, refuse it (never raise into pysyncobj)
            if sid != self._refused:  # once per stream: its leader starts over
                self._refused = self.refusal = sid
                log.warning("event=snapshot_install_refused group=%s stream=%s why=%r", self._name(), sid,
                            f"{type(e).__name__}: {e}")
            self._sm.install_abort()
            self._sid = -1
            return False
        self._write_dump(piece)
        log.info("event=snapshot_installed group=%s", self._name())
        return True

    def take_refusal(self) -> int | None:
        sid, self.refusal = self.refusal, None
        return sid

    def _write_dump(self, raw: bytes) -> None:
        tmp = self._path + ".1.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(raw)
                f.flush()
                sync(f.fileno())
            os.replace(tmp, self._path)
            renamed(tmp, self._path)
        except OSError as e:
            fail_stop("snapshot", f"{self._path}: write failed: {type(e).__name__}: {e}")
