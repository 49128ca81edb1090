"""Test helper: a data partition's snapshot streamed from a leader's state machine to a follower's,
as ``replication.raft.snapshot_transfer`` carries it between nodes."""

from __future__ import annotations

from collections.abc import Iterator

from replication.data_install import decode, drain_reads, encode
from replication.data_log import DataLog
from replication.data_state_machine import DataStateMachine
from replication.raft.snapshot_transfer import NOT_READY, StreamCursor


def next_piece(leader: DataStateMachine, snapshot: bytes, cursor: StreamCursor) -> bytes | None:
    """The stream's next piece, waiting for the reader thread when it is still being read."""
    piece = leader.stream_next(snapshot, cursor)
    while piece == NOT_READY:
        drain_reads()
        piece = leader.stream_next(snapshot, cursor)
    return piece


def stream(leader: DataStateMachine, cursor: StreamCursor | None = None) -> Iterator[bytes]:
    """The leader's stream, its snapshot taken now: the pieces, then the snapshot that ends it."""
    cursor = cursor or StreamCursor()
    while True:
        snapshot = leader.snapshot()
        piece = next_piece(leader, snapshot, cursor)
        if piece is None:
            yield encode("end", snapshot)
            return
        yield piece


def install(leader: DataStateMachine, follower: DataStateMachine) -> None:
    for piece in stream(leader):
        kind, *fields = decode(piece)
        if kind == "end":
            follower.install_end(fields[0])
        else:
            follower.install(piece)
    follower.restore(leader.snapshot())


def install_log(source: DataLog, target: DataLog) -> None:
    """``source``'s segments copied into ``target`` as a follower's install receives them."""
    from replication.data_install import SnapshotInstall, next_chunk

    manifest = source.manifest()
    cursor = StreamCursor()
    begin = decode(next_chunk(source, manifest["end"], cursor))  # type: ignore[arg-type]
    install = SnapshotInstall(target, begin[1], begin[2])
    while (message := next_chunk(source, manifest["end"], cursor)) is not None:
        _, base, pos, chunk = decode(message)
        install.feed(base, pos, chunk)
    install.finish(manifest)
