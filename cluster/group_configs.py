"""A group's own configs (KIP-848, Kafka's ``GroupConfig``): the keys Kafka 4.4 takes, their types
and defaults, the node settings they default from, and a group's overrides after an alteration.

Pure, like ``cluster/topic_configs.py``: the requesting node (its early answer, ``validate_only``)
and every node folding the committed change (``cluster/metadata_log.py``) compute the same
overrides from the same ones and the same ``Limits`` (the requester's, carried in the change).

Kafka's rules: an unknown key, a value that does not parse or is below the key's floor, a value
outside the node's bounds (``group.consumer.min/max.*``), or a session timeout not above the
heartbeat interval is INVALID_CONFIG, and so is APPEND or SUBTRACT, even to the one LIST key. Values are
kept as written; where they are used they are clamped to the node's bounds then, as Kafka's
``GroupConfig.evaluate`` does, so narrowing a bound takes effect without rewriting overrides.
kcoord serves consumer and classic groups: the ``share.*`` and ``streams.*`` keys are kept and
described, for the group types that will read them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from cluster.config import NodeConfig
from cluster.java_values import parse_bool, parse_long, trim
from cluster.topic_configs import APPEND, DELETE, SUBTRACT, ConfigError, Op, check_ops

# ConfigType (DescribeConfigs)
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7
INT_MAX = 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class GroupKey:
    name: str
    type: int
    default: str  # Kafka's, when no node setting gives it
    synonym: str | None = None  # the broker config it defaults from (Kafka's name)
    field: str | None = None  # that config's NodeConfig field, where kcoord has it
    floor: int | None = None  # the key's own lower bound (ConfigDef's atLeast)
    choices: tuple[str, ...] = ()
    internal: bool = False  # taken, but not described (Kafka's internal configs)


GROUP_KEYS = (
    GroupKey("consumer.session.timeout.ms", INT, "45000", "group.consumer.session.timeout.ms",
             "group_consumer_session_timeout_ms", 1),
    GroupKey("consumer.heartbeat.interval.ms", INT, "5000", "group.consumer.heartbeat.interval.ms",
             "group_consumer_heartbeat_interval_ms", 1),
    GroupKey("consumer.assignment.interval.ms", INT, "1000", "group.consumer.assignment.interval.ms", floor=0),
    GroupKey("consumer.assignor.offload.enable", BOOLEAN, "true", "group.consumer.assignor.offload.enable",
             internal=True),
    GroupKey("share.session.timeout.ms", INT, "45000", "group.share.session.timeout.ms", floor=1),
    GroupKey("share.heartbeat.interval.ms", INT, "5000", "group.share.heartbeat.interval.ms", floor=1),
    GroupKey("share.record.lock.duration.ms", INT, "30000", "group.share.record.lock.duration.ms", floor=1000),
    GroupKey("share.delivery.count.limit", INT, "5", "group.share.delivery.count.limit", floor=2),
    GroupKey("share.partition.max.record.locks", INT, "2000", "group.share.partition.max.record.locks", floor=100),
    GroupKey("share.auto.offset.reset", STRING, "latest"),
    GroupKey("share.isolation.level", STRING, "read_uncommitted", choices=("read_committed", "read_uncommitted")),
    GroupKey("share.renew.acknowledge.enable", BOOLEAN, "true"),
    GroupKey("share.assignment.interval.ms", INT, "1000", "group.share.assignment.interval.ms", floor=0),
    GroupKey("share.assignor.offload.enable", BOOLEAN, "true", "group.share.assignor.offload.enable", internal=True),
    GroupKey("streams.session.timeout.ms", INT, "45000", "group.streams.session.timeout.ms", floor=1),
    GroupKey("streams.heartbeat.interval.ms", INT, "5000", "group.streams.heartbeat.interval.ms", floor=1),
    GroupKey("streams.num.standby.replicas", INT, "0", "group.streams.num.standby.replicas", floor=0),
    GroupKey("streams.initial.rebalance.delay.ms", INT, "3000", "group.streams.initial.rebalance.delay.ms",
             floor=0),
    GroupKey("streams.assignment.interval.ms", INT, "1000", "group.streams.assignment.interval.ms", floor=0),
    GroupKey("streams.assignor.offload.enable", BOOLEAN, "true", "group.streams.assignor.offload.enable",
             internal=True),
    GroupKey("streams.task.offset.interval.ms", INT, "60000", "group.streams.task.offset.interval.ms", floor=1,
             internal=True),
    GroupKey("streams.num.warmup.replicas", INT, "2", "group.streams.num.warmup.replicas", floor=0, internal=True),
    GroupKey("streams.rack.aware.assignment.tags", LIST, "", "group.streams.rack.aware.assignment.tags"),
    GroupKey("streams.acceptable.recovery.lag", LONG, "10000", "group.streams.acceptable.recovery.lag", floor=0,
             internal=True),
    GroupKey("streams.assignor.name", STRING, "sticky", "group.streams.assignors", choices=("sticky",)),
    GroupKey("errors.deadletterqueue.topic.name", STRING, ""),
    GroupKey("errors.deadletterqueue.copy.record.enable", BOOLEAN, "false"),
)
BY_NAME = {k.name: k for k in GROUP_KEYS}

# key -> (the node's value, its lower bound, its upper bound): what a group's value is checked
# against and clamped to. The consumer keys' are node settings; the share and streams groups'
# are Kafka's defaults (kcoord serves neither kind yet, so has no settings for them).
Limits = Mapping[str, tuple[int, int, int]]
FIXED_LIMITS: dict[str, tuple[int, int, int]] = {
    "consumer.assignment.interval.ms": (1000, 0, 15000),  # kcoord computes a target when a heartbeat needs one
    "share.assignment.interval.ms": (1000, 0, 15000),
    "streams.assignment.interval.ms": (1000, 0, 15000),
    "share.session.timeout.ms": (45000, 45000, 60000),
    "share.heartbeat.interval.ms": (5000, 5000, 15000),
    "share.record.lock.duration.ms": (30000, 15000, 60000),
    "share.delivery.count.limit": (5, 2, 10),
    "share.partition.max.record.locks": (2000, 100, 4000),
    "streams.session.timeout.ms": (45000, 45000, 60000),
    "streams.heartbeat.interval.ms": (5000, 5000, 15000),
    "streams.num.standby.replicas": (0, 0, 2),
}
# (session timeout, heartbeat interval): a group's session must outlast its heartbeat interval
PAIRS = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
         ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
         ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"))


def limits(*, session_ms: int, min_session_ms: int, max_session_ms: int, heartbeat_ms: int, min_heartbeat_ms: int,
           max_heartbeat_ms: int) -> dict[str, tuple[int, int, int]]:
    """The limits of a node with these consumer group settings."""
    return {**FIXED_LIMITS, "consumer.session.timeout.ms": (session_ms, min_session_ms, max_session_ms),
            "consumer.heartbeat.interval.ms": (heartbeat_ms, min_heartbeat_ms, max_heartbeat_ms)}


MAX_VALUE_CHARS = 1024  # a string's (a topic name is at most 249)
MAX_GROUPS = 10_000  # groups with configs of their own: bounds the metadata's state record (a few MB)
# an ISO-8601 duration as Java's Duration.parse reads it, not negative
_DURATION = re.compile(r"P(?:[0-9]+D)?(?:T(?:[0-9]+H)?(?:[0-9]+M)?(?:[0-9]+(?:\.[0-9]{1,9})?S)?)?", re.IGNORECASE)


def _bad(key: GroupKey, value: str, why: str) -> ConfigError:
    return ConfigError("invalid_config", f"Invalid value {value} for configuration {key.name}: {why}")


def canonical(key: GroupKey, value: str) -> str:
    """``value`` as Kafka describes it once parsed (``ConfigDef.convertToString``); ConfigError
    (INVALID_CONFIG) for a value the key does not take."""
    if key.type in (INT, LONG):
        number = parse_long(value)
        if number is None:
            raise _bad(key, value, f"Not a number of type {'LONG' if key.type == LONG else 'INT'}")
        if not (LONG_MIN if key.type == LONG else -(INT_MAX + 1)) <= number <= (
                LONG_MAX if key.type == LONG else INT_MAX):
            raise _bad(key, value, "out of range")
        if key.floor is not None and number < key.floor:
            raise _bad(key, value, f"Value must be at least {key.floor}")
        return str(number)
    if key.type == BOOLEAN:
        flag = parse_bool(value)
        if flag is None:
            raise _bad(key, value, "Expected value to be either true or false")
        return "true" if flag else "false"
    text = trim(value)
    if len(text) > MAX_VALUE_CHARS:
        raise _bad(key, value[:40] + "...", f"longer than {MAX_VALUE_CHARS} characters")
    if key.choices and text not in key.choices:
        raise _bad(key, value, f"must be one of: {', '.join(key.choices)}")
    if key.name == "share.auto.offset.reset" and not _offset_reset(text):
        raise _bad(key, value, "must be latest, earliest or by_duration:<ISO-8601 duration, not negative>")
    return text


def _offset_reset(text: str) -> bool:
    v = text.lower() if text.isascii() else text
    if v in ("latest", "earliest"):
        return True
    duration = v.removeprefix("by_duration:")
    return duration != v and len(duration) > 1 and duration[-1:] != "t" and bool(_DURATION.fullmatch(duration))


def altered(current: Mapping[str, str], ops: list[Op], lim: Limits, *, replace: bool = False) -> dict[str, str]:
    """A group's overrides after ``ops`` (``replace``: AlterConfigs, the ops are the whole new set
    of SETs). Raises ConfigError for what Kafka refuses; nothing is applied then."""
    check_ops(ops)
    out: dict[str, str] = {} if replace else dict(current)
    for name, op, value in ops:
        key = BY_NAME.get(name)
        if key is None:
            raise ConfigError("invalid_config", f"Unknown group config name: {name}")
        if op in (APPEND, SUBTRACT):
            verb = "append" if op == APPEND else "subtract"
            raise ConfigError("invalid_config", f"Config value {verb} is not allowed for config key: {name}")
        if op == DELETE:
            out.pop(name, None)
        else:
            out[name] = canonical(key, value or "")
    changed = {k for k, v in out.items() if current.get(k) != v} if not replace else set(out)
    for name in sorted(changed):  # an override the group has already stays, valid or not by today's bounds
        if name in lim:
            number, (_, lo, hi) = int(out[name]), lim[name]
            if number < lo:
                raise ConfigError("invalid_config", f"{name} must be greater than or equal to {lo}")
            if number > hi:
                raise ConfigError("invalid_config", f"{name} must be less than or equal to {hi}")
    touched = {name for name, _, _ in ops} | (set(current) if replace else set())
    for session, heartbeat in PAIRS:  # a deletion too may leave the session at or below the interval
        if touched & {session, heartbeat} and effective(out, session, lim) <= effective(out, heartbeat, lim):
            raise ConfigError("invalid_config", f"{session} must be greater than {heartbeat}")
    return out


def effective(overrides: Mapping[str, str], name: str, lim: Limits) -> int:
    """A numeric key's value for a group: its override clamped to the node's bounds (Kafka's
    ``GroupConfig.evaluate``), else the node's."""
    node, lo, hi = lim.get(name, (int(BY_NAME[name].default), LONG_MIN, LONG_MAX))
    raw = overrides.get(name)
    number = None if raw is None else parse_long(raw)
    return node if number is None else min(max(number, lo), hi)  # None: unset, or a hand-made record's


def node_limits(config: NodeConfig) -> dict[str, tuple[int, int, int]]:
    """The limits of a node with these settings."""
    return limits(session_ms=config.group_consumer_session_timeout_ms,
                  min_session_ms=config.group_consumer_min_session_timeout_ms,
                  max_session_ms=config.group_consumer_max_session_timeout_ms,
                  heartbeat_ms=config.group_consumer_heartbeat_interval_ms,
                  min_heartbeat_ms=config.group_consumer_min_heartbeat_interval_ms,
                  max_heartbeat_ms=config.group_consumer_max_heartbeat_interval_ms)
