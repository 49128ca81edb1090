"""A group's own configs (cluster/group_configs.py, folded by cluster/metadata_log.py, read by the
coordinator through coordinator/config.py): Kafka 4.4's keys, its refusals (unknown keys, values
that do not parse, values outside the node's bounds, a session not above the heartbeat interval,
APPEND and SUBTRACT), AlterConfigs' whole replacement, the record version an older node could not
read, compaction keeping them, and a group's session timeout and heartbeat interval taking effect
from its next heartbeat, clamped to the node's bounds."""

from __future__ import annotations

from typing import Any

import pytest

from cluster import group_configs as gc
from cluster.config import NodeConfig
from cluster.group_api import group_config
from cluster.metadata_log import (
    AlterGroupConfigs,
    InitCluster,
    RegisterEndpoints,
    compact_metadata,
    encode_change,
    fold_metadata,
    record_version,
    version_refusal,
)
from cluster.topic_configs import APPEND, DELETE, SET, SUBTRACT, ConfigError
from coordinator import commands as c
from coordinator.consumer_group.heartbeat_request import ConsumerHeartbeat
from tests.unit.harness import Harness

LIMITS = gc.node_limits(NodeConfig())
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


def test_set_and_delete_keep_what_was_written_and_alter_configs_replaces_the_whole_set() -> None:
    now = gc.altered({}, [(SESSION, SET, "50000"), (HEARTBEAT, SET, "6000")], LIMITS)
    assert now == {SESSION: "50000", HEARTBEAT: "6000"}
    now = gc.altered(now, [(SESSION, DELETE, None), ("share.isolation.level", SET, "read_committed")], LIMITS)
    assert now == {HEARTBEAT: "6000", "share.isolation.level": "read_committed"}
    assert gc.altered(now, [(SESSION, SET, "55000")], LIMITS, replace=True) == {SESSION: "55000"}
    assert gc.altered(now, [("share.auto.offset.reset", SET, "by_duration:PT1H")], LIMITS)[
        "share.auto.offset.reset"] == "by_duration:PT1H"


@pytest.mark.parametrize("ops, code", [
    ([(SESSION, SET, "44999")], "invalid_config"),  # below group.consumer.min.session.timeout.ms
    ([(SESSION, SET, "60001")], "invalid_config"),
    ([(HEARTBEAT, SET, "4999")], "invalid_config"),
    ([(HEARTBEAT, SET, "15001")], "invalid_config"),
    ([(SESSION, SET, "soon")], "invalid_config"),
    ([(SESSION, SET, "99999999999")], "invalid_config"),  # not an INT
    ([("consumer.sesion.timeout.ms", SET, "50000")], "invalid_config"),
    ([("retention.ms", SET, "1000")], "invalid_config"),  # a topic's key
    ([(HEARTBEAT, APPEND, "6000")], "invalid_config"),
    ([("streams.rack.aware.assignment.tags", SUBTRACT, "zone")], "invalid_config"),  # Kafka refuses it on a LIST too
    ([(HEARTBEAT, SET, None)], "invalid_request"),
    ([(HEARTBEAT, SET, "6000"), (HEARTBEAT, SET, "7000")], "invalid_request"),
    ([(HEARTBEAT, SET, "6000"), (SESSION, SET, "1")], "invalid_config"),  # refused whole
    ([("consumer.assignment.interval.ms", SET, "-1")], "invalid_config"),
    ([("consumer.assignment.interval.ms", SET, "15001")], "invalid_config"),
    ([("consumer.assignor.offload.enable", SET, "maybe")], "invalid_config"),
    ([("share.record.lock.duration.ms", SET, "999")], "invalid_config"),
    ([("share.delivery.count.limit", SET, "11")], "invalid_config"),
    ([("streams.num.standby.replicas", SET, "3")], "invalid_config"),
    ([("share.isolation.level", SET, "read_some")], "invalid_config"),
    ([("share.auto.offset.reset", SET, "by_duration:an hour")], "invalid_config"),
    ([("streams.assignor.name", SET, "mine")], "invalid_config"),  # not one of group.streams.assignors
])
def test_what_kafka_refuses_is_refused_whole(ops: list[tuple[str, int, str | None]], code: str) -> None:
    with pytest.raises(ConfigError) as e:
        gc.altered({HEARTBEAT: "7000"}, ops, LIMITS)
    assert e.value.code == code, e.value


def test_a_session_must_outlast_the_heartbeat_interval_with_the_node_bounds_that_allow_both() -> None:
    wide = gc.limits(session_ms=10_000, min_session_ms=1_000, max_session_ms=60_000, heartbeat_ms=1_000,
                     min_heartbeat_ms=500, max_heartbeat_ms=15_000)
    with pytest.raises(ConfigError, match="must be greater than consumer.heartbeat.interval.ms"):
        gc.altered({}, [(SESSION, SET, "3000"), (HEARTBEAT, SET, "3000")], wide)
    with pytest.raises(ConfigError):
        gc.altered({HEARTBEAT: "5000"}, [(SESSION, SET, "4000")], wide)  # against the group's own interval
    assert gc.altered({}, [(SESSION, SET, "3000")], wide) == {SESSION: "3000"}  # against the node's 1 s


def test_an_override_from_wider_bounds_stays_and_is_clamped_where_it_is_used() -> None:
    wide = gc.limits(session_ms=10_000, min_session_ms=1_000, max_session_ms=60_000, heartbeat_ms=1_000,
                     min_heartbeat_ms=500, max_heartbeat_ms=15_000)
    kept = gc.altered({}, [(SESSION, SET, "3000")], wide)
    # the bounds narrowed since: another key may change, and the old value stays as written
    assert gc.altered(kept, [(HEARTBEAT, SET, "6000")], LIMITS) == {SESSION: "3000", HEARTBEAT: "6000"}
    assert gc.effective(kept, SESSION, LIMITS) == 45_000  # clamped to group.consumer.min.session.timeout.ms
    assert gc.effective(kept, SESSION, wide) == 3_000
    assert gc.effective({}, SESSION, LIMITS) == 45_000 and gc.effective({}, HEARTBEAT, LIMITS) == 5_000


def _log(*changes: Any) -> list[bytes]:
    return [encode_change(InitCluster("c", 3), "i", 0)] + [encode_change(ch, f"x{i}", 1)
                                                          for i, ch in enumerate(changes)]


def _alter(group: str, *ops: tuple[str, int, str | None], limits: Any = None) -> AlterGroupConfigs:
    lim = {k: list(v) for k, v in (limits or LIMITS).items()}
    return AlterGroupConfigs(group, [list(o) for o in ops], False, lim)


def test_alterations_fold_against_the_requesters_bounds_and_compaction_keeps_them() -> None:
    narrow = gc.limits(session_ms=45_000, min_session_ms=45_000, max_session_ms=50_000, heartbeat_ms=5_000,
                       min_heartbeat_ms=5_000, max_heartbeat_ms=15_000)
    log = _log(_alter("g", (SESSION, SET, "50000")), _alter("g", (HEARTBEAT, SET, "6000")),
               _alter("h", (SESSION, SET, "55000"), limits=narrow),  # past the bound its requester had
               _alter("k", (HEARTBEAT, SET, "6000")), _alter("k", (HEARTBEAT, DELETE, None)))
    state = fold_metadata(log)
    assert state["group_configs"] == {"g": {SESSION: "50000", HEARTBEAT: "6000"}}  # k has none left: forgotten
    results = state["results"]
    assert results["x2"][0] == "invalid_config" and results["x0"] == results["x1"] == ["none", None]
    compacted = compact_metadata(log)
    assert fold_metadata(compacted)["group_configs"] == state["group_configs"]


def test_a_group_config_record_waits_until_every_node_reads_it() -> None:
    assert record_version(_alter("g", (SESSION, SET, "50000"))) == 8
    state = fold_metadata([encode_change(InitCluster("c", 3), "i", 0),
                           encode_change(RegisterEndpoints(0, {}, "0.9", 8), "r0", 1),
                           encode_change(RegisterEndpoints(1, {}, "0.8", 7), "r1", 2)])
    refusal = version_refusal(state, [0, 1], 8)
    assert refusal is not None and "node 1 reads up to version 7" in refusal
    assert version_refusal(state, [0], 8) is None
    # a state record holding none is written at a version such a node reads; one holding some, at 8
    import msgpack

    assert msgpack.unpackb(compact_metadata(_log())[0])["v"] < 8
    assert msgpack.unpackb(compact_metadata(_log(_alter("g", (SESSION, SET, "50000"))))[0])["v"] == 8


def _beat(h: Harness, group: str, member: str, epoch: int) -> c.ConsumerGroupHeartbeatResponse:
    fields: dict[str, Any] = {"rebalance_timeout_ms": 5000, "subscribed_topic_names": ("foo",)} if epoch == 0 else {}
    beat = ConsumerHeartbeat(group, member, epoch, owned={} if epoch == 0 else None, **fields)
    resp = h.call(c.ConsumerGroupHeartbeatRequest(beat, {"foo": ("00" * 16, 2)}, "client", "/127.0.0.1"))
    assert isinstance(resp, c.ConsumerGroupHeartbeatResponse) and resp.error.name == "NONE", resp
    return resp


def test_a_groups_own_session_timeout_and_heartbeat_interval_apply_from_its_next_heartbeat() -> None:
    node = NodeConfig(group_consumer_session_timeout_ms=10_000, group_consumer_min_session_timeout_ms=1_000,
                      group_consumer_heartbeat_interval_ms=1_000, group_consumer_min_heartbeat_interval_ms=500)
    own: dict[str, dict[str, str]] = {}
    config = group_config(node, own.get)
    h = Harness(config)
    a = _beat(h, "fast", "a", 0)
    other = _beat(h, "slow", "b", 0)
    assert a.heartbeat_interval_ms == 1_000 and other.heartbeat_interval_ms == 1_000  # the node's
    own["fast"] = {SESSION: "3000", HEARTBEAT: "700"}
    a = _beat(h, "fast", "a", a.member_epoch)
    assert a.heartbeat_interval_ms == 700  # read at this heartbeat, not when the group was made
    assert _beat(h, "slow", "b", other.member_epoch).heartbeat_interval_ms == 1_000
    h.sleep(3_500)  # past fast's 3 s session, within slow's node-wide 10 s
    assert "a" not in h.shard.consumer_groups["fast"].members
    assert "b" in h.shard.consumer_groups["slow"].members
    own["slow"] = {SESSION: "999999"}  # past the node's bound (60 s): clamped
    assert config.consumer_of("slow").session_timeout_ms == 60_000


def test_a_node_setting_outside_its_bounds_is_refused_at_start_as_kafka_refuses_it() -> None:
    from cluster.config import ConfigError as SettingError

    with pytest.raises(SettingError, match="group_consumer_min_heartbeat_interval_ms"):
        NodeConfig(group_consumer_heartbeat_interval_ms=500).validate()
    with pytest.raises(SettingError, match="group_consumer_max_session_timeout_ms"):
        NodeConfig(group_consumer_min_session_timeout_ms=50_000, group_consumer_max_session_timeout_ms=46_000).validate()
    NodeConfig(group_consumer_heartbeat_interval_ms=500, group_consumer_min_heartbeat_interval_ms=500).validate()


def test_values_parse_as_javas_do_and_are_kept_as_kafka_describes_them() -> None:
    assert gc.altered({}, [(SESSION, SET, " +50000\t")], LIMITS) == {SESSION: "50000"}
    assert gc.altered({}, [("consumer.assignor.offload.enable", SET, "TRUE")], LIMITS) == {
        "consumer.assignor.offload.enable": "true"}
    assert gc.altered({}, [("share.isolation.level", SET, " read_committed ")], LIMITS) == {
        "share.isolation.level": "read_committed"}
    for odd in ("50_000", "\xa050000", "\U0001e4f5\U0001e4f0\U0001e4f0\U0001e4f0\U0001e4f0", "5e4", "0x10"):
        with pytest.raises(ConfigError):
            gc.altered({}, [(SESSION, SET, odd)], LIMITS)
    for duration in ("by_duration:Pxyz", "by_duration:PT-5S", "by_duration:P", "by_duration:PT"):
        with pytest.raises(ConfigError):
            gc.altered({}, [("share.auto.offset.reset", SET, duration)], LIMITS)
    assert gc.altered({}, [("share.auto.offset.reset", SET, "by_duration:P1DT2H30M")], LIMITS)


def test_deleting_one_of_the_pair_is_checked_too_and_a_clamped_pair_that_crosses_is_not_used() -> None:
    wide = gc.limits(session_ms=45_000, min_session_ms=45_000, max_session_ms=60_000, heartbeat_ms=5_000,
                     min_heartbeat_ms=5_000, max_heartbeat_ms=50_000)
    both = gc.altered({}, [(SESSION, SET, "60000"), (HEARTBEAT, SET, "50000")], wide)
    with pytest.raises(ConfigError, match="must be greater than"):
        gc.altered(both, [(SESSION, DELETE, None)], wide)  # the node's 45 s would be below 50 s
    own: dict[str, dict[str, str]] = {"g": both}
    node = NodeConfig(group_consumer_max_heartbeat_interval_ms=50_000, group_consumer_max_session_timeout_ms=45_000)
    assert group_config(node, own.get).consumer_of("g").heartbeat_interval_ms == 5_000  # 45 s <= 50 s: the node's


def test_a_default_group_resource_and_too_many_groups_are_refused_where_folded() -> None:
    state = fold_metadata(_log(_alter("", (SESSION, SET, "50000"))))
    assert state["group_configs"] == {} and state["results"]["x0"][0] == "invalid_request"
    full = {f"g{i}": {SESSION: "50000"} for i in range(gc.MAX_GROUPS)}
    from cluster.metadata_log import _alter_group_configs

    assert _alter_group_configs(full, _alter("one-more", (SESSION, SET, "50000")))[0] == "policy_violation"
    assert _alter_group_configs(full, _alter("g1", (HEARTBEAT, SET, "6000")))[0] == "none"  # one it has
