"""A topic's config overrides after an alteration, as Kafka computes them (``ConfigAdminManager``):
IncrementalAlterConfigs' SET, DELETE, APPEND and SUBTRACT per key, or AlterConfigs' whole new set.

Pure, so the requesting node (for its early answer and ``validate_only``) and every node folding
the committed change (``cluster/metadata_log.py``) compute the same overrides from the same ones.
"""

from __future__ import annotations

from cluster.metadata import NUMERIC_TOPIC_CONFIGS, OTHER_TOPIC_CONFIGS, validate_topic_config

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OPERATIONS = (SET, DELETE, APPEND, SUBTRACT)
# The LIST-typed topic configs (APPEND and SUBTRACT apply to these only) and their Kafka defaults.
LIST_DEFAULTS = {"cleanup.policy": "delete", "follower.replication.throttled.replicas": "",
                 "leader.replication.throttled.replicas": ""}

Op = tuple[str, int, str | None]  # (key, operation, value)


class ConfigError(ValueError):
    """An alteration Kafka refuses: ``code`` is "invalid_config" or "invalid_request"."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _items(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def check_ops(ops: list[Op]) -> None:
    """The request's own shape: each key once, a value wherever the operation needs one."""
    seen: set[str] = set()
    for key, op, value in ops:
        if key in seen:
            raise ConfigError("invalid_request", f"Error due to duplicate config keys: {key}")
        seen.add(key)
        if op not in OPERATIONS:
            raise ConfigError("invalid_request", f"Unknown config operation {op} for config key: {key}")
        if value is None and op != DELETE:
            raise ConfigError("invalid_request", f"Null value not supported for : {key}")


def altered(current: dict[str, str], ops: list[Op], *, replace: bool, message_max_bytes: int) -> dict[str, str]:
    """The overrides after ``ops`` (``replace``: AlterConfigs, the ops are the whole new set of
    SETs; ``message_max_bytes``: the bound ``max.message.bytes`` may not pass). Raises
    ConfigError for what Kafka refuses; nothing is applied then."""
    check_ops(ops)
    out: dict[str, str] = {} if replace else dict(current)
    for key, op, value in ops:
        if key not in NUMERIC_TOPIC_CONFIGS and key not in OTHER_TOPIC_CONFIGS:
            raise ConfigError("invalid_config", f"Unknown topic config name: {key}")
        if op in (APPEND, SUBTRACT) and key not in LIST_DEFAULTS:
            verb = "append" if op == APPEND else "subtract"
            raise ConfigError("invalid_config", f"Config value {verb} is not allowed for config key: {key}")
        if op == DELETE:
            out.pop(key, None)
        elif op == SET:
            out[key] = value or ""
        else:
            now = _items(out.get(key, LIST_DEFAULTS[key]))
            change = _items(value)
            items = now + [v for v in change if v not in now] if op == APPEND else [v for v in now if v not in change]
            out[key] = ",".join(items)
    for key, value in out.items():
        if current.get(key) == value and not replace:
            continue  # an override the topic has already: it stays, valid or not by today's rules
        problem = validate_topic_config(key, value, message_max_bytes=message_max_bytes)
        if problem is not None:
            raise ConfigError("invalid_config", problem)
    return out
