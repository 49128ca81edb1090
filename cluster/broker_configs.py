"""A node's dynamic settings (Kafka's dynamic broker configs): the log defaults every topic without
an override of its own takes (retention, segment size and age, the cleaner's delete retention,
dirty ratio and compaction lags), set for the whole cluster (the BROKER resource named "") or for
one node (its id), replicated in the cluster's metadata and applied live. A node's setting is its
own dynamic value, else the cluster's, else its configuration's (Kafka's order).

Pure, like ``cluster/topic_configs.py``: the requesting node and every node folding the change
compute the same overrides. Kafka's rules for a BROKER resource: a setting that is not dynamic, or
a value that does not parse or is out of its range, is INVALID_REQUEST; APPEND or SUBTRACT to one
that is not a list is INVALID_CONFIG. One deliberate difference: Kafka keeps a name it does not
know (a plugin's config); kcoord has no plugins, and keeping a name nothing reads (Kafka's own
``log.retention.hours``, say, which kcoord does not honour) would tell the operator of a change
that never happens, so every name but the dynamic ones is INVALID_REQUEST.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from cluster.config import NodeConfig
from cluster.java_values import parse_double, parse_long
from cluster.topic_configs import APPEND, DELETE, SUBTRACT, ConfigError, Op, check_ops

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class DynamicKey:
    name: str  # Kafka's
    field: str  # the NodeConfig field it sets
    floor: float = LONG_MIN
    ceiling: float = LONG_MAX
    ratio: bool = False  # a DOUBLE; the others are LONG or INT


DYNAMIC = {k.name: k for k in (
    DynamicKey("log.retention.ms", "log_retention_ms"),  # negative: for ever
    DynamicKey("log.retention.bytes", "log_retention_bytes"),  # negative: no bound
    DynamicKey("log.segment.bytes", "log_segment_bytes", 1024 * 1024, 2**31 - 1),  # Kafka 4's floor
    DynamicKey("log.roll.ms", "log_roll_ms", 1),
    DynamicKey("log.cleaner.delete.retention.ms", "log_cleaner_delete_retention_ms", 0),
    DynamicKey("log.cleaner.min.cleanable.ratio", "log_cleaner_min_cleanable_ratio", 0, 1, ratio=True),
    DynamicKey("log.cleaner.min.compaction.lag.ms", "log_cleaner_min_compaction_lag_ms", 0),
    DynamicKey("log.cleaner.max.compaction.lag.ms", "log_cleaner_max_compaction_lag_ms", 1),
)}


def parse(key: DynamicKey, value: str) -> int | float:
    """A dynamic setting's value; ConfigError (INVALID_REQUEST, as Kafka answers a BROKER resource)
    when it does not parse or is out of range."""
    number = parse_double(value) if key.ratio else parse_long(value)
    if number is None:
        raise ConfigError("invalid_request", f"Invalid value {value} for configuration {key.name}: Not a number of "
                                             f"type {'DOUBLE' if key.ratio else 'LONG'}")
    if not key.floor <= number <= key.ceiling:
        raise ConfigError("invalid_request", f"Invalid value {value} for configuration {key.name}: must lie within "
                                             f"{key.floor:g} and {key.ceiling:g}")
    return number


def altered(current: Mapping[str, str], ops: list[Op], *, replace: bool = False) -> dict[str, str]:
    """One resource's dynamic settings ("" or a node's) after ``ops``; ConfigError for what Kafka
    refuses (nothing is applied then)."""
    check_ops(ops)
    static = sorted(name[:100] for name, _, _ in ops if name not in DYNAMIC)
    if static:
        raise ConfigError("invalid_request", f"Cannot update these configs dynamically: {static} (kcoord changes "
                                             f"only {', '.join(sorted(DYNAMIC))} on a running node)")
    out: dict[str, str] = {} if replace else dict(current)
    for name, op, value in ops:
        if op in (APPEND, SUBTRACT):
            verb = "append" if op == APPEND else "subtract"
            raise ConfigError("invalid_config", f"Config value {verb} is not allowed for config key: {name}")
        if op == DELETE:
            out.pop(name, None)
        else:
            out[name] = str(parse(DYNAMIC[name], value or ""))  # as Kafka describes it once parsed
    return out


def effective(static: NodeConfig, cluster: Mapping[str, str], own: Mapping[str, str]) -> NodeConfig:
    """The node's settings with the cluster's dynamic values over its configuration's, and its own
    dynamic values over those."""
    changes: dict[str, int | float] = {}
    for layer in (cluster, own):
        for name, value in layer.items():
            key = DYNAMIC.get(name)
            if key is None:
                continue
            try:
                changes[key.field] = parse(key, value)
            except ConfigError:
                continue  # refused when set: only a hand-made record holds one
    return dataclasses.replace(static, **changes) if changes else static  # type: ignore[arg-type]
