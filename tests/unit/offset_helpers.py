"""Extra helpers for the unit tests (harness.py is shared and stays untouched)."""

from __future__ import annotations

import dataclasses
from typing import Any

from coordinator import commands as c
from coordinator.errors import ErrorCode
from coordinator.records import GroupMetadataKey, OffsetCommitKey, Record

from .harness import CONSUMER_PROTOCOLS, TEST_CONFIG, Harness, Pending

E = ErrorCode


def config(**kw: Any) -> Any:
    """TEST_CONFIG with some fields replaced."""
    return dataclasses.replace(TEST_CONFIG, **kw)


def apply(h: Harness, effects: list[Any]) -> None:
    """Feed runtime effects (from begin_load/unload/...) through the harness plumbing."""
    h._handle(effects)


def join_all(h: Harness, pendings: list[Pending], step_ms: int | None = None) -> list[Any]:
    """Advance the clock until every JoinGroup in ``pendings`` is answered; return the responses."""
    step = step_ms or max(h.config.initial_rebalance_delay_ms, 1)
    for _ in range(200):
        if not h.auto_commit:
            h.commit_all()
        if all(p.done for p in pendings):
            break
        h.sleep(step)
    return [p.response for p in pendings]


def join_completing(h: Harness, group_id: str = "g", n: int = 2, **kw: Any) -> tuple[str, list[str], int]:
    """``n`` dynamic members (v3) joined, group CompletingRebalance; returns (leader, followers, generation)."""
    responses = join_all(h, [h.join(group_id, **kw) for _ in range(n)])
    assert all(r.error == E.NONE for r in responses), responses
    leader = responses[0].leader
    ids = [r.member_id for r in responses]
    return leader, [m for m in ids if m != leader], responses[0].generation_id


def join_static_stable(h: Harness, group_id: str, instance_ids: list[str], **kw: Any) -> dict[str, str]:
    """Static members (v5-style joins, known instance ids) brought to Stable; returns instance id -> member id."""
    pendings = [h.join(group_id, instance_id=i, version=5, **kw) for i in instance_ids]
    responses = join_all(h, pendings)
    assert all(r.error == E.NONE for r in responses), responses
    gen = responses[0].generation_id
    leader = responses[0].leader
    syncs = [h.sync(group_id, r.member_id, gen, instance_id=i,
                    assignments={x.member_id: b"a" for x in responses} if r.member_id == leader else None)
             for i, r in zip(instance_ids, responses, strict=True)]
    assert all(s.done and s.response.error == E.NONE for s in syncs)
    return {i: r.member_id for i, r in zip(instance_ids, responses, strict=True)}


def pending_member(h: Harness, group_id: str = "g") -> str:
    """A v4 JoinGroup without a member id: returns the pending (KIP-394) member id."""
    r = h.join(group_id, version=4).response
    assert r.error == E.MEMBER_ID_REQUIRED
    return r.member_id


def describe(h: Harness, group_id: str) -> c.DescribeGroupsResponse:
    return h.call(c.DescribeGroupsRequest(group_id))


def list_groups(h: Harness, states: tuple[str, ...] = (), types: tuple[str, ...] = ()) -> dict[str, str]:
    resp = h.call(c.ListGroupsRequest(states, types))
    assert resp.error == E.NONE
    return {g.group_id: g.state for g in resp.groups}


def delete_groups(h: Harness, *group_ids: str) -> dict[str, ErrorCode]:
    return dict(h.call(c.DeleteGroupsRequest(tuple(group_ids))).results)


def offset_delete(h: Harness, group_id: str, topics: dict[str, list[int]]) -> c.OffsetDeleteResponse:
    return h.call(c.OffsetDeleteRequest(group_id, tuple((t, tuple(ps)) for t, ps in topics.items())))


def leave_errors(resp: c.LeaveGroupResponse) -> list[ErrorCode]:
    return [m.error for m in resp.members]


def fetch_full(h: Harness, group_id: str, topics: dict[str, list[int]] | None = None,
               require_stable: bool = False) -> Pending:
    t = None if topics is None else tuple((k, tuple(v)) for k, v in topics.items())
    return h.send(c.OffsetFetchRequest(group_id, t, require_stable))


def commit_request(group_id: str, offsets: dict[tuple[str, int], int], **kw: Any) -> c.OffsetCommitRequest:
    metadata = kw.pop("metadata", "")
    by_topic: dict[str, list[c.PartitionCommit]] = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append(c.PartitionCommit(p, o, metadata=metadata))
    return c.OffsetCommitRequest(group_id, tuple((t, tuple(ps)) for t, ps in by_topic.items()), **kw)


def offset_tombstone(group: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group, topic, partition), None)


def group_tombstone(group: str) -> Record:
    return Record(GroupMetadataKey(group), None)


def heartbeat_deadline(h: Harness, group_id: str, member_id: str) -> int | None:
    t = h.shard.timers.get(f"heartbeat-{group_id}-{member_id}")
    return None if t is None else t.deadline_ms


__all__ = ["CONSUMER_PROTOCOLS", "E"]
