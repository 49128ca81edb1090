"""Wire handlers of the group and offset APIs: kio message <-> coordinator command.

Each handler validates what Kafka's API layer validates, routes the group to its
``__consumer_offsets`` partition (``abs(hashCode(group)) % n``) and awaits the driver,
which answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this node does not
(yet) serve that partition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as KErr

from cluster import metrics
from cluster.apis.common import ZERO, has_field, mk, resp_mod, to_ms, version_of
from cluster.codec import (
    RequestHeader,
    decode_body,
    decode_heartbeat,
    encode_heartbeat_response,
    encode_offset_commit_response,
)
from cluster.coordinator_driver import CoordinatorDriver
from cluster.dispatch import RawResponse, RequestContext
from cluster.metadata import OFFSETS_TOPIC
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.services import Catalog, Guarded, Identity, Placement, Producers, Registers
from cluster.verification_guards import VerificationGuards
from coordinator import commands as c
from coordinator.errors import ErrorCode
from coordinator.partitioner import partition_for
from replication.leader_epochs import term_of


class Needs(Registers, Identity, Catalog, Placement, Producers, Guarded, Protocol):
    """What this module uses of its node (``cluster.services``)."""


log = logging.getLogger("kcoord.groups")

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH = 8, 9
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
TXN_OFFSET_COMMIT = 28

# Kafka's ranges (reference §6.4).
RANGES = {
    JOIN_GROUP: (0, 9),
    SYNC_GROUP: (0, 5),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    OFFSET_COMMIT: (2, 10),
    OFFSET_FETCH: (1, 10),
    DESCRIBE_GROUPS: (0, 6),
    LIST_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
    TXN_OFFSET_COMMIT: (0, 5),  # v5: transaction version 2 (KIP-890 part 2), the group's partition added here
}


def kerr(code: int) -> KErr:
    return KErr(int(code))


def cls(mod: ModuleType, *names: str) -> Any:
    for n in names:
        found = getattr(mod, n, None)
        if found is not None:
            return found
    raise LookupError(f"none of {names} in {mod.__name__}")


class GroupApi:
    """Registered on the node; owns the coordinator driver."""

    def __init__(self, node: Needs, driver: CoordinatorDriver) -> None:
        self.node = node
        self.driver = driver
        self._partitions: dict[str, int] = {}  # group id -> its __consumer_offsets partition
        # KIP-890 guards of verified TxnOffsetCommits, by (partition, producer id)
        self._verified: VerificationGuards[tuple[int, int]] = VerificationGuards()
        # what runs beside the coordinator and starts and stops with it (the share fetch manager)
        self.companions: list[Any] = []

    async def start(self) -> None:
        await self.driver.start()
        for companion in self.companions:
            await companion.start()

    async def stop(self) -> None:
        for companion in self.companions:
            await companion.stop()
        await self.driver.stop()

    def partition(self, group_id: str) -> int:
        p = self._partitions.get(group_id)
        if p is None:  # String.hashCode is a Python loop over the id: once per group, not per request
            if len(self._partitions) >= 1_000_000:
                self._partitions.clear()
            p = self._partitions[group_id] = partition_for(group_id, self.driver.num_partitions)
        return p

    async def call(self, group_id: str, request: c.Request) -> Any:
        return await self.driver.call(self.partition(group_id), request)

    # ------------------------------------------------------------ JoinGroup

    async def join_group(self, ctx: RequestContext, req: Any) -> Any:
        v = version_of(req)
        mod = resp_mod(JOIN_GROUP, v)
        session = to_ms(req.session_timeout)
        rebalance = to_ms(req.rebalance_timeout) if has_field(req, "rebalance_timeout") else session
        instance_id = getattr(req, "group_instance_id", None)
        command = c.JoinGroupRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            protocol_type=req.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in req.protocols),
            group_instance_id=instance_id,
            client_id=ctx.client_id or "",
            client_host=ctx.client_host,
            reason=getattr(req, "reason", None),
            require_known_member_id=v >= 4,
            supports_skip_assignment=v >= 9,
            topics=self.node.metadata.topic_image(),
        )
        if instance_id is not None and v < 5:
            resp: c.JoinGroupResponse = c.JoinGroupResponse(ErrorCode.UNSUPPORTED_VERSION)
        elif not req.group_id:
            resp = c.JoinGroupResponse(ErrorCode.INVALID_GROUP_ID, member_id=req.member_id)
        else:
            resp = await self.call(req.group_id, command)
        if resp.error not in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
            log.info("event=join_group_error group=%s member=%s error=%s", req.group_id, req.member_id,
                     resp.error.name)
        elif resp.error == ErrorCode.NONE:  # a rebalance's every join: rare, and what explains one
            log.info("event=join_group group=%s member=%s generation=%d reason=%r", req.group_id, resp.member_id,
                     resp.generation_id, getattr(req, "reason", None))
        member_cls = cls(mod, "JoinGroupResponseMember")
        return mk(
            cls(mod, "JoinGroupResponse"),
            throttle_time=ZERO,
            error_code=kerr(resp.error),
            generation_id=resp.generation_id,
            protocol_type=resp.protocol_type,
            protocol_name=resp.protocol_name if (resp.protocol_name is not None or v >= 7) else "",
            leader=resp.leader,
            skip_assignment=resp.skip_assignment,
            member_id=resp.member_id,
            members=tuple(mk(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id,
                             metadata=m.metadata) for m in resp.members),
        )

    # ------------------------------------------------------------ SyncGroup

    async def sync_group(self, ctx: RequestContext, req: Any) -> Any:
        v = version_of(req)
        mod = resp_mod(SYNC_GROUP, v)
        ptype = getattr(req, "protocol_type", None)
        pname = getattr(req, "protocol_name", None)
        if v >= 5 and (ptype is None or pname is None):
            resp: c.SyncGroupResponse = c.SyncGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        elif not req.group_id:
            resp = c.SyncGroupResponse(ErrorCode.INVALID_GROUP_ID)
        else:
            resp = await self.call(req.group_id, c.SyncGroupRequest(
                group_id=req.group_id,
                generation_id=int(req.generation_id),
                member_id=req.member_id,
                group_instance_id=getattr(req, "group_instance_id", None),
                protocol_type=ptype,
                protocol_name=pname,
                assignments=tuple((a.member_id, bytes(a.assignment)) for a in req.assignments),
                topics=self.node.metadata.topic_image(),
            ))
        return mk(cls(mod, "SyncGroupResponse"), throttle_time=ZERO, error_code=kerr(resp.error),
                  protocol_type=resp.protocol_type, protocol_name=resp.protocol_name,
                  assignment=resp.assignment)

    # ------------------------------------------------------------ Heartbeat

    async def heartbeat(self, ctx: RequestContext, header: RequestHeader, frame: bytes) -> RawResponse:
        """Read and answered without kio (``decode_heartbeat``): the hottest request there is."""
        req = decode_heartbeat(header, frame)
        if not ctx.allowed(Operation.READ, ResourceType.GROUP, req.group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif not req.group_id:
            error = ErrorCode.INVALID_GROUP_ID
        else:
            resp = await self.call(req.group_id, c.HeartbeatRequest(
                req.group_id, req.generation_id, req.member_id, req.group_instance_id))
            error = resp.error
        code = kerr(error)
        return RawResponse(encode_heartbeat_response(header.api_version, header.correlation_id, code.value), code)

    # ------------------------------------------------------------ LeaveGroup

    async def leave_group(self, ctx: RequestContext, req: Any) -> Any:
        v = version_of(req)
        mod = resp_mod(LEAVE_GROUP, v)
        if v < 3:
            members: tuple[c.LeaveMember, ...] = (c.LeaveMember(req.member_id),)
        else:
            members = tuple(c.LeaveMember(m.member_id, m.group_instance_id, getattr(m, "reason", None))
                            for m in req.members)
        if not req.group_id:
            resp: c.LeaveGroupResponse = c.LeaveGroupResponse(ErrorCode.INVALID_GROUP_ID)
        else:
            resp = await self.call(req.group_id, c.LeaveGroupRequest(req.group_id, members))
        for m in members:
            log.info("event=leave_group group=%s member=%s instance=%s reason=%r", req.group_id, m.member_id,
                     m.group_instance_id, m.reason or "not provided")
        if v < 3:
            # v0-2 carry one member and one error: the member's if the group answered.
            error = resp.error
            if error is ErrorCode.NONE and resp.members:
                error = resp.members[0].error
            return mk(cls(mod, "LeaveGroupResponse"), throttle_time=ZERO, error_code=kerr(error))
        member_cls = cls(mod, "MemberResponse")
        return mk(cls(mod, "LeaveGroupResponse"), throttle_time=ZERO, error_code=kerr(resp.error),
                  members=tuple(mk(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id,
                                   error_code=kerr(m.error)) for m in resp.members))

    # ------------------------------------------------------------ OffsetCommit

    async def offset_commit(self, ctx: RequestContext, header: RequestHeader, frame: bytes) -> RawResponse:
        """kio reads the request (its many versions); the answer, a list of error codes, is
        coded by hand (``encode_offset_commit_response``): commits are the hot path."""
        req = decode_body(header, frame, self.node.config.request_max_array_items)
        v = header.api_version
        if not ctx.allowed(Operation.READ, ResourceType.GROUP, req.group_id):  # every partition answers 30
            return RawResponse(encode_offset_commit_response(v, header.correlation_id, [
                (t.name if v < 10 else bytes(t.topic_id.bytes), [(int(p.partition_index), 30) for p in t.partitions])
                for t in req.topics]), KErr.group_authorization_failed)
        known, unknown, unknown_ids = self._commits(req.topics)
        denied = self._unreadable(ctx, known, unknown)
        retention = to_ms(req.retention_time) if has_field(req, "retention_time") else -1
        results: dict[str, list[tuple[int, ErrorCode]]] = {}
        if known:
            command = c.OffsetCommitRequest(
                group_id=req.group_id,
                topics=tuple(known),
                generation_id=int(req.generation_id_or_member_epoch),
                member_id=req.member_id,
                group_instance_id=getattr(req, "group_instance_id", None),
                retention_time_ms=retention,
                group_id_not_found_error=v >= 9,
                topic_ids=self._topic_ids(known) if v >= 9 else {},
            )
            resp = await self.call(req.group_id, command)
            for topic, parts_out in resp.topics:
                results.setdefault(topic, []).extend(parts_out)
        for topic, plist in unknown.items():
            results.setdefault(topic, []).extend((p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p in plist)
        for topic, plist in denied.items():
            results.setdefault(topic, []).extend((p, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in plist)
        answer: list[tuple[str | bytes, list[tuple[int, int]]]] = [
            (self._topic_key(topic, v), [(p, int(kerr(e).value)) for p, e in plist]) for topic, plist in results.items()]
        answer += [(tid, [(p, int(ErrorCode.UNKNOWN_TOPIC_ID)) for p in plist]) for tid, plist in unknown_ids.items()]
        return RawResponse(encode_offset_commit_response(v, header.correlation_id, answer), KErr.none)

    @staticmethod
    def _unreadable(ctx: RequestContext, known: list[tuple[str, tuple[c.PartitionCommit, ...]]],
                    unknown: dict[str, list[int]]) -> dict[str, list[int]]:
        """Takes out of ``known`` and ``unknown`` the topics the principal may not READ: their
        partitions, answered 29 (authorization comes before existence, so a name tells nothing)."""
        denied: dict[str, list[int]] = {}
        node: Needs = ctx.node
        if not node.access.enabled:
            return denied
        for topic, parts in list(known):
            if not ctx.allowed(Operation.READ, ResourceType.TOPIC, topic):
                known.remove((topic, parts))
                denied.setdefault(topic, []).extend(p.partition for p in parts)
        for topic in list(unknown):
            if not ctx.allowed(Operation.READ, ResourceType.TOPIC, topic):
                denied.setdefault(topic, []).extend(unknown.pop(topic))
        return denied

    def _topic_key(self, name: str, version: int) -> str | bytes:
        """How a response names a topic: by name, or from OffsetCommit v10 by its id."""
        if version < 10:
            return name
        t = self.node.topic(name)
        return t.topic_id.bytes if t is not None else bytes(16)

    def _topic_name(self, t: Any) -> str | None:
        """A request topic's name: given (up to OffsetCommit/OffsetFetch v9), or its id's (v10+);
        None for an id this cluster does not know."""
        name = getattr(t, "name", None)
        if name is not None:
            return str(name)
        meta = self.node.metadata.by_id(t.topic_id) if t.topic_id is not None else None
        return meta.name if meta is not None else None

    def _topic_ids(self, known: list[tuple[str, tuple[c.PartitionCommit, ...]]]) -> dict[str, str]:
        """Topic name -> id (hex): a consumer group matches commits against assignments by id."""
        out = {}
        for name, _ in known:
            t = self.node.topic(name)
            if t is not None:
                out[name] = t.topic_id.hex
        return out

    def _commits(self, topics: Any) -> tuple[list[tuple[str, tuple[c.PartitionCommit, ...]]], dict[str, list[int]],
                                             dict[bytes, list[int]]]:
        """The committed offsets of an OffsetCommit or TxnOffsetCommit, the partitions of topics
        this cluster does not have (answered UNKNOWN_TOPIC_OR_PARTITION here), and those of topic
        ids it does not know (v10: UNKNOWN_TOPIC_ID)."""
        unknown: dict[str, list[int]] = {}
        unknown_ids: dict[bytes, list[int]] = {}
        known: list[tuple[str, tuple[c.PartitionCommit, ...]]] = []
        for t in topics:
            name = self._topic_name(t)
            if name is None:
                unknown_ids.setdefault(t.topic_id.bytes if t.topic_id else bytes(16), []).extend(
                    int(p.partition_index) for p in t.partitions)
                continue
            parts = []
            for p in t.partitions:
                if not self.node.has_partition(name, int(p.partition_index)):
                    unknown.setdefault(name, []).append(int(p.partition_index))
                    continue
                parts.append(c.PartitionCommit(partition=int(p.partition_index), offset=int(p.committed_offset),
                                               leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                                               metadata=p.committed_metadata, commit_timestamp=-1))
            if parts:
                known.append((name, tuple(parts)))
        return known, unknown, unknown_ids

    # ------------------------------------------------------------ TxnOffsetCommit

    async def txn_offset_commit(self, ctx: RequestContext, req: Any) -> Any:
        """Offsets committed in a producer's transaction: pending until its marker. The group's
        partition must be in the producer's open transaction (AddOffsetsToTxn): the transaction
        coordinator is asked first (KIP-890 part 1), so a late commit of a finished transaction
        cannot leave offsets pending that no marker will ever resolve."""
        v = version_of(req)
        metrics.count_transaction_request("TxnOffsetCommit", 2 if v >= 5 else 1)
        known, unknown, _ = self._commits(req.topics)  # names only below TxnOffsetCommit v6
        denied = self._unreadable(ctx, known, unknown)
        results: dict[str, list[tuple[int, ErrorCode]]] = {t: [(p, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in ps]
                                                           for t, ps in denied.items()}
        refused = None
        if known and self.driver.runtime.epoch_of(self.partition(req.group_id)) is None:
            refused = ErrorCode.NOT_COORDINATOR  # before the transaction is asked about, as Kafka
        elif known:
            refused = await self._verify(req, v)
        if refused is not None:
            for topic, parts in known:
                results[topic] = [(p.partition, refused) for p in parts]
        elif known:
            resp = await self.call(req.group_id, c.TxnOffsetCommitRequest(
                group_id=req.group_id, producer_id=int(req.producer_id), producer_epoch=int(req.producer_epoch),
                topics=tuple(known), generation_id=int(getattr(req, "generation_id", -1)),
                member_id=getattr(req, "member_id", ""), group_instance_id=getattr(req, "group_instance_id", None)))
            for topic, parts_out in resp.topics:
                results.setdefault(topic, []).extend(parts_out)
        for topic, plist in unknown.items():
            results.setdefault(topic, []).extend((p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p in plist)
        mod = resp_mod(TXN_OFFSET_COMMIT, v)
        return mk(mod.TxnOffsetCommitResponse, throttle_time=ZERO, topics=tuple(
            mk(mod.TxnOffsetCommitResponseTopic, name=topic, partitions=tuple(
                mk(mod.TxnOffsetCommitResponsePartition, partition_index=p,
                   error_code=_txn_commit_error(e, v)) for p, e in plist))
            for topic, plist in results.items()))

    async def _verify(self, req: Any, version: int) -> ErrorCode | None:
        """Why the transaction coordinator refuses this commit (None: it is in the transaction).
        Kafka's mapping: a network failure is COORDINATOR_LOAD_IN_PROGRESS (retried), a partition
        outside the transaction INVALID_TXN_STATE (v<4) or TRANSACTION_ABORTABLE, the rest as is."""
        partition = self.partition(req.group_id)
        pid, epoch = int(req.producer_id), int(req.producer_epoch)
        version2 = version >= 5  # the client sent no AddOffsetsToTxn: the partition is added here
        token = self._verified.begin((partition, pid), epoch, version2)
        code = await self.node.verify_txn_partition(req.transactional_id, pid, epoch, OFFSETS_TOPIC, partition,
                                                    add=version2)
        if code == 0 and not self._verified.holds((partition, pid), token):
            code = 120  # a marker for this producer came in meanwhile: that transaction is over
        if code == 0:
            return None
        if code in (13, 51):  # (51: the producer's previous transaction still completing, past the retries)
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if code == 90:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if code == 120 and version < 4:
            return ErrorCode.INVALID_TXN_STATE
        try:
            return ErrorCode(code)
        except ValueError:
            return ErrorCode.INVALID_TXN_STATE

    async def end_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                              coordinator_epoch: int, version: int = 1) -> ErrorCode:
        """A transaction marker for ``__consumer_offsets`` partition ``partition``: its pending
        offsets are installed or dropped once the marker is committed."""
        self._verified.marker((partition, producer_id), producer_epoch, version)
        resp = await self.driver.call(partition, c.EndTxnMarkerRequest(producer_id, producer_epoch, commit,
                                                                        coordinator_epoch))
        assert isinstance(resp, c.EndTxnMarkerResponse)
        return resp.error

    # ------------------------------------------------------------ OffsetFetch

    async def _fetch_one(self, ctx: RequestContext, group_id: str, topics: Any, require_stable: bool,
                         member_id: str | None = None, member_epoch: int = -1) -> tuple[c.OffsetFetchResponse, list[Any]]:
        """One group's offsets, and the requested topics whose ids this cluster does not know
        (from v10 topics come as ids; those are answered UNKNOWN_TOPIC_ID). The principal needs
        DESCRIBE on the group, and on each topic: a topic asked for without it answers 29, one
        of an all-partitions fetch is left out."""
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            return c.OffsetFetchResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED), []
        wanted, missing = None, []
        denied: list[tuple[str, tuple[int, ...]]] = []
        if topics is not None:
            named = [(self._topic_name(t), t) for t in topics]
            wanted = tuple((name, tuple(int(i) for i in t.partition_indexes)) for name, t in named if name is not None)
            missing = [t for name, t in named if name is None]
            if self.node.access.enabled:
                denied = [w for w in wanted if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, w[0])]
                wanted = tuple(w for w in wanted if w not in denied)
        answer: c.OffsetFetchResponse = await self.call(group_id, c.OffsetFetchRequest(
            group_id, wanted, require_stable, member_id, member_epoch))
        if answer.error is not ErrorCode.NONE:
            return answer, []
        if self.node.access.enabled:
            kept = tuple(t for t in answer.topics if topics is not None
                         or ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t[0]))
            answer = c.OffsetFetchResponse(answer.error, kept + tuple(
                (name, tuple(c.FetchedOffset(i, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED) for i in parts))
                for name, parts in denied))
        return answer, missing

    async def offset_fetch(self, ctx: RequestContext, req: Any) -> Any:
        v = version_of(req)
        mod = resp_mod(OFFSET_FETCH, v)
        require_stable = bool(getattr(req, "require_stable", False))
        if v >= 8:
            part_cls = cls(mod, "OffsetFetchResponsePartitions")
            topic_cls = cls(mod, "OffsetFetchResponseTopics")
            group_cls = cls(mod, "OffsetFetchResponseGroup")
            answers = await asyncio.gather(*(self._fetch_one(
                ctx, g.group_id, g.topics, require_stable, getattr(g, "member_id", None), int(getattr(g, "member_epoch", -1)))
                for g in req.groups))
            return mk(cls(mod, "OffsetFetchResponse"), throttle_time=ZERO, groups=tuple(
                mk(group_cls, group_id=g.group_id, error_code=kerr(a.error),
                   topics=self._fetch_topics(a, topic_cls, part_cls, by_id=v >= 10, missing=missing))
                for g, (a, missing) in zip(req.groups, answers, strict=True)))
        part_cls = cls(mod, "OffsetFetchResponsePartition")
        topic_cls = cls(mod, "OffsetFetchResponseTopic")
        answer, _ = await self._fetch_one(ctx, req.group_id, req.topics, require_stable)
        if v <= 1 and answer.error is not ErrorCode.NONE:
            # v0-1 have no top-level error: it is copied into every requested partition.
            topics = tuple(mk(topic_cls, name=t.name, partitions=tuple(
                mk(part_cls, partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                   error_code=kerr(answer.error)) for i in t.partition_indexes)) for t in (req.topics or ()))
        else:
            topics = self._fetch_topics(answer, topic_cls, part_cls)
        return mk(cls(mod, "OffsetFetchResponse"), throttle_time=ZERO, error_code=kerr(answer.error),
                  topics=topics)

    def _committed_epoch(self, topic: str, partition: int, committed: int) -> int:
        """A committed offset's leader epoch as a client may be told it: an earlier release's
        fence epoch as the term it stands for, and none past the partition's current epoch (a
        deleted topic's offsets, kept for its namesake: its epochs start again; a client told the
        old one would reset, and a Java client would then ignore the namesake's Metadata)."""
        epoch = term_of(committed)
        current = self.node.topology.partition_leader(topic, partition)[1]
        return -1 if 0 <= current < epoch else epoch

    def _fetch_topics(self, answer: c.OffsetFetchResponse, topic_cls: Any, part_cls: Any,
                      by_id: bool = False, missing: list[Any] | None = None) -> tuple[Any, ...]:
        """The answer's topics by name, or by id (v10: a stored offset of a topic that no longer
        exists is left out, as it has no id to be named by), then the unknown ids asked for."""
        out = []
        for topic, fetched in answer.topics:
            meta = self.node.topic(topic) if by_id else None
            if by_id and meta is None:
                continue
            out.append(mk(topic_cls, name=topic, topic_id=meta.topic_id if meta is not None else None,
                          partitions=tuple(
                              mk(part_cls, partition_index=f.partition, committed_offset=f.offset,
                                 committed_leader_epoch=self._committed_epoch(topic, f.partition, f.leader_epoch),
                                 metadata=f.metadata, error_code=kerr(f.error))
                              for f in fetched)))
        for t in missing or ():
            out.append(mk(topic_cls, topic_id=t.topic_id, partitions=tuple(
                mk(part_cls, partition_index=int(i), committed_offset=-1, committed_leader_epoch=-1, metadata="",
                   error_code=kerr(ErrorCode.UNKNOWN_TOPIC_ID)) for i in t.partition_indexes)))
        return tuple(out)

    # ------------------------------------------------------------ DescribeGroups / ListGroups

    async def describe_groups(self, ctx: RequestContext, req: Any) -> Any:
        mod = resp_mod(DESCRIBE_GROUPS, version_of(req))
        member_cls = cls(mod, "DescribedGroupMember")
        group_cls = cls(mod, "DescribedGroup")
        answers = await asyncio.gather(*(self._describe_one(ctx, g) for g in req.groups))
        with_ops = bool(getattr(req, "include_authorized_operations", False))
        v6 = version_of(req) >= 6  # a group that is not there (or not classic) is an error from v6 on

        def error(a: c.DescribeGroupsResponse) -> ErrorCode:
            return ErrorCode.NONE if a.error is ErrorCode.GROUP_ID_NOT_FOUND and not v6 else a.error

        def message(a: c.DescribeGroupsResponse) -> dict[str, Any]:
            return {"error_message": a.error_message} if v6 else {}

        def ops(g: str, a: c.DescribeGroupsResponse) -> int:
            if not with_ops or error(a) is not ErrorCode.NONE:  # (below v6 a group not there is described)
                return -2147483648
            return self.node.access.operations(ctx.principal, ctx.ip, ResourceType.GROUP, g)

        return mk(cls(mod, "DescribeGroupsResponse"), throttle_time=ZERO, groups=tuple(
            mk(group_cls, error_code=kerr(error(a)), group_id=g, group_state=a.state, protocol_type=a.protocol_type,
               protocol_data=a.protocol_data, authorized_operations=ops(g, a), **message(a), members=tuple(
                   mk(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id,
                      client_id=m.client_id, client_host=m.client_host, member_metadata=m.metadata,
                      member_assignment=m.assignment) for m in a.members))
            for g, a in zip(req.groups, answers, strict=True)))

    async def _describe_one(self, ctx: RequestContext, group_id: str) -> c.DescribeGroupsResponse:
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            return c.DescribeGroupsResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id, state="")
        answer: c.DescribeGroupsResponse = await self.call(group_id, c.DescribeGroupsRequest(group_id))
        return answer

    async def list_groups(self, ctx: RequestContext, req: Any) -> Any:
        mod = resp_mod(LIST_GROUPS, version_of(req))
        listed_cls = cls(mod, "ListedGroup")
        command = c.ListGroupsRequest(tuple(getattr(req, "states_filter", ()) or ()),
                                      tuple(getattr(req, "types_filter", ()) or ()))
        answers: list[Any] = await asyncio.gather(*(self.driver.call(p, command)
                                                    for p in range(self.driver.num_partitions)))
        error = ErrorCode.NONE
        groups: list[c.ListedGroup] = []
        for a in answers:
            if a.error is ErrorCode.NOT_COORDINATOR:
                continue  # partitions led elsewhere are skipped, as Kafka does
            if a.error is not ErrorCode.NONE:
                error = a.error
                continue
            groups.extend(a.groups)
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):  # only the groups it may describe
            groups = [g for g in groups if ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, g.group_id)]
        return mk(cls(mod, "ListGroupsResponse"), throttle_time=ZERO, error_code=kerr(error), groups=tuple(
            mk(listed_cls, group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
               group_type=g.group_type) for g in groups))

    # ------------------------------------------------------------ DeleteGroups / OffsetDelete

    async def delete_groups(self, ctx: RequestContext, req: Any) -> Any:
        mod = resp_mod(DELETE_GROUPS, version_of(req))
        result_cls = cls(mod, "DeletableGroupResult")
        by_partition: dict[int, list[str]] = {}
        results: list[tuple[str, ErrorCode]] = []
        for g in dict.fromkeys(req.groups_names):
            if ctx.allowed(Operation.DELETE, ResourceType.GROUP, g):
                by_partition.setdefault(self.partition(g), []).append(g)
            else:
                results.append((g, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        answers: list[Any] = await asyncio.gather(*(self.driver.call(p, c.DeleteGroupsRequest(tuple(gs)))
                                                    for p, gs in by_partition.items()))
        results += [r for a in answers for r in a.results]
        return mk(cls(mod, "DeleteGroupsResponse"), throttle_time=ZERO, results=tuple(
            mk(result_cls, group_id=g, error_code=kerr(e)) for g, e in results))

    async def offset_delete(self, ctx: RequestContext, req: Any) -> Any:
        mod = resp_mod(OFFSET_DELETE, version_of(req))
        part_cls = cls(mod, "OffsetDeleteResponsePartition")
        topic_cls = cls(mod, "OffsetDeleteResponseTopic")
        topics = tuple((t.name, tuple(int(p.partition_index) for p in t.partitions)) for t in req.topics)
        denied = tuple(t for t in topics if not ctx.allowed(Operation.READ, ResourceType.TOPIC, t[0]))
        topics = tuple(t for t in topics if t not in denied)
        if not req.group_id:
            resp: c.OffsetDeleteResponse = c.OffsetDeleteResponse(ErrorCode.INVALID_GROUP_ID)
        else:
            resp = await self.call(req.group_id, c.OffsetDeleteRequest(req.group_id, topics))
        answered = resp.topics + tuple((t, tuple((p, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in ps))
                                       for t, ps in denied) if resp.error is ErrorCode.NONE else resp.topics
        return mk(cls(mod, "OffsetDeleteResponse"), throttle_time=ZERO, error_code=kerr(resp.error), topics=tuple(
            mk(topic_cls, name=t, partitions=tuple(mk(part_cls, partition_index=p, error_code=kerr(e))
                                                   for p, e in ps)) for t, ps in answered))


def _txn_commit_error(error: ErrorCode, version: int) -> KErr:
    """TxnOffsetCommit v0-1 do not know COORDINATOR_LOAD_IN_PROGRESS (Kafka sends NOT_AVAILABLE)."""
    if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < 2:
        return KErr.coordinator_not_available
    return kerr(error)


def error_responder(api_key: int) -> Any:
    """Builds the whole-request error answer of a group API (handler crash, bad version)."""

    def build(req: Any, error: KErr) -> Any:
        v = version_of(req)
        mod = resp_mod(api_key, v)
        if api_key == OFFSET_COMMIT:
            part_cls = cls(mod, "OffsetCommitResponsePartition")
            topic_cls = cls(mod, "OffsetCommitResponseTopic")
            return mk(cls(mod, "OffsetCommitResponse"), throttle_time=ZERO, topics=tuple(
                mk(topic_cls, name=getattr(t, "name", None), topic_id=getattr(t, "topic_id", None), partitions=tuple(
                    mk(part_cls, partition_index=p.partition_index, error_code=error) for p in t.partitions))
                for t in req.topics))
        if api_key == TXN_OFFSET_COMMIT:
            return mk(mod.TxnOffsetCommitResponse, throttle_time=ZERO, topics=tuple(
                mk(mod.TxnOffsetCommitResponseTopic, name=t.name, partitions=tuple(
                    mk(mod.TxnOffsetCommitResponsePartition, partition_index=p.partition_index, error_code=error)
                    for p in t.partitions)) for t in req.topics))
        if api_key == OFFSET_FETCH:
            if v >= 8:
                group_cls = cls(mod, "OffsetFetchResponseGroup")
                return mk(cls(mod, "OffsetFetchResponse"), throttle_time=ZERO, groups=tuple(
                    mk(group_cls, group_id=g.group_id, topics=(), error_code=error) for g in req.groups))
            return mk(cls(mod, "OffsetFetchResponse"), throttle_time=ZERO, topics=(), error_code=error)
        if api_key == DESCRIBE_GROUPS:
            group_cls = cls(mod, "DescribedGroup")
            return mk(cls(mod, "DescribeGroupsResponse"), throttle_time=ZERO, groups=tuple(
                mk(group_cls, error_code=error, group_id=g, group_state="", protocol_type="", protocol_data="",
                   members=(), authorized_operations=-2147483648) for g in req.groups))
        if api_key == DELETE_GROUPS:
            result_cls = cls(mod, "DeletableGroupResult")
            return mk(cls(mod, "DeleteGroupsResponse"), throttle_time=ZERO, results=tuple(
                mk(result_cls, group_id=g, error_code=error) for g in req.groups_names))
        names = {JOIN_GROUP: "JoinGroupResponse", SYNC_GROUP: "SyncGroupResponse",
                 HEARTBEAT: "HeartbeatResponse", LEAVE_GROUP: "LeaveGroupResponse",
                 LIST_GROUPS: "ListGroupsResponse", OFFSET_DELETE: "OffsetDeleteResponse"}
        return mk(cls(mod, names[api_key]), throttle_time=ZERO, error_code=error, generation_id=-1,
                  protocol_type=None, protocol_name=None if v >= 7 else "", leader="", skip_assignment=False,
                  member_id="", members=(), assignment=b"", groups=(), topics=())

    return build


def _group_gate(op: Operation) -> Callable[[RequestContext, Any], KErr | None]:
    def gate(ctx: RequestContext, req: Any) -> KErr | None:
        return None if ctx.allowed(op, ResourceType.GROUP, req.group_id) else KErr.group_authorization_failed
    return gate


def _sync_gate(ctx: RequestContext, req: Any) -> KErr | None:
    if version_of(req) >= 5 and (req.protocol_type is None or req.protocol_name is None):
        return None  # Kafka answers the missing protocol (23) before it looks at ACLs
    return _group_gate(Operation.READ)(ctx, req)


def _txn_commit_gate(ctx: RequestContext, req: Any) -> KErr | None:
    if not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return KErr.transactional_id_authorization_failed
    return _group_gate(Operation.READ)(ctx, req)


# Whole-request ACL checks (Kafka's order and codes); the per-topic ones are in the handlers.
GATES = {JOIN_GROUP: _group_gate(Operation.READ), SYNC_GROUP: _sync_gate, LEAVE_GROUP: _group_gate(Operation.READ),
         OFFSET_DELETE: _group_gate(Operation.DELETE), TXN_OFFSET_COMMIT: _txn_commit_gate}


def register(node: Needs, driver: CoordinatorDriver) -> GroupApi:
    api = GroupApi(node, driver)
    handlers = {
        JOIN_GROUP: api.join_group,
        SYNC_GROUP: api.sync_group,
        LEAVE_GROUP: api.leave_group,
        OFFSET_FETCH: api.offset_fetch,
        DESCRIBE_GROUPS: api.describe_groups,
        LIST_GROUPS: api.list_groups,
        DELETE_GROUPS: api.delete_groups,
        OFFSET_DELETE: api.offset_delete,
        TXN_OFFSET_COMMIT: api.txn_offset_commit,
    }
    for key, handler in handlers.items():
        lo, hi = RANGES[key]
        node.registry.register(key, lo, hi, handler, error_response=error_responder(key), authorize=GATES.get(key))
    for key, raw in ((HEARTBEAT, api.heartbeat), (OFFSET_COMMIT, api.offset_commit)):
        lo, hi = RANGES[key]
        node.registry.register(key, lo, hi, None, error_response=error_responder(key), raw=raw)
    return api
