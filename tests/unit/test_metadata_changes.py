"""Metadata changes are applied at most once, and say what they meant: a copy of a change
resubmitted after a leader change (its first copy had committed all the same) used to apply
again, and a delete removed whatever topic held the name when it applied. A client's delete could
thus remove a topic created again since, with its acknowledged records, or bring back an ACL or a
SCRAM credential deleted meanwhile. DeleteAcls filters match where they are applied, on the
committed ACLs, not on the requesting node's copy (which may not hold an ACL just created)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from cluster.metadata_log import (
    CHANGES_KEPT,
    METADATA_VERSION,
    WRITES,
    AlterTopicConfigs,
    CreatePartitions,
    CreateTopic,
    MetadataVersionError,
    compact_metadata,
    encode_change,
    fold_metadata,
)
from cluster.metadata_log import metadata_op as _op

INIT = _op(op="init", cluster_id="c", n=4)
READ_T = [2, "t", 3, "User:alice", "*", 3, 3]  # ALLOW alice READ on topic t (literal)
WRITE_T = [2, "t", 3, "User:bob", "*", 4, 3]  # ALLOW bob WRITE on topic t
ALICE_OLD = ["alice", 2, "01", "aa" * 64, "bb" * 64, 4096]  # SCRAM-SHA-512, the old password
ALICE_NEW = ["alice", 2, "02", "cc" * 64, "dd" * 64, 4096]
ALICE_GONE = ["alice", 2, "", "", "", 0]  # deleted


def change(kind: str, change_id: str, seen: int = 0, **fields: Any) -> bytes:
    """An entry as ``RaftCluster._change`` writes it (``seen``: changes its requester had seen)."""
    return _op(op=kind, id=change_id, seen=seen, **fields)


def create(name: str, topic_id: str, change_id: str) -> bytes:
    return change("create", change_id, name=name, partitions=1, configs={}, topic_id=topic_id, max_partitions=100)


def topic_ids(state: dict[str, Any]) -> dict[str, str]:
    return {name: t["topic_id"] for name, t in state["topics"].items()}


def test_a_change_applied_twice_takes_effect_once_and_compaction_remembers_it() -> None:
    """A creation committed, then resubmitted after a leader change; T was deleted between the two
    copies: the second copy used to create T again."""
    ops = [INIT, create("T", "tid-1", "c1"), change("delete", "d1", name="T", topic_id="tid-1")]
    again = create("T", "tid-1", "c1")
    assert fold_metadata([*ops, again])["topics"] == {}
    assert fold_metadata([*compact_metadata(ops), again])["topics"] == {}  # the ids survive compaction
    assert fold_metadata([*compact_metadata([*ops, again])])["topics"] == {}


def test_a_delete_names_the_topic_it_meant_and_leaves_a_new_one_of_that_name() -> None:
    """Client A's delete of T committed and was resubmitted; meanwhile client B created T again (and
    had records acknowledged on it): A's second copy, or a delete decided on a node that still saw
    the old T, used to delete B's topic."""
    ops = [INIT, create("T", "tid-1", "c1"), change("delete", "d1", name="T", topic_id="tid-1"),
           create("T", "tid-2", "c2")]
    state = fold_metadata([*ops, change("delete", "d1", name="T", topic_id="tid-1")])  # A's copy again
    assert topic_ids(state) == {"T": "tid-2"} and state["results"]["d1"] is True
    stale = fold_metadata([*ops, change("delete", "d2", 1, name="T", topic_id="tid-1")])  # a stale view of T
    assert topic_ids(stale) == {"T": "tid-2"} and stale["results"]["d2"] is None
    gone = fold_metadata([*ops, change("delete", "d3", 3, name="T", topic_id="tid-2")])
    assert gone["topics"] == {} and gone["results"]["d3"] is True
    # entries written before changes had ids delete by name and apply every copy, as they did
    old = [INIT, _op(op="create", name="T", partitions=1, configs={}, topic_id="tid-1"), _op(op="delete", name="T")]
    assert topic_ids(fold_metadata([*old, old[1]])) == {"T": "tid-1"}
    assert fold_metadata([*old, old[1], old[2]])["topics"] == {}


def test_a_stale_copy_brings_back_no_revoked_acl_nor_deleted_user_nor_old_password() -> None:
    acls = [INIT, change("acls", "a1", create=[READ_T]), change("acls", "a2", 1, filters=[[2, "t", 3, None, None, 3, 1]])]
    assert fold_metadata(acls)["acls"] == []
    assert fold_metadata([*acls, change("acls", "a1", create=[READ_T])])["acls"] == []
    users = [INIT, change("scram", "s1", rows=[ALICE_OLD]), change("scram", "s2", 1, rows=[ALICE_GONE])]
    assert fold_metadata([*users, change("scram", "s1", rows=[ALICE_OLD])])["scram"] == [ALICE_GONE]
    password = [INIT, change("scram", "s1", rows=[ALICE_OLD]), change("scram", "s3", 1, rows=[ALICE_NEW])]
    assert fold_metadata([*password, change("scram", "s1", rows=[ALICE_OLD])])["scram"] == [ALICE_NEW]


def test_a_delete_filter_matches_the_committed_acls_and_answers_what_it_removed() -> None:
    """CreateAcls through node 0, then at once DeleteAcls with a matching filter through node 1,
    which had not applied the creation yet (seen=0): the filter used to be matched on node 1's
    copy, which removed nothing and answered success with no matches."""
    ops = [INIT, change("acls", "a1", create=[READ_T, WRITE_T]),
           change("acls", "a2", 0, filters=[[2, "t", 3, None, None, 3, 1],  # topic t, READ, any principal
                                            [1, None, 1, "User:alice", None, 1, 1],  # anything of alice's
                                            [2, "other", 3, None, None, 1, 1]])]  # nothing
    state = fold_metadata(ops)
    assert state["acls"] == [WRITE_T]
    assert state["results"]["a2"] == [[READ_T], [READ_T], []]  # an ACL two filters match is listed twice
    assert fold_metadata(compact_metadata(ops))["results"]["a2"] == [[READ_T], [READ_T], []]


def test_ids_kept_are_bounded_and_a_copy_too_late_to_tell_is_refused() -> None:
    """Ids are kept for CHANGES_KEPT changes; a copy whose requester's view is further behind could
    be a duplicate of one forgotten, so it is refused (its requester answers a retriable error)."""
    ops = [INIT, change("acls", "a1", create=[READ_T]), change("acls", "a2", 1, filters=[[1, None, 1, None, None, 1, 1]])]
    ops += [change("endpoints", f"e{i}", 2 + i, node=0, listeners={}) for i in range(CHANGES_KEPT)]
    state = fold_metadata(ops)
    assert len(state["applied"]) == CHANGES_KEPT and "a1" not in state["applied"]
    late = fold_metadata([*compact_metadata(ops), change("acls", "a1", create=[READ_T])])
    assert late["acls"] == [] and "a1" in late["refused"] and "a1" not in late["applied"]
    fresh = fold_metadata([*compact_metadata(ops), change("acls", "a3", CHANGES_KEPT + 2, create=[READ_T])])
    assert fresh["acls"] == [READ_T]


def test_every_record_carries_its_version_and_one_from_before_versions_still_folds() -> None:
    ops = [INIT, _op(op="create", name="t", partitions=2, topic_id="id-t", configs={})]
    for payload in [*ops, *compact_metadata(ops)]:
        assert msgpack.unpackb(payload, raw=False)["v"] == WRITES
    old = [msgpack.packb({k: v for k, v in msgpack.unpackb(p, raw=False).items() if k != "v"}) for p in ops]
    assert fold_metadata(old)["topics"] == fold_metadata(ops)["topics"] != {}


def test_what_a_build_reading_version_1_would_misread_is_written_at_version_2() -> None:
    # the new kinds, and a state record holding a topic that grew (its later partitions' slots
    # are not the first ones'); a state record of topics that never grew stays at version 1
    grown = [INIT, encode_change(CreateTopic("t", 2, "id-t"), "c1", 1),
             encode_change(CreatePartitions("t", "id-t", 4, 100), "c2", 2)]
    versions = [msgpack.unpackb(p, raw=False)["v"] for p in [*grown[1:], *compact_metadata(grown)]]
    assert versions == [WRITES, 2, 2] and METADATA_VERSION == 9
    assert msgpack.unpackb(compact_metadata(grown[:2])[0], raw=False)["v"] == WRITES
    altered = encode_change(AlterTopicConfigs("t", "id-t", [["retention.ms", 0, "1"]], False, 1 << 20), "c3", 3)
    assert msgpack.unpackb(altered, raw=False)["v"] == 2


def test_a_record_of_a_later_version_or_an_unknown_kind_is_refused_not_skipped() -> None:
    later = msgpack.packb({"op": "create", "v": METADATA_VERSION + 1, "name": "t", "partitions": 1, "topic_id": "x"})
    with pytest.raises(MetadataVersionError, match="upgrade this node"):
        fold_metadata([INIT, later])
    with pytest.raises(MetadataVersionError, match="unknown kind"):
        fold_metadata([INIT, _op(op="rename", name="t")])


def test_a_compaction_that_meets_a_record_it_cannot_read_stops_the_node() -> None:
    from cluster.raft_cluster import _compact_metadata
    from replication import failstop

    later = msgpack.packb({"op": "create", "v": METADATA_VERSION + 1, "name": "t", "partitions": 1, "topic_id": "x"})
    stopped: list[tuple[str, int]] = []
    failstop.set_action(lambda component, reason, code: stopped.append((reason, code)))
    try:
        with pytest.raises(failstop.FailStopped):
            _compact_metadata([INIT, later])
    finally:
        failstop.reset_action()
    assert "upgrade this node" in stopped[0][0] and stopped[0][1] == failstop.EXIT_CORRUPT


def test_changes_are_typed_records_that_round_trip_and_old_records_read_with_their_defaults() -> None:
    from cluster.metadata_log import (
        ChangeAcls,
        CreateTopic,
        DeleteTopic,
        GrantPidBlock,
        InitCluster,
        RegisterEndpoints,
        decode_change,
        decode_op,
        encode_change,
    )

    changes = [InitCluster("c", 4), CreateTopic("t", 3, "id-t", {"retention.ms": "1"}, 4000),
               DeleteTopic("t", "id-t"), ChangeAcls(filters=[[2, "t", 3, "User:a", "*", 3, 3]]),
               RegisterEndpoints(1, {"CLIENTS": ["h", 9093]}), GrantPidBlock(2, "r-1")]
    for change in changes:
        assert decode_change(decode_op(encode_change(change, "id-1", 7))) == change
    old_create = msgpack.packb({"op": "create", "name": "t", "partitions": 2, "topic_id": "x"})
    assert decode_change(decode_op(old_create)) == CreateTopic("t", 2, "x", {}, None)
    assert decode_change(decode_op(msgpack.packb({"op": "delete", "name": "t"}))) == DeleteTopic("t", None)
    with pytest.raises(MetadataVersionError, match="malformed"):
        decode_change(decode_op(msgpack.packb({"op": "create", "name": "t"})))


def test_a_nodes_voting_replica_is_set_by_compare_and_set_and_survives_compaction() -> None:
    """SetVoter: the first registration of each node, then a replacement only from the replica
    its requester saw (two replicas of one node never both take the vote), kept by the state
    record, and written at version 3 (a build of version 2 would drop it)."""
    from cluster.metadata_log import SetVoter

    ops = [INIT, encode_change(SetVoter(0, "d0"), "v1", 0), encode_change(SetVoter(1, "d1"), "v2", 1),
           encode_change(SetVoter(1, "d1-new", "d1"), "v3", 2),
           encode_change(SetVoter(1, "d1-other", "d1"), "v4", 2),  # saw the old voter: refused
           encode_change(SetVoter(0, "d0"), "v5", 4)]  # a repeated registration: a no-op
    state = fold_metadata(ops)
    assert state["voters"] == {0: "d0", 1: "d1-new"}
    assert state["results"]["v3"] == ["none", None] and state["results"]["v4"][0] == "stale"
    assert state["results"]["v5"] == ["none", None]
    assert state["voters_version"] == 3 and state["retired"] == ["d1"]  # two registrations, one replacement
    compacted = compact_metadata(ops)
    assert msgpack.unpackb(compacted[0], raw=False, strict_map_key=False)["v"] == 3
    again = fold_metadata(compacted)
    assert (again["voters"], again["voters_version"], again["retired"]) == ({0: "d0", 1: "d1-new"}, 3, ["d1"])
    assert msgpack.unpackb(ops[1], raw=False)["v"] == 3
    assert fold_metadata([INIT])["voters"] == {}


def test_nodes_register_their_release_and_a_record_no_node_can_read_yet_is_refused() -> None:
    """Rolling upgrades: each node registers the release it runs and the highest record version
    it reads (fields an older node's decoder ignores: it reads the record as plain listeners), the
    registration survives compaction, and a record of a later version than some node reads is
    refused until that node is upgraded. A node that registered nothing reads up to version 3."""
    from cluster.metadata_log import (
        UNREGISTERED_READS,
        RegisterEndpoints,
        SetVoter,
        record_version,
        version_refusal,
    )

    ops = [INIT, encode_change(RegisterEndpoints(0, {}, "0.2.0", 5), "r0", 0),
           encode_change(RegisterEndpoints(1, {"CLIENTS": ["h", 9093]}, "0.2.0", 4), "r1", 1)]
    state = fold_metadata(ops)
    assert state["reads"] == {0: ["0.2.0", 5], 1: ["0.2.0", 4]}
    assert state["endpoints"] == {0: {}, 1: {"CLIENTS": ["h", 9093]}}
    assert fold_metadata(compact_metadata(ops))["reads"] == state["reads"]
    # What release 0.1 wrote (no release, no reads) registers listeners only.
    old = fold_metadata([*ops, _op(op="endpoints", id="r2", seen=2, node=2, listeners={})])
    assert 2 not in old["reads"] and old["endpoints"][2] == {}

    assert version_refusal(state, [0, 1], 4) is None
    refusal = version_refusal(state, [0, 1, 2], 4)  # node 2 registered nothing: it reads up to 3
    assert refusal is not None and "node 2 reads up to version 3" in refusal and "node 1" not in refusal
    assert UNREGISTERED_READS == 3
    refusal = version_refusal(state, [0, 1], 5)
    assert refusal is not None and "node 1 reads up to version 4" in refusal
    # Every record this build writes is readable by a node of release 0.1.
    assert record_version(SetVoter(0, "d")) == 3 <= UNREGISTERED_READS <= METADATA_VERSION
    assert version_refusal(fold_metadata([INIT]), [0, 1, 2], record_version(SetVoter(0, "d"))) is None


def test_a_node_rolled_back_to_a_release_before_registrations_counts_as_unregistered_again() -> None:
    from cluster.metadata_log import RegisterEndpoints, version_refusal

    ops = [INIT, encode_change(RegisterEndpoints(0, {}, "0.2.0", 5), "r0", 0),
           _op(op="endpoints", id="r1", seen=1, node=0, listeners={})]  # release 0.1 registering node 0
    state = fold_metadata(ops)
    assert 0 not in state["reads"]
    refusal = version_refusal(state, [0], 4)
    assert refusal is not None and "node 0 reads up to version 3" in refusal
