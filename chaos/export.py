"""Offline export of a stopped node's replicated ``__consumer_offsets`` state.

For each ``<data_dir>/raft/__consumer_offsets-P/``: the Raft snapshot (``raft.snapshot``,
written by ``replication.raft``'s serializer: the EntryStore's compacted payloads and the
fence epoch) followed by the journal entries after it up to the node's commit index
(``raft.kcj`` + ``raft.kcj.meta`` + ``raft.kcj.commit``, read with ``SafeJournal``), replayed the way the
partition's Raft group applies them: ``announce`` raises the fence, ``append`` applies only
at the current fence, ``submit`` always applies. Every payload is a coordinator record
batch (``coordinator.codec.decode_batch``).

Output, one line per replayed record (``chaos/history.py``):
``offsets-node-N.jsonl``: ``partition, group, topic, topic_partition, offset, metadata,
commit_timestamp`` for offset commits; ``partition, group, topic, topic_partition,
tombstone: true`` for deleted offsets; ``partition, group, tombstone: true`` for deleted
groups. Group metadata records (generation, members) go to ``groups-node-N.jsonl``.
Run only on a stopped node (the files are read as they are on disk).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgpack

from coordinator.codec import decode_batch
from coordinator.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from replication.journal import SafeJournal
from replication.raft import replicated_method_names
from replication.raft.commands import CommandError, decode

_REGULAR = 0  # pysyncobj _COMMAND_TYPE.REGULAR


def partition_payloads(part_dir: Path) -> list[bytes]:
    """The committed payloads of one offsets partition, in apply order."""
    names = replicated_method_names()
    fence = 0
    last_idx = 0
    payloads: list[bytes] = []
    snap = part_dir / "raft.snapshot"
    if snap.exists():
        blob = msgpack.unpackb(snap.read_bytes(), raw=False)
        fence = int(blob["fence"])
        last_idx = int(blob["last"][1])
        state = msgpack.unpackb(blob["state"], raw=False)
        payloads.extend(bytes(p) for p in state["base"])
    journal_path = part_dir / "raft.kcj"
    if not journal_path.exists():
        return payloads
    # SafeJournal opens its file for appending and truncates a torn tail: work on a copy.
    tmp = part_dir / "export.tmp.kcj"
    tmp.write_bytes(journal_path.read_bytes())
    for side in (".meta", ".commit"):  # term and vote; the commit index
        src = Path(str(journal_path) + side)
        if src.exists():
            Path(str(tmp) + side).write_bytes(src.read_bytes())
    try:
        j = SafeJournal(str(tmp))
        commit = j.getRaftCommitIndex()
        entries = [j[i] for i in range(len(j))]
        j._destroy()
    finally:
        for p in (tmp, *(Path(str(tmp) + side) for side in (".meta", ".meta.tmp", ".commit", ".commit.tmp", ".tmp"))):
            if p.exists():
                os.unlink(p)
    for command, idx, _term in entries:
        if idx <= last_idx or idx > commit or not command or command[0] != _REGULAR:
            continue
        try:  # both encodings, as the node applies them; never an unpickling of the journal's bytes
            func_id, args = decode(command[1:])
        except CommandError:
            continue  # the node skips it too
        name = names.get(func_id)
        if name == "announce":
            fence = max(fence, int(args[0]))
        elif name == "append":
            if int(args[0]) == fence:
                payloads.append(bytes(args[1]))
        elif name == "submit":
            payloads.append(bytes(args[0]))
    return payloads


def export_node(data_dir: Path, offsets_out: Path, groups_out: Path | None = None) -> int:
    """Write the node's replayed offsets records; returns how many lines were written."""
    root = data_dir / "raft"
    dirs = sorted(root.glob("__consumer_offsets-*"), key=lambda d: int(d.name.rsplit("-", 1)[1]))
    n = 0
    with open(offsets_out, "w", encoding="utf-8") as out:
        gout = open(groups_out, "w", encoding="utf-8") if groups_out else None  # noqa: SIM115
        try:
            for d in dirs:
                partition = int(d.name.rsplit("-", 1)[1])
                for payload in partition_payloads(d):
                    for rec in decode_batch(payload):
                        line: dict[str, Any] | None = None
                        key, value = rec.key, rec.value
                        if isinstance(key, OffsetCommitKey):
                            line = {"partition": partition, "group": key.group, "topic": key.topic,
                                    "topic_partition": key.partition}
                            if isinstance(value, OffsetCommitValue):
                                line.update(offset=value.offset, metadata=value.metadata,
                                            commit_timestamp=value.commit_timestamp)
                            else:
                                line["tombstone"] = True
                        elif isinstance(key, GroupMetadataKey):
                            if value is None:
                                line = {"partition": partition, "group": key.group, "tombstone": True}
                            elif isinstance(value, GroupMetadataValue) and gout is not None:
                                gout.write(json.dumps({
                                    "partition": partition, "group": key.group, "generation": value.generation,
                                    "protocol": value.protocol, "leader": value.leader,
                                    "members": [[m.member_id, m.group_instance_id] for m in value.members],
                                }) + "\n")
                        if line is not None:
                            out.write(json.dumps(line, separators=(",", ":")) + "\n")
                            n += 1
        finally:
            if gout is not None:
                gout.close()
    return n
