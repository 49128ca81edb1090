"""Settings that govern groups and offsets, with Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# Not configurable in Kafka either: how long a member added mid-rebalance may take to join.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """The consumer group protocol's settings (KIP-848)."""

    heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors, the first the default
    max_size: int = 2**31 - 1  # group.consumer.max.size
    # group.consumer.migration.policy: bidirectional, upgrade, downgrade or disabled
    migration_policy: str = "bidirectional"

    @property
    def upgrade_allowed(self) -> bool:
        return self.migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_allowed(self) -> bool:
        return self.migration_policy in ("bidirectional", "downgrade")

    def problems(self) -> list[str]:
        out = []
        if self.heartbeat_interval_ms < 1:
            out.append("group.consumer.heartbeat.interval.ms must be >= 1")
        if self.session_timeout_ms <= self.heartbeat_interval_ms:
            out.append("group.consumer.session.timeout.ms must be greater than group.consumer.heartbeat.interval.ms")
        known = {"uniform", "range"}
        if not self.assignors or any(a not in known for a in self.assignors) or len(set(self.assignors)) != len(
                self.assignors):
            out.append("group.consumer.assignors must name uniform and/or range, each once")
        if self.max_size < 1:
            out.append("group.consumer.max.size must be >= 1")
        if self.migration_policy not in ("bidirectional", "upgrade", "downgrade", "disabled"):
            out.append("group.consumer.migration.policy must be bidirectional, upgrade, downgrade or disabled")
        return out


@dataclass(frozen=True, slots=True)
class ShareConfig:
    """The share group protocol's settings (KIP-932)."""

    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    max_size: int = 200  # group.share.max.size

    def problems(self) -> list[str]:
        out = []
        if self.heartbeat_interval_ms < 1:
            out.append("group.share.heartbeat.interval.ms must be >= 1")
        if self.session_timeout_ms <= self.heartbeat_interval_ms:
            out.append("group.share.session.timeout.ms must be greater than group.share.heartbeat.interval.ms")
        if not 1 <= self.max_size <= 1000:
            out.append("group.share.max.size must be between 1 and 1000")
        return out


def _no_group_settings(group_id: str) -> ConsumerConfig | None:
    return None


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    max_size: int = 2_147_483_647  # group.max.size
    offsets_retention_ms: int = 10_080 * 60_000  # offsets.retention.minutes * 60000
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4_096  # offset.metadata.max.bytes
    # message.max.bytes, which bounds what one write to __consumer_offsets may carry in Kafka:
    # a group's metadata record, or the offset records of one commit.
    max_record_batch_bytes: int = 1_048_588
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    consumer: ConsumerConfig = field(default_factory=ConsumerConfig)
    share: ShareConfig = field(default_factory=ShareConfig)
    # A consumer group's own settings (its group configs: session timeout, heartbeat interval),
    # looked up at each use so that a change applies from the group's next heartbeat, as in
    # Kafka; None: the node's (``consumer``). Injected like the clock: kept outside the shard.
    group_consumer: Callable[[str], ConsumerConfig | None] = field(default=_no_group_settings, compare=False)

    def consumer_of(self, group_id: str) -> ConsumerConfig:
        return self.group_consumer(group_id) or self.consumer

    def validate(self) -> None:
        problems = []
        if self.min_session_timeout_ms < 0:
            problems.append("group.min.session.timeout.ms must be >= 0")
        if self.max_session_timeout_ms < self.min_session_timeout_ms:
            problems.append("group.max.session.timeout.ms must be >= group.min.session.timeout.ms")
        if self.initial_rebalance_delay_ms < 0:
            problems.append("group.initial.rebalance.delay.ms must be >= 0")
        if self.max_size < 1:
            problems.append("group.max.size must be >= 1")
        if self.offsets_retention_ms < 1:
            problems.append("offsets.retention.minutes must be >= 1")
        if self.offsets_retention_check_interval_ms < 1:
            problems.append("offsets.retention.check.interval.ms must be >= 1")
        if self.max_record_batch_bytes < 1024:
            problems.append("message.max.bytes must be >= 1024")
        if self.offset_metadata_max_bytes < 0:
            problems.append("offset.metadata.max.bytes must be >= 0")
        problems += self.consumer.problems()
        problems += self.share.problems()
        if problems:
            raise ValueError("; ".join(problems))
