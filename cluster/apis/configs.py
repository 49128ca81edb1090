"""DescribeConfigs (32) v1–4: a topic's configs (its overrides, then the defaults it gets from
the node's settings or Kafka's), and a node's own settings under their Kafka names.

Kafka's rules (``ConfigHelper``): every key is returned when a resource names none; an entry's
source is its first synonym's (the topic override, then the broker setting it defaults from,
then Kafka's default); a password's value is null and marked sensitive; a BROKER resource names
the node asked (its id, its dynamic values first; or "" for the cluster-wide dynamic ones); a
GROUP resource, named or not, gets Kafka 4.4's group configs but its internal ones: the group's
own value (source GROUP_CONFIG), else the node setting it defaults from, else Kafka's default.
Broker entries are read-only but for the dynamic ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.broker_configs import DYNAMIC
from cluster.config import KAFKA_NAMES, NodeConfig
from cluster.dispatch import RequestContext
from cluster.group_configs import GROUP_KEYS
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.services import Catalog, Identity, Registers


class Needs(Registers, Identity, Catalog, Protocol):
    """What this module uses of its node (``cluster.services``)."""


API_KEY = 32
TOPIC, BROKER, GROUP = 2, 4, 32  # ConfigResource types
# ConfigSource
TOPIC_OVERRIDE, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC_BROKER, DEFAULT, GROUP_CONFIG = 1, 2, 3, 4, 5, 8
# ConfigType
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, PASSWORD = 1, 2, 3, 5, 6, 7, 9
LONG_MAX = str((1 << 63) - 1)


@dataclass(frozen=True, slots=True)
class TopicKey:
    name: str
    type: int
    default: str  # Kafka's, when no broker setting gives it
    broker: str | None = None  # the node setting (NodeConfig field) it defaults from


# The topic configs kcoord accepts (cluster/metadata.py), with Kafka 4.4's types and defaults.
TOPIC_KEYS = (
    TopicKey("cleanup.policy", LIST, "delete"),
    TopicKey("compression.gzip.level", INT, "-1"),
    TopicKey("compression.lz4.level", INT, "9"),
    TopicKey("compression.type", STRING, "producer"),
    TopicKey("compression.zstd.level", INT, "3"),
    TopicKey("delete.retention.ms", LONG, "86400000", "log_cleaner_delete_retention_ms"),
    TopicKey("errors.deadletterqueue.group.enable", BOOLEAN, "false"),
    TopicKey("file.delete.delay.ms", LONG, "60000"),
    TopicKey("flush.messages", LONG, LONG_MAX, "log_flush_interval_messages"),
    TopicKey("flush.ms", LONG, LONG_MAX, "log_flush_interval_ms"),
    TopicKey("follower.replication.throttled.replicas", LIST, ""),
    TopicKey("index.interval.bytes", INT, "4096"),
    TopicKey("leader.replication.throttled.replicas", LIST, ""),
    TopicKey("local.retention.bytes", LONG, "-2"),
    TopicKey("local.retention.ms", LONG, "-2"),
    TopicKey("max.compaction.lag.ms", LONG, LONG_MAX, "log_cleaner_max_compaction_lag_ms"),
    TopicKey("max.decompressed.message.bytes", INT, "2147483639"),
    TopicKey("max.message.bytes", INT, "1048588", "message_max_bytes"),
    TopicKey("message.timestamp.after.max.ms", LONG, "3600000"),
    TopicKey("message.timestamp.before.max.ms", LONG, LONG_MAX),
    TopicKey("message.timestamp.type", STRING, "CreateTime"),
    TopicKey("min.cleanable.dirty.ratio", DOUBLE, "0.5", "log_cleaner_min_cleanable_ratio"),
    TopicKey("min.compaction.lag.ms", LONG, "0", "log_cleaner_min_compaction_lag_ms"),
    TopicKey("min.insync.replicas", INT, "1"),
    TopicKey("preallocate", BOOLEAN, "false"),
    TopicKey("remote.copy.lag.bytes", LONG, "-1"),
    TopicKey("remote.copy.lag.ms", LONG, "0"),
    TopicKey("remote.log.copy.disable", BOOLEAN, "false"),
    TopicKey("remote.log.delete.on.disable", BOOLEAN, "false"),
    TopicKey("remote.storage.enable", BOOLEAN, "false"),
    TopicKey("retention.bytes", LONG, "-1", "log_retention_bytes"),
    TopicKey("retention.ms", LONG, "604800000", "log_retention_ms"),
    TopicKey("segment.bytes", INT, "1073741824", "log_segment_bytes"),
    TopicKey("segment.index.bytes", INT, "10485760"),
    TopicKey("segment.jitter.ms", LONG, "0"),
    TopicKey("segment.ms", LONG, "604800000", "log_roll_ms"),
    TopicKey("unclean.leader.election.enable", BOOLEAN, "false"),
)
_TYPES = {bool: BOOLEAN, int: LONG, float: DOUBLE, str: STRING}
_NODE_DEFAULTS = NodeConfig()


def _text(value: Any) -> str | None:
    if value is None:
        return None  # a setting with no value (Kafka's null)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


# Node settings where -1 means "never": a topic's flush.messages / flush.ms describe it as
# Long.MAX_VALUE (Kafka's topic defaults); the broker's own settings as Kafka's broker defaults
_NEVER = {"log_flush_interval_messages": LONG_MAX, "log_flush_interval_ms": None}


def _setting(config: NodeConfig, field: str, *, topic: bool = False) -> tuple[str | None, int]:
    """A node setting's value as Kafka writes it, and its source (set here, or the default)."""
    value = getattr(config, field)
    source = STATIC_BROKER if value != getattr(_NODE_DEFAULTS, field) else DEFAULT
    if field in _NEVER and isinstance(value, int) and value <= 0:
        return (LONG_MAX if topic else _NEVER[field]), source
    return _text(value), source


Entry = tuple[str, str | None, int, int, bool, list[tuple[str, str | None, int]]]
Synonym = tuple[str, str | None, int]


@dataclass(frozen=True, slots=True)
class Dynamic:
    """The node's dynamic settings (``cluster/broker_configs.py``): its own, and the cluster's."""

    own: dict[str, str]
    cluster: dict[str, str]


NO_DYNAMIC = Dynamic({}, {})


def _node_synonyms(config: NodeConfig, field: str, dynamic: Dynamic, *, topic: bool = False) -> list[Synonym]:
    """A node setting's values in Kafka's order: the node's dynamic one, the cluster's, then its
    configuration's (or the default)."""
    name = KAFKA_NAMES[field]
    out: list[Synonym] = []
    if name in DYNAMIC:
        out += [(name, layer[name], source) for layer, source in ((dynamic.own, DYNAMIC_BROKER),
                                                                  (dynamic.cluster, DYNAMIC_DEFAULT)) if name in layer]
    value, source = _setting(config, field, topic=topic)
    return [*out, (name, value, source)]


def topic_entries(config: NodeConfig, overrides: dict[str, str], dynamic: Dynamic = NO_DYNAMIC) -> list[Entry]:
    """(name, value, source, type, sensitive, synonyms) of every topic config, synonyms first
    the override, then the node's settings (dynamic, then configured), then Kafka's default."""
    out: list[Entry] = []
    for key in TOPIC_KEYS:
        synonyms: list[Synonym] = []
        if key.name in overrides:
            synonyms.append((key.name, overrides[key.name], TOPIC_OVERRIDE))
        if key.broker is not None:
            synonyms += _node_synonyms(config, key.broker, dynamic, topic=True)
        else:
            synonyms.append((key.name, key.default, DEFAULT))
        name, value, source = key.name, synonyms[0][1], synonyms[0][2]
        out.append((name, value, source, key.type, False, synonyms))
    return out


def group_entries(config: NodeConfig, overrides: dict[str, str]) -> list[Entry]:
    """(name, value, source, type, sensitive, synonyms) of every group config Kafka describes,
    synonyms first the group's own value, then the node setting, then Kafka's default."""
    out: list[Entry] = []
    for key in GROUP_KEYS:
        if key.internal:
            continue
        synonyms: list[tuple[str, str | None, int]] = []
        if key.name in overrides:
            synonyms.append((key.name, overrides[key.name], GROUP_CONFIG))
        if key.field is not None:
            value, source = _setting(config, key.field)
            synonyms.append((key.synonym or key.name, value, source))
        else:
            synonyms.append((key.synonym or key.name, key.default, DEFAULT))
        out.append((key.name, synonyms[0][1], synonyms[0][2], key.type, False, synonyms))
    return out


def broker_entries(config: NodeConfig, dynamic: Dynamic = NO_DYNAMIC) -> list[Entry]:
    """Every node setting that has a Kafka name, its dynamic values first; passwords and secrets
    hidden."""
    out: list[Entry] = []
    by_field = {f.name: f for f in dataclasses.fields(config)}
    for field, kafka in sorted(KAFKA_NAMES.items(), key=lambda kv: kv[1]):
        if field not in by_field:
            continue
        secret = "password" in kafka or "secret" in field
        kind = PASSWORD if secret else _TYPES.get(type(getattr(config, field)), LIST)
        synonyms = [(n, None if secret else v, s) for n, v, s in _node_synonyms(config, field, dynamic)]
        out.append((kafka, synonyms[0][1], synonyms[0][2], kind, secret, synonyms))
    return out


def cluster_entries(config: NodeConfig, dynamic: Dynamic) -> list[Entry]:
    """The cluster-wide dynamic settings (the BROKER resource named "")."""
    by_kafka = {kafka: field for field, kafka in KAFKA_NAMES.items()}
    return [(name, value, DYNAMIC_DEFAULT, _TYPES.get(type(getattr(config, by_kafka[name])), LIST), False,
             [(name, value, DYNAMIC_DEFAULT)]) for name, value in sorted(dynamic.cluster.items()) if name in DYNAMIC]


def dynamic_of(node: Needs) -> Dynamic:
    layers = node.metadata.broker_configs
    return Dynamic(layers.get(str(node.node_id), {}), layers.get("", {}))


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    return build(node, request, ctx=ctx)


def build(node: Needs, request: Any, *, error: ErrorCode | None = None,
          ctx: RequestContext | None = None) -> Any:
    v = version_of(request)
    m = resp_mod(API_KEY, v)
    results = []
    for res in request.resources:
        code, message, entries = _describe(node, res, ctx) if error is None else (error, None, [])
        wanted = set(res.configuration_keys) if res.configuration_keys is not None else None
        configs = tuple(
            mk(m.DescribeConfigsResourceResult, name=name, value=value,
               read_only=res.resource_type == BROKER and name not in DYNAMIC,
               config_source=source, is_sensitive=sensitive, config_type=kind, documentation=None,
               is_default=source == DEFAULT,
               synonyms=tuple(mk(m.DescribeConfigsSynonym, name=n, value=sv, source=s) for n, sv, s in synonyms)
               if request.include_synonyms else ())
            for name, value, source, kind, sensitive, synonyms in entries if wanted is None or name in wanted)
        results.append(mk(m.DescribeConfigsResult, error_code=code, error_message=message,
                          resource_type=res.resource_type, resource_name=res.resource_name, configs=configs))
    return mk(m.DescribeConfigsResponse, throttle_time=ZERO, results=tuple(results))


def _describe(node: Needs, res: Any, ctx: RequestContext | None) -> tuple[ErrorCode, str | None, list[Entry]]:
    def allowed(rtype: ResourceType, name: str) -> bool:
        return ctx is None or ctx.allowed(Operation.DESCRIBE_CONFIGS, rtype, name)

    if res.resource_type == TOPIC:
        if not allowed(ResourceType.TOPIC, res.resource_name):
            return ErrorCode.topic_authorization_failed, None, []
        topic = node.topic(res.resource_name)
        if topic is None and not node.is_internal_topic(res.resource_name):
            return ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.", []
        return ErrorCode.none, None, topic_entries(node.config, dict(topic.configs) if topic is not None else {},
                                                   dynamic_of(node))
    if res.resource_type == BROKER:
        if not allowed(ResourceType.CLUSTER, CLUSTER_NAME):
            return ErrorCode.cluster_authorization_failed, None, []
        if res.resource_name == "":
            return ErrorCode.none, None, cluster_entries(node.config, dynamic_of(node))
        if res.resource_name != str(node.node_id):
            return (ErrorCode.invalid_request, f"Unexpected broker id, expected {node.node_id} but received "
                    f"{res.resource_name}", [])
        return ErrorCode.none, None, broker_entries(node.config, dynamic_of(node))
    if res.resource_type == GROUP:
        if not allowed(ResourceType.GROUP, res.resource_name):
            return ErrorCode.group_authorization_failed, None, []
        return ErrorCode.none, None, group_entries(node.config, node.metadata.group_configs.get(res.resource_name, {}))
    return ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}", []


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 1, 4, handle, error_response=lambda req, code: build(node, req, error=code))
