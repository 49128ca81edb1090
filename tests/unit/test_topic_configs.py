"""Altering a topic (cluster/topic_configs.py, folded by cluster/metadata_log.py and applied by
cluster/data_plane.py): Kafka's IncrementalAlterConfigs operations and refusals, AlterConfigs'
whole replacement, alterations that meet in the log, the new settings holding on an open
partition; and partition increases (CreatePartitions) as the log folds them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.config import load_config
from cluster.data_plane import PartitionStore
from cluster.metadata_log import (
    AlterTopicConfigs,
    CreatePartitions,
    CreateTopic,
    InitCluster,
    encode_change,
    fold_metadata,
    partition_slot,
)
from cluster.topic_configs import APPEND, DELETE, SET, SUBTRACT, ConfigError, altered
from tests.unit.test_data_log import put

MAX = 1_048_588


def test_set_delete_append_and_subtract_as_kafka_does() -> None:
    base = {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert altered(base, [("retention.ms", SET, "2000")], replace=False, message_max_bytes=MAX) == {
        "retention.ms": "2000", "cleanup.policy": "compact"}
    assert altered(base, [("retention.ms", DELETE, None)], replace=False, message_max_bytes=MAX) == {
        "cleanup.policy": "compact"}
    assert altered(base, [("segment.bytes", DELETE, None)], replace=False, message_max_bytes=MAX) == base
    # APPEND skips what the list holds; a key without an override starts from Kafka's default
    assert altered(base, [("cleanup.policy", APPEND, "delete,compact")], replace=False,
                   message_max_bytes=MAX)["cleanup.policy"] == "compact,delete"
    assert altered({}, [("cleanup.policy", APPEND, "compact")], replace=False,
                   message_max_bytes=MAX)["cleanup.policy"] == "delete,compact"
    assert altered({"cleanup.policy": "compact,delete"}, [("cleanup.policy", SUBTRACT, "delete")], replace=False,
                   message_max_bytes=MAX)["cleanup.policy"] == "compact"
    # AlterConfigs: the given keys are the whole new set
    assert altered(base, [("retention.bytes", SET, "10")], replace=True, message_max_bytes=MAX) == {
        "retention.bytes": "10"}


@pytest.mark.parametrize(("ops", "code"), [
    ([("retention.ms", SET, "1"), ("retention.ms", DELETE, None)], "invalid_request"),  # a key twice
    ([("retention.ms", SET, None)], "invalid_request"),  # no value to set
    ([("retention.ms", 9, "1")], "invalid_request"),  # no such operation
    ([("no.such.config", SET, "1")], "invalid_config"),
    ([("no.such.config", DELETE, None)], "invalid_config"),
    ([("retention.ms", SET, "soon")], "invalid_config"),
    ([("retention.ms", SET, "-2")], "invalid_config"),
    ([("retention.ms", APPEND, "5")], "invalid_config"),  # not a list
    ([("cleanup.policy", SET, "shred")], "invalid_config"),
    ([("cleanup.policy", SUBTRACT, "delete")], "invalid_config"),  # leaves an empty policy
    ([("max.message.bytes", SET, str(MAX + 1))], "invalid_config"),  # past the node's message.max.bytes
])
def test_what_kafka_refuses_is_refused_whole(ops: list[tuple[str, int, str | None]], code: str) -> None:
    with pytest.raises(ConfigError) as e:
        altered({"retention.ms": "1000"}, ops, replace=False, message_max_bytes=MAX)
    assert e.value.code == code, e.value


def _log(*changes: object) -> list[bytes]:
    out = [encode_change(InitCluster("c", 3), "i", 0)]
    out += [encode_change(c, f"x{i}", 1) for i, c in enumerate(changes)]  # type: ignore[arg-type]
    return out


def test_two_alterations_of_one_topic_both_take_effect_where_they_are_folded() -> None:
    # both requesters saw {retention.ms: 1000}; each names only its own key, so neither undoes the other
    state = fold_metadata(_log(CreateTopic("t", 1, "id-1", {"retention.ms": "1000"}),
                               AlterTopicConfigs("t", "id-1", [["retention.ms", SET, "5000"]], False, MAX),
                               AlterTopicConfigs("t", "id-1", [["cleanup.policy", SET, "compact"]], False, MAX)))
    assert state["topics"]["t"]["configs"] == {"retention.ms": "5000", "cleanup.policy": "compact"}
    assert list(state["results"].values())[-2:] == [["none", None], ["none", None]]


def test_a_refused_or_stale_alteration_changes_nothing_and_says_why() -> None:
    state = fold_metadata(_log(CreateTopic("t", 1, "id-1", {"retention.ms": "1000"}),
                               # valid where it was asked, past the bound its requester wrote in
                               AlterTopicConfigs("t", "id-1", [["max.message.bytes", SET, "2000"]], False, 1000),
                               # for an earlier topic of that name
                               AlterTopicConfigs("t", "id-0", [["retention.ms", SET, "7"]], False, MAX)))
    assert state["topics"]["t"]["configs"] == {"retention.ms": "1000"}
    refused, stale = list(state["results"].values())[-2:]
    assert refused[0] == "invalid_config" and "max.message.bytes" in refused[1]
    assert stale[0] == "unknown_topic_or_partition"


def test_new_settings_hold_on_an_open_partition(tmp_path: Path) -> None:
    cfg = load_config(None, env={}, overrides={"data_dir": str(tmp_path)})
    store = PartitionStore(str(tmp_path), cfg)
    part = store.open("t", 0, {"segment.bytes": "1024", "cleanup.policy": "compact", "retention.ms": "5000"})
    for i in range(30):
        put(part.data, 1, ts=1_000 + i, size=100)  # from 1970: past any retention
    segments = part.data.segment_count
    assert store.enforce_retention() == 0  # compact only: kept
    store.reconfigure("t", {"segment.bytes": "1024", "cleanup.policy": "compact,delete", "retention.ms": "5000",
                            "max.message.bytes": "4096"})
    assert part.max_message_bytes == 4096
    assert store.enforce_retention() > 0 and part.data.segment_count < segments
    assert part.data.log_end_offset == 30


def test_new_partitions_take_fresh_slots_and_the_first_keep_theirs() -> None:
    # "t" (slots 17-18 after the 16 offsets partitions) grows to 4, then "u" is created, then "t"
    # grows to 5: every partition keeps one slot for good, no two share one
    state = fold_metadata(_log(CreateTopic("t", 2, "id-t"), CreatePartitions("t", "id-t", 4, 100),
                               CreateTopic("u", 1, "id-u"), CreatePartitions("t", "id-t", 5, 100)))
    t = state["topics"]["t"]
    slots = [partition_slot(t, p) for p in range(t["partitions"])]
    assert t["partitions"] == 5 and slots[:2] == [t["slot"], t["slot"] + 1]
    every = slots + [partition_slot(state["topics"]["u"], 0)]
    assert len(set(every)) == len(every) and state["next_slot"] == max(every) + 1


def test_a_partition_increase_that_is_no_longer_one_or_passes_the_bound_is_refused() -> None:
    # two requesters both saw 2 partitions and asked for 3: the second is no increase any more
    state = fold_metadata(_log(CreateTopic("t", 2, "id-t"), CreatePartitions("t", "id-t", 3, 100),
                               CreatePartitions("t", "id-t", 3, 100), CreatePartitions("t", "id-t", 50, 10),
                               CreatePartitions("t", "id-0", 9, 100)))
    assert state["topics"]["t"]["partitions"] == 3
    *_, again, too_many, stale = list(state["results"].values())
    assert again[0] == "invalid_partitions" and too_many[0] == "policy_violation"
    assert stale[0] == "unknown_topic_or_partition"
