"""Small helpers shared by the JoinGroup / rebalance / static-membership behaviour tests.

Everything goes through the ``Harness`` request helpers; the only extra is ``reload``,
which replays a committed log into the harness' runtime the way a failover would.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from coordinator.config import GroupConfig
from coordinator.errors import ErrorCode
from coordinator.records import GroupMetadataKey, GroupMetadataValue, MemberMetadata, Record
from tests.unit.harness import TEST_CONFIG, Harness

E = ErrorCode

# "<client_id or group_instance_id>-<32 hex>"
MEMBER_ID_RE = r"-[0-9a-f]{32}"


def member_id_of(prefix: str, member_id: str) -> bool:
    return re.fullmatch(re.escape(prefix) + MEMBER_ID_RE, member_id) is not None


def config(**overrides: int) -> GroupConfig:
    return replace(TEST_CONFIG, **overrides)


def reload(h: Harness, records: Iterable[Record]) -> None:
    """Fail over the harness' partition to a new epoch and load ``records`` as its committed log."""
    h.epoch += 1
    h._handle(h.rt.begin_load(h.partition, h.epoch))
    h._handle(h.rt.complete_load(h.partition, h.epoch, list(records), h.now))


def complete_reload(h: Harness, records: Iterable[Record]) -> None:
    """Finish the Reload a failed append asked for (same epoch), from ``records``."""
    h._handle(h.rt.complete_load(h.partition, h.epoch, list(records), h.now))


def group_record(group_id: str, value: GroupMetadataValue) -> Record:
    return Record(GroupMetadataKey(group_id), value)


def member_record(member_id: str, *, instance_id: str | None = None, subscription: bytes = b"range-meta",
                  assignment: bytes = b"", session_ms: int = 10_000, rebalance_ms: int = 10_000,
                  client_id: str = "client") -> MemberMetadata:
    return MemberMetadata(member_id=member_id, group_instance_id=instance_id, client_id=client_id,
                          client_host="/127.0.0.1", rebalance_timeout=rebalance_ms, session_timeout=session_ms,
                          subscription=subscription, assignment=assignment)


@dataclass(frozen=True)
class RebalanceResult:
    generation: int
    leader_id: str
    follower_id: str


def static_members_join_and_rebalance(h: Harness, group_id: str = "g", leader_instance: str = "leader-instance",
                                      follower_instance: str = "follower-instance", *,
                                      rebalance_ms: int = 10_000, session_ms: int = 5_000,
                                      version: int = 3) -> RebalanceResult:
    """Kafka's ``staticMembersJoinAndRebalance``: two static members, leader syncs {1} / {2}, group Stable."""
    leader = h.join(group_id, instance_id=leader_instance, rebalance_ms=rebalance_ms, session_ms=session_ms,
                    version=version)
    follower = h.join(group_id, instance_id=follower_instance, rebalance_ms=rebalance_ms,
                      session_ms=session_ms, version=version)
    assert not leader.done and not follower.done
    h.sleep(h.config.initial_rebalance_delay_ms)
    h.sleep(h.config.initial_rebalance_delay_ms)
    assert leader.response.error == E.NONE and follower.response.error == E.NONE
    assert leader.response.generation_id == follower.response.generation_id == 1
    leader_id, follower_id = leader.response.member_id, follower.response.member_id
    assert leader.response.leader == leader_id
    leader_sync = h.sync(group_id, leader_id, 1, instance_id=leader_instance,
                         assignments={leader_id: b"\x01", follower_id: b"\x02"})
    assert leader_sync.response.error == E.NONE and leader_sync.response.assignment == b"\x01"
    follower_sync = h.sync(group_id, follower_id, 1, instance_id=follower_instance)
    assert follower_sync.response.error == E.NONE and follower_sync.response.assignment == b"\x02"
    return RebalanceResult(1, leader_id, follower_id)


def canonical(records: Iterable[Record]) -> list[Record]:
    """Records with GroupMetadata members sorted by id (Kafka's member map order is unspecified)."""
    out = []
    for r in records:
        if isinstance(r.value, GroupMetadataValue):
            r = Record(r.key, replace(r.value, members=tuple(sorted(r.value.members, key=lambda m: m.member_id))))
        out.append(r)
    return out
