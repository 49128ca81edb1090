"""A node's dynamic settings (cluster/broker_configs.py, folded by cluster/metadata_log.py): the
log defaults Kafka lets a running cluster change, Kafka's refusals for a BROKER resource (a
setting that is not dynamic or a value out of range: INVALID_REQUEST; APPEND: INVALID_CONFIG), a
name kcoord does not read refused rather than kept, the node's own value over the cluster's over
its configuration, and every open partition taking the new defaults unless its topic has its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster import broker_configs as bc
from cluster.config import NodeConfig
from cluster.data_plane import PartitionStore
from cluster.metadata_log import (
    AlterBrokerConfigs,
    InitCluster,
    compact_metadata,
    encode_change,
    fold_metadata,
)
from cluster.topic_configs import APPEND, DELETE, SET, ConfigError


def test_set_and_delete_and_replace() -> None:
    now = bc.altered({}, [("log.retention.ms", SET, " 3600000"), ("log.roll.ms", SET, "300")])
    assert now == {"log.retention.ms": "3600000", "log.roll.ms": "300"}  # kept as Kafka describes it
    assert bc.altered(now, [("log.retention.ms", DELETE, None)]) == {"log.roll.ms": "300"}
    assert bc.altered(now, [("log.roll.ms", SET, "300")], replace=True) == {"log.roll.ms": "300"}
    assert bc.altered({}, [("log.retention.bytes", SET, "-2")]) == {"log.retention.bytes": "-2"}  # Kafka takes it


@pytest.mark.parametrize("ops, code", [
    ([("log.retention.check.interval.ms", SET, "1000")], "invalid_request"),  # not dynamic
    ([("log.retention.hours", SET, "1")], "invalid_request"),  # dynamic in Kafka, not a kcoord setting
    ([("custom.plugin.setting", SET, "x")], "invalid_request"),  # Kafka keeps it; nothing here would read it
    ([("x" * 4_000_000, SET, "1")], "invalid_request"),  # a long name is not kept either
    ([("message.max.bytes", SET, "2000")], "invalid_request"),  # dynamic in Kafka, not here yet
    ([("log.segment.bytes", SET, "1000")], "invalid_request"),  # Kafka 4's floor is 1 MiB
    ([("log.cleaner.min.cleanable.ratio", SET, "2")], "invalid_request"),
    ([("log.cleaner.min.cleanable.ratio", SET, "nan")], "invalid_request"),
    ([("log.retention.ms", SET, "soon")], "invalid_request"),
    ([("log.retention.ms", SET, str(2**63))], "invalid_request"),
    ([("log.roll.ms", SET, "0")], "invalid_request"),
    ([("log.retention.ms", APPEND, "1")], "invalid_config"),
    ([("log.retention.ms", SET, None)], "invalid_request"),
    ([("log.retention.ms", SET, "1"), ("log.retention.ms", DELETE, None)], "invalid_request"),
])
def test_what_kafka_refuses_on_a_broker_resource(ops: list[tuple[str, int, str | None]], code: str) -> None:
    with pytest.raises(ConfigError) as e:
        bc.altered({"log.retention.ms": "1000"}, ops)
    assert e.value.code == code, e.value


def test_the_nodes_own_value_over_the_clusters_over_its_configuration() -> None:
    static = NodeConfig(log_retention_ms=5000, log_segment_bytes=4096)
    cfg = bc.effective(static, {"log.retention.ms": "1500", "log.roll.ms": "300"}, {"log.retention.ms": "9000"})
    assert (cfg.log_retention_ms, cfg.log_roll_ms, cfg.log_segment_bytes) == (9000, 300, 4096)
    assert bc.effective(static, {}, {}) is static
    assert bc.effective(static, {"log.cleaner.min.cleanable.ratio": "0.25"}, {}).log_cleaner_min_cleanable_ratio == 0.25
    assert bc.effective(static, {"log.retention.ms": "garbage"}, {}).log_retention_ms == 5000  # a hand-made record


def test_changes_fold_alike_everywhere_and_compaction_keeps_them() -> None:
    log = [encode_change(InitCluster("c", 3), "i", 0),
           encode_change(AlterBrokerConfigs("", [["log.retention.ms", SET, "1500"]]), "a", 1),
           encode_change(AlterBrokerConfigs("1", [["log.roll.ms", SET, "0"]]), "b", 2),  # refused where folded
           encode_change(AlterBrokerConfigs("2", [["log.roll.ms", SET, "300"]]), "c", 3),
           encode_change(AlterBrokerConfigs("2", [["log.roll.ms", DELETE, None]]), "d", 4)]
    state = fold_metadata(log)
    assert state["broker_configs"] == {"": {"log.retention.ms": "1500"}}
    assert state["results"]["b"][0] == "invalid_request" and state["results"]["a"] == ["none", None]
    assert fold_metadata(compact_metadata(log))["broker_configs"] == state["broker_configs"]


def test_open_partitions_take_the_new_defaults_unless_their_topic_has_its_own(tmp_path: Path) -> None:
    store = PartitionStore(str(tmp_path), NodeConfig())
    plain = store.open("plain", 0, {})
    own = store.open("own", 0, {"retention.ms": "-1"})
    store.reconfigure_defaults(bc.effective(NodeConfig(), {"log.retention.ms": "1500", "log.roll.ms": "300"}, {}),
                               {"plain": {}, "own": {"retention.ms": "-1"}})
    assert plain.data.retention_ms == 1500 and own.data.retention_ms == -1
    assert store.open("later", 0, {}).data.retention_ms == 1500  # opened after: the new defaults too
    for p in store.all():
        p.close()
