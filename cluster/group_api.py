"""The group coordinator's part of a node: builds its driver and registers the group APIs."""

from __future__ import annotations

from cluster.apis import consumer_groups
from cluster.apis.groups import GroupApi
from cluster.apis.groups import register as register_handlers
from cluster.config import NodeConfig
from cluster.coordinator_driver import CoordinatorDriver
from cluster.services import NodeServices
from coordinator.config import ConsumerConfig, GroupConfig


def group_config(node_config: NodeConfig) -> GroupConfig:
    cfg = GroupConfig(
        min_session_timeout_ms=node_config.group_min_session_timeout_ms,
        max_session_timeout_ms=node_config.group_max_session_timeout_ms,
        initial_rebalance_delay_ms=node_config.group_initial_rebalance_delay_ms,
        max_size=node_config.group_max_size,
        offsets_retention_ms=node_config.offsets_retention_minutes * 60_000,
        offsets_retention_check_interval_ms=node_config.offsets_retention_check_interval_ms,
        offset_metadata_max_bytes=node_config.offset_metadata_max_bytes,
        max_record_batch_bytes=node_config.message_max_bytes,
        consumer=ConsumerConfig(
            heartbeat_interval_ms=node_config.group_consumer_heartbeat_interval_ms,
            session_timeout_ms=node_config.group_consumer_session_timeout_ms,
            assignors=tuple(a.strip() for a in node_config.group_consumer_assignors.split(",")),
            max_size=node_config.group_consumer_max_size,
            migration_policy=node_config.group_consumer_migration_policy.lower()),
    )
    cfg.validate()
    return cfg


def register(node: NodeServices) -> GroupApi:
    # offsets.commit.timeout.ms is not configurable: Kafka's default, 5 s (the driver's)
    driver = CoordinatorDriver(group_config(node.config), node.topology.offsets_log, node.offsets_partitions, node.now_ms)
    api = register_handlers(node, driver)
    consumer_groups.register(node, api)
    return api
