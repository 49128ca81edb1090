"""What a node does with data a later release wrote (a downgrade, or an older node of a cluster
half upgraded): it stops with one line that says so, and leaves the data as it found it. Each
of these readers used to take the newer format for damage or for noise: a local log was read as
the first format and rewritten empty, a partition directory was removed, a segment was cut
back as a torn tail, a command or data entry was skipped on this replica alone (its state then
diverges from the upgraded replicas'), and a snapshot that did not load was logged and ignored."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgpack
import pytest

from cluster.incarnation import MARKER, claim_dir
from replication.data_log import DataLog
from replication.failstop import EXIT_CORRUPT
from replication.local import LocalLog
from replication.raft import commands
from replication.record_batch import MAGIC_OFFSET
from tests.conftest import FailStopped
from tests.unit.test_data_log import put


def test_a_local_log_of_a_later_format_is_refused_and_kept(tmp_path: Path, fail_stops: list[Any]) -> None:
    path = tmp_path / "log"
    newer = b"KCL3" + os.urandom(200)
    path.write_bytes(newer)
    with pytest.raises(FailStopped):
        LocalLog(str(path))
    assert fail_stops[0][0] == "local_log" and "newer release" in fail_stops[0][1]
    assert fail_stops[0][2] == EXIT_CORRUPT
    assert path.read_bytes() == newer


def test_an_unknown_incarnation_marker_is_refused_and_the_directory_kept(tmp_path: Path,
                                                                         fail_stops: list[Any]) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    (d / MARKER).write_text("topic-id:5c1e")
    (d / "00000000000000000000.log").write_bytes(b"data")
    with pytest.raises(FailStopped):
        claim_dir(str(d), "slot-4")
    assert fail_stops[0][0] == "incarnation" and "newer release" in fail_stops[0][1]
    assert (d / "00000000000000000000.log").read_bytes() == b"data"
    # What this build writes is still told apart as before: another slot is another incarnation.
    fail_stops.clear()
    (d / MARKER).write_text("slot-3")
    claim_dir(str(d), "slot-4")
    assert not fail_stops and (d / MARKER).read_text() == "slot-4" and not (d / "00000000000000000000.log").exists()


def test_a_segment_batch_of_a_later_magic_is_refused_not_cut_as_a_torn_tail(tmp_path: Path,
                                                                             fail_stops: list[Any]) -> None:
    d = tmp_path / "p"
    log = DataLog(str(d))
    for _ in range(3):
        put(log, 2)
    log.close()
    segment = d / "00000000000000000000.log"
    data = segment.read_bytes()
    third = bytearray(data[2 * len(data) // 3:])  # the last batch (all three are the same size)
    third[MAGIC_OFFSET] = 3  # the CRC covers the batch from its attributes on: it still holds
    segment.write_bytes(data[:2 * len(data) // 3] + bytes(third))
    (d / "clean-shutdown").unlink(missing_ok=True)  # recovery reads the segment to its end
    before = segment.read_bytes()
    with pytest.raises(FailStopped):
        DataLog(str(d))
    assert fail_stops[0][0] == "data_log" and "magic 3" in fail_stops[0][1] and "newer release" in fail_stops[0][1]
    assert segment.read_bytes() == before


def test_a_command_of_a_later_release_is_told_apart_from_a_malformed_one() -> None:
    with pytest.raises(commands.UnknownCommandError, match="command id 9"):
        commands.decode(commands.encode(9, b"x"))
    with pytest.raises(commands.CommandError) as malformed:
        commands.decode(commands.encode(commands.APPEND, "text", b"x"))
    assert not isinstance(malformed.value, commands.UnknownCommandError)


def test_a_committed_command_of_a_later_release_stops_the_replica(fail_stops: list[Any]) -> None:
    from replication.raft.pysyncobj_adapter import _REGULAR, RaftGroup

    group = RaftGroup.__new__(RaftGroup)  # only its apply is exercised
    group.name = "g"
    with pytest.raises(FailStopped):
        group._SyncObj__doApplyCommand(bytes((_REGULAR,)) + commands.encode(9, b"x"))
    assert fail_stops[0][0] == "raft_apply" and "newer release" in fail_stops[0][1]


def test_a_data_entry_of_a_later_kind_stops_the_replica(tmp_path: Path, fail_stops: list[Any]) -> None:
    from replication.data_state_machine import DataStateMachine

    log = DataLog(str(tmp_path / "p"))
    put(log, 2)
    sm = DataStateMachine(log, lambda: None)
    with pytest.raises(FailStopped):
        sm.apply(1, b"\xff\xffKCXX" + bytes(8))
    assert fail_stops[0][0] == "data_apply" and "newer release" in fail_stops[0][1]
    assert log.log_end_offset == 2
    log.close()


def test_a_snapshot_of_a_later_version_is_refused(tmp_path: Path, fail_stops: list[Any]) -> None:
    from replication.raft.membership import History, Members
    from replication.raft.pysyncobj_adapter import make_serializer
    from replication.raft.settings import SNAPSHOT_VERSION

    class Sm:
        restored: list[Any] = []

        def snapshot(self) -> Any:
            return {"base": [], "next": 0}

        def restore(self, state: Any) -> None:
            self.restored.append(state)

    class Group:
        fence = 0
        sm = Sm()
        history = History(Members(frozenset({"a:1", "b:1"})))

    serialize, deserialize = make_serializer(lambda: Group())  # type: ignore[arg-type, return-value]
    path = tmp_path / "dump"
    serialize(str(path), ((5, 1), (4, 1), set()))
    blob = msgpack.unpackb(path.read_bytes(), raw=False)
    assert blob["v"] == SNAPSHOT_VERSION
    assert deserialize(str(path))[0] == (5, 1) and Group.sm.restored == [{"base": [], "next": 0}]
    path.write_bytes(msgpack.packb({**blob, "v": SNAPSHOT_VERSION + 1}))
    with pytest.raises(FailStopped):
        deserialize(str(path))
    assert fail_stops[0][0] == "snapshot" and "newer release" in fail_stops[0][1]
    assert len(Group.sm.restored) == 1
    # the group's configuration it carries, likewise
    assert Members.from_dict(blob["members"]).voters == {"a:1", "b:1"}
    path.write_bytes(msgpack.packb({**blob, "members": {**blob["members"], "v": 2}}))
    with pytest.raises(FailStopped):
        deserialize(str(path))
    assert fail_stops[1][0] == "snapshot" and "newer release" in fail_stops[1][1]


def test_offsets_compaction_keeps_records_of_a_type_it_does_not_know() -> None:
    """A later release's record types (share groups, streams groups ...) in ``__consumer_offsets``:
    this build's loads skip them, and its compaction keeps the latest of each key as it was,
    tombstones included, instead of dropping them for the upgraded nodes that read them."""
    from cluster.offsets_compaction import compact_offsets
    from coordinator.codec import decode_batch, encode_batch
    from coordinator.records import OffsetCommitKey, OffsetCommitValue, Record

    def unknown(name: bytes, value: bytes | None) -> list[Any]:
        return [b"\x00\x63" + name, value]  # record type 99

    commit = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, -1, "", 1000))
    entries = [encode_batch([commit], [unknown(b"a", b"1"), unknown(b"b", b"1")]),
               encode_batch([], [unknown(b"a", b"2"), unknown(b"b", None), unknown(b"c", b"3")])]
    assert decode_batch(entries[1]) == []  # a load skips them
    compacted = compact_offsets(entries)
    kept: list[Any] = []
    records = [r for payload in compacted for r in decode_batch(payload, kept)]
    assert records == [commit]
    assert sorted((bytes(k), v) for k, v in kept) == [(b"\x00\x63a", b"2"), (b"\x00\x63c", b"3")]
    assert compact_offsets(compacted) == compacted  # compacting again changes nothing


def test_unknown_records_written_in_a_transaction_follow_its_marker_through_compaction() -> None:
    from cluster.offsets_compaction import compact_offsets
    from coordinator.codec import decode_batch, encode_batch
    from coordinator.records import Record, TxnMarkerKey, TxnMarkerValue

    def unknown(name: bytes, pid: int) -> list[Any]:
        return [b"\x00\x63" + name, b"v", pid, 0]

    def marker(pid: int, commit: bool) -> bytes:
        return encode_batch([Record(TxnMarkerKey(pid), TxnMarkerValue(commit, 0, 0))])

    entries = [encode_batch([], [unknown(b"a", 7), unknown(b"b", 8), unknown(b"c", 9)]),
               marker(7, True), marker(8, False)]
    kept: list[Any] = []
    assert [r for payload in compact_offsets(entries) for r in decode_batch(payload, kept)] == []
    assert sorted((bytes(k[0]), *k[2:]) for k in kept) == [(b"\x00\x63a",), (b"\x00\x63c", 9, 0)]


def test_an_identity_file_or_a_single_nodes_metadata_of_a_later_format_is_refused(tmp_path: Path) -> None:
    import json

    from cluster import data_dir
    from cluster.metadata import METADATA_FILE_FORMAT, ClusterMetadata, MetadataFileError

    secret = "s3cret-" + "x" * 40
    data_dir.check_identity(str(tmp_path), 0, secret)
    identity = tmp_path / "node.identity"
    doc = json.loads(identity.read_text())
    assert doc["format"] == data_dir.IDENTITY_FORMAT
    identity.write_text(json.dumps({**doc, "format": data_dir.IDENTITY_FORMAT + 1}))
    with pytest.raises(data_dir.DataDirError, match="newer release"):
        data_dir.check_identity(str(tmp_path), 0, secret)

    single = tmp_path / "single"
    ClusterMetadata(str(single), offsets_partitions=4)
    path = single / "cluster.json"
    doc = json.loads(path.read_text())
    assert doc["format"] == METADATA_FILE_FORMAT
    path.write_text(json.dumps({**doc, "format": METADATA_FILE_FORMAT + 1}))
    with pytest.raises(MetadataFileError, match="newer release"):
        ClusterMetadata(str(single), offsets_partitions=4)
