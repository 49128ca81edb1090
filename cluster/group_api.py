"""The group coordinator's part of a node: builds its driver and registers the group APIs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from cluster import share_fetch
from cluster.apis import consumer_groups, share_groups
from cluster.apis.groups import GroupApi
from cluster.apis.groups import register as register_handlers
from cluster.config import NodeConfig
from cluster.coordinator_driver import CoordinatorDriver
from cluster.group_configs import effective, node_limits
from cluster.services import NodeServices
from coordinator.config import ConsumerConfig, GroupConfig, ShareConfig

SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


def group_config(node_config: NodeConfig,
                 overrides: Callable[[str], Mapping[str, str] | None] = lambda group_id: None) -> GroupConfig:
    """The coordinator's settings from the node's; ``overrides``: a group's own configs (the
    cluster's replicated ones), which set its session timeout and heartbeat interval within the
    node's bounds."""
    lim = node_limits(node_config)

    def consumer_of(group_id: str) -> ConsumerConfig | None:
        own = overrides(group_id)
        if not own or (SESSION not in own and HEARTBEAT not in own):
            return None
        session, heartbeat = effective(own, SESSION, lim), effective(own, HEARTBEAT, lim)
        if session <= heartbeat:  # clamped to bounds narrowed since: members would be fenced between beats
            return None
        return dataclasses.replace(cfg.consumer, session_timeout_ms=session, heartbeat_interval_ms=heartbeat)

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
        share=ShareConfig(heartbeat_interval_ms=node_config.group_share_heartbeat_interval_ms,
                          session_timeout_ms=node_config.group_share_session_timeout_ms,
                          max_size=node_config.group_share_max_size),
        group_consumer=consumer_of,
    )
    cfg.validate()
    return cfg


def register(node: NodeServices) -> GroupApi:
    # offsets.commit.timeout.ms is not configurable: Kafka's default, 5 s (the driver's)
    metadata = node.metadata
    config = group_config(node.config, lambda group_id: metadata.group_configs.get(group_id))
    driver = CoordinatorDriver(config, node.topology.offsets_log, node.offsets_partitions, node.now_ms)
    api = register_handlers(node, driver)
    consumer = consumer_groups.register(node, api)
    share_groups.register(node, consumer, node.config.group_share_enable)
    api.companions.append(share_fetch.register(node, api, node.config.group_share_enable))
    return api
