"""Committed offsets on one shard: OffsetCommit, TxnOffsetCommit and its markers, OffsetFetch,
OffsetDelete, and which offsets have expired (KIP-211), as Kafka's OffsetMetadataManager.

``offsets`` and ``pending`` (transactional offsets awaiting their marker) are durable state,
changed only by replaying the records written here.
"""

from __future__ import annotations

from collections.abc import Callable

from . import commands as c
from .classic_groups import ClassicGroupHandlers
from .config import GroupConfig
from .consumer_groups import ConsumerGroupHandlers
from .errors import ErrorCode
from .group import ClassicGroup, GroupState
from .records import OffsetCommitKey, OffsetCommitValue, Record, TxnMarkerKey, TxnMarkerValue
from .txn_offsets import PendingOffsets
from .write_context import WriteContext

E = ErrorCode
S = GroupState


def _commit_size(req: c.OffsetCommitRequest | c.TxnOffsetCommitRequest) -> int:
    """About what the offset records of one commit take (a little more, never less)."""
    size = 0
    group = len(req.group_id.encode())
    for topic, partitions in req.topics:
        per = group + len(topic.encode()) + 64
        for p in partitions:
            size += per + (len(p.metadata.encode()) if p.metadata else 0)
    return size


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


class OffsetHandlers:
    def __init__(self, config: GroupConfig, groups: dict[str, ClassicGroup],
                 offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]], pending: PendingOffsets,
                 classic: ClassicGroupHandlers, consumer: ConsumerGroupHandlers, w: WriteContext) -> None:
        self.config = config
        self.groups = groups
        self.offsets = offsets
        self.pending = pending
        self.classic = classic
        self.consumer = consumer
        self.w = w

    # ================================================================ offsets

    def _validate_commit(self, group: ClassicGroup, req: c.OffsetCommitRequest | c.TxnOffsetCommitRequest) -> ErrorCode:
        """Kafka's validateOffsetCommit, and validateTransactionalOffsetCommit for a transactional
        one: any state is fine there (never REBALANCE_IN_PROGRESS), and a commit without member
        information is accepted as older clients send it."""
        transactional = isinstance(req, c.TxnOffsetCommitRequest)
        if group.is_in(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and group.is_in(S.EMPTY):
            return E.NONE
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            invalid = group.validate_member(req.member_id, req.group_instance_id)
            if invalid:
                return invalid
            if req.generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION
        elif not transactional and not group.is_in(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if not transactional and group.is_in(S.COMPLETING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def offset_commit(self, req: c.OffsetCommitRequest | c.TxnOffsetCommitRequest) -> c.OffsetCommitResponse:
        """OffsetCommit, or TxnOffsetCommit: its records carry the producer id and wait, pending,
        for the transaction's marker (``end_txn_marker``)."""
        def all_partitions(e: ErrorCode) -> c.OffsetCommitResponse:
            return c.OffsetCommitResponse(tuple((t, tuple((p.partition, e) for p in ps)) for t, ps in req.topics))

        transactional = isinstance(req, c.TxnOffsetCommitRequest)
        if transactional and not req.group_id:
            return all_partitions(E.INVALID_GROUP_ID)
        if isinstance(req, c.TxnOffsetCommitRequest) and self.pending.fenced(req.producer_id, req.producer_epoch):
            return all_partitions(E.INVALID_PRODUCER_EPOCH)  # a zombie: a newer epoch wrote or ended here
        if _commit_size(req) > self.config.max_record_batch_bytes:
            return all_partitions(E.INVALID_COMMIT_OFFSET_SIZE)  # Kafka's answer to RECORD_LIST_TOO_LARGE

        consumer_group = self.consumer.groups.get(req.group_id)
        group = self.groups.get(req.group_id)
        if consumer_group is not None:
            error = self.consumer.validate_commit(consumer_group, req)
            if error is not E.NONE:
                return all_partitions(error)
        elif group is None:
            if req.generation_id >= 0:
                not_found = isinstance(req, c.OffsetCommitRequest) and req.group_id_not_found_error
                return all_partitions(E.GROUP_ID_NOT_FOUND if not_found else E.ILLEGAL_GENERATION)
            group = ClassicGroup(req.group_id, current_state_timestamp=self.w.now)
            self.groups[req.group_id] = group
        else:
            error = self._validate_commit(group, req)
            if error is not E.NONE:
                return all_partitions(error)
            if not transactional and group.is_in(S.STABLE, S.PREPARING_REBALANCE):
                member = group.members.get(req.member_id)
                if member is not None:
                    self.classic.reschedule_heartbeat(group, member)
        retention = req.retention_time_ms if isinstance(req, c.OffsetCommitRequest) else -1
        expire = self.w.now + retention if retention != -1 else -1
        producer_id, producer_epoch = ((req.producer_id, req.producer_epoch) if isinstance(req, c.TxnOffsetCommitRequest)
                                       else (-1, -1))
        topics_out = []
        for topic, partitions in req.topics:
            results = []
            for p in partitions:
                metadata = p.metadata or ""
                if _utf16_len(metadata) > self.config.offset_metadata_max_bytes:
                    results.append((p.partition, E.OFFSET_METADATA_TOO_LARGE))
                    continue
                value = OffsetCommitValue(
                    offset=p.offset,
                    leader_epoch=p.leader_epoch,
                    metadata=metadata,
                    commit_timestamp=p.commit_timestamp if p.commit_timestamp != -1 else self.w.now,
                    expire_timestamp=expire,
                )
                self.w.write(Record(OffsetCommitKey(req.group_id, topic, p.partition), value, producer_id,
                                    producer_epoch))
                results.append((p.partition, E.NONE))
            topics_out.append((topic, tuple(results)))
        return c.OffsetCommitResponse(tuple(topics_out))

    def end_txn_marker(self, req: c.EndTxnMarkerRequest) -> c.EndTxnMarkerResponse:
        """The transaction ended: its pending offsets are installed (COMMIT) or dropped (ABORT)
        when the marker record replays. Nothing pending at an epoch already known: nothing to
        write (a retry, or a transaction that committed no offsets here)."""
        pid = req.producer_id
        if req.coordinator_epoch < self.pending.coordinator_epochs.get(pid, -1):
            return c.EndTxnMarkerResponse(E.TRANSACTION_COORDINATOR_FENCED)  # from a deposed coordinator
        if pid in self.pending.by_producer or req.producer_epoch > self.pending.epochs.get(pid, -1):
            # also when nothing is pending but the epoch is new: it fences the producer's older epochs
            self.w.write(Record(TxnMarkerKey(pid), TxnMarkerValue(req.commit, req.coordinator_epoch,
                                                                  req.producer_epoch)))
        return c.EndTxnMarkerResponse(E.NONE)

    def offset_fetch(self, req: c.OffsetFetchRequest) -> c.OffsetFetchResponse:
        group = self.groups.get(req.group_id)
        consumer_group = self.consumer.groups.get(req.group_id)
        committed = self.offsets.get(req.group_id, {})
        if consumer_group is not None:
            error = self.consumer.validate_fetch(consumer_group, req.member_id, req.member_epoch)
            if error is not E.NONE:
                return c.OffsetFetchResponse(error)
        elif group is None or group.is_in(S.DEAD):
            committed = {}
        # require_stable: a partition with an offset pending in an open transaction is unstable
        unstable = self.pending.partitions(req.group_id) if req.require_stable else set()
        if req.topics is None:
            by_topic: dict[str, list[c.FetchedOffset]] = {}
            for (topic, partition) in sorted(set(committed) | unstable):
                v = committed.get((topic, partition))
                by_topic.setdefault(topic, []).append(
                    c.FetchedOffset(partition, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT) if (topic, partition) in unstable
                    else c.FetchedOffset(partition, v.offset, v.leader_epoch, v.metadata) if v is not None
                    else c.FetchedOffset(partition, -1, -1, ""))
            return c.OffsetFetchResponse(E.NONE, tuple((t, tuple(ps)) for t, ps in by_topic.items()))
        out = []
        for topic, partitions in req.topics:
            fetched = []
            for partition in partitions:
                found = committed.get((topic, partition))
                if (topic, partition) in unstable:
                    fetched.append(c.FetchedOffset(partition, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT))
                elif found is None:
                    fetched.append(c.FetchedOffset(partition, -1, -1, ""))
                else:
                    fetched.append(c.FetchedOffset(partition, found.offset, found.leader_epoch, found.metadata))
            out.append((topic, tuple(fetched)))
        return c.OffsetFetchResponse(E.NONE, tuple(out))

    def offset_delete(self, req: c.OffsetDeleteRequest) -> c.OffsetDeleteResponse:
        if not req.group_id:
            return c.OffsetDeleteResponse(E.INVALID_GROUP_ID)
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            return self._delete_offsets(req, self.consumer.subscribed_topics(consumer_group))
        group = self.groups.get(req.group_id)
        if group is None or group.is_in(S.DEAD):
            return c.OffsetDeleteResponse(E.GROUP_ID_NOT_FOUND)
        if not group.is_in(S.EMPTY) and group.protocol_type != "consumer":
            return c.OffsetDeleteResponse(E.NON_EMPTY_GROUP)
        subscribed = {t for t, _ in req.topics if not group.is_in(S.EMPTY) and group.is_subscribed_to_topic(t)}
        return self._delete_offsets(req, subscribed)

    def _delete_offsets(self, req: c.OffsetDeleteRequest, subscribed: set[str]) -> c.OffsetDeleteResponse:
        committed = self.offsets.get(req.group_id, {})
        topics_out = []
        for topic, partitions in req.topics:
            if topic in subscribed:
                topics_out.append((topic, tuple((p, E.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions)))
                continue
            for p in partitions:
                if (topic, p) in committed:
                    self.w.write(Record(OffsetCommitKey(req.group_id, topic, p), None))
            topics_out.append((topic, tuple((p, E.NONE) for p in partitions)))
        return c.OffsetDeleteResponse(E.NONE, tuple(topics_out))

    # ================================================================ expiry (KIP-211)

    def expiration_base(self, group: ClassicGroup) -> str | None:
        """Which timestamp offsets of this group expire from, or None if they never do."""
        if group.protocol_type is None:
            return "commit"
        if group.is_in(S.EMPTY):
            return "state" if group.current_state_timestamp is not None else "commit"
        if group.protocol_type == "consumer" and group.is_in(S.STABLE) and group.subscribed_topics is not None:
            return "commit"
        return None

    def delete_all_offsets(self, group_id: str) -> None:
        """Tombstones for every committed offset and every partition with only a pending one."""
        for topic, partition in sorted(set(self.offsets.get(group_id, {})) | self.pending.partitions(group_id)):
            self.w.write(Record(OffsetCommitKey(group_id, topic, partition), None))

    def expire_offsets(self, group_id: str, group: ClassicGroup) -> bool:
        """Write tombstones for the classic group's expired offsets; whether none is left."""
        base = self.expiration_base(group)
        if base is None:
            return not self.offsets.get(group_id)
        start = group.current_state_timestamp if base == "state" else None
        return self._expire(group_id, lambda t: group.is_subscribed_to_topic(t) and not group.is_in(S.EMPTY), start)

    def expire_consumer_offsets(self, group_id: str, subscribed: set[str]) -> bool:
        """A consumer group's offsets expire from their commit time, but never those of a topic a
        member subscribes to (Kafka's ConsumerGroup.offsetExpirationCondition)."""
        return self._expire(group_id, subscribed.__contains__, None)

    def _expire(self, group_id: str, keep: Callable[[str], bool], state_since: int | None) -> bool:
        """Tombstones for the expired offsets (retention counted from ``state_since`` if set, else
        from each commit); whether none is left."""
        committed = self.offsets.get(group_id)
        if not committed:
            return True
        all_expired = True
        pending = self.pending.partitions(group_id)
        for (topic, partition), v in sorted(committed.items()):
            if keep(topic) or (topic, partition) in pending:
                all_expired = False  # an offset with a transactional one pending stays until the marker
                continue
            if v.expire_timestamp != -1:
                expired = self.w.now >= v.expire_timestamp
            else:
                start = state_since if state_since is not None else v.commit_timestamp
                expired = self.w.now - start >= self.config.offsets_retention_ms
            if expired:
                self.w.write(Record(OffsetCommitKey(group_id, topic, partition), None))
            else:
                all_expired = False
        return all_expired
