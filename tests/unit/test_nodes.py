"""The cluster's nodes: the original ones (``peers``) and those added through the metadata log,
and which nodes a Raft group starts with (``cluster/nodes.py``, ``AddNode`` and ``RemoveNode`` in the fold)."""

from __future__ import annotations

from cluster.config import Peer
from cluster.metadata_log import (
    METADATA_VERSION,
    AddNode,
    CreateTopic,
    InitCluster,
    PromoteNode,
    RemoveNode,
    compact_metadata,
    encode_change,
    fold_metadata,
    record_version,
    version_refusal,
)
from cluster.nodes import (
    added_peers,
    known_peers,
    nodes_at,
    observer_ids,
    original_ids,
    removed_ids,
    topic_nodes,
)

PEERS = [Peer(0, "h0", 9092, 9192), Peer(1, "h1", 9092, 9192), Peer(2, "h2", 9092, 9192)]
JOINER = Peer(3, "h3", 9093, 9193)


def _fold(*changes: object) -> dict[str, object]:
    return fold_metadata([encode_change(c, f"c{i}", i) for i, c in enumerate(changes)])  # type: ignore[arg-type]


def test_an_added_node_is_recorded_once_and_a_clash_is_refused() -> None:
    state = _fold(InitCluster("id", 16), AddNode(3, "h3", 9093, 9193), AddNode(3, "h3", 9093, 9193),
                  AddNode(3, "other", 9093, 9193))
    assert added_peers(state) == [JOINER]
    results = list(state["results"].values())  # type: ignore[attr-defined]
    assert results[1] == ["none", None] and results[2] == ["none", None]
    assert results[3][0] == "duplicate_voter" and "joined already" in results[3][1]
    compacted = fold_metadata(compact_metadata([encode_change(c) for c in (InitCluster("id", 16),
                                                                             AddNode(3, "h3", 9093, 9193))]))
    assert added_peers(compacted) == [JOINER]


def test_groups_start_with_the_nodes_of_their_creation_and_a_joiner_counts_itself_in_none_before() -> None:
    state = _fold(InitCluster("id", 16), CreateTopic("before", 1, "t1"), AddNode(3, "h3", 9093, 9193),
                  CreateTopic("after", 1, "t2"))
    topics = state["topics"]  # type: ignore[index]
    assert "nodes_at" not in topics["before"] and topics["after"]["nodes_at"] == 1  # type: ignore[index]
    # an original node, its peers not edited, and the same node after an edit naming node 3
    for configured in (PEERS, [*PEERS, JOINER]):
        original = original_ids(configured, state, 0, joining=False)
        assert original == [0, 1, 2]
        assert nodes_at(original, state, 0) == [0, 1, 2] and nodes_at(original, state, 1) == [0, 1, 2, 3]
        assert known_peers(configured, state)[3] == JOINER
    # the joiner, before it knows it was added and after
    assert original_ids([*PEERS, JOINER], {}, 3, joining=True) == [0, 1, 2]
    original = original_ids([*PEERS, JOINER], state, 3, joining=True)
    assert nodes_at(original, state, 0) == [0, 1, 2] and nodes_at(original, state) == [0, 1, 2, 3]


def test_adding_a_node_waits_for_every_node_to_read_it() -> None:
    assert record_version(AddNode(3, "h", 1, 2)) == 4 and record_version(RemoveNode(3)) == 5
    assert record_version(AddNode(3, "h", 1, 2, observer=True)) == record_version(PromoteNode(3)) == 6 < METADATA_VERSION
    state = _fold(InitCluster("id", 16))
    assert "upgrade every node" in str(version_refusal(state, [0, 1, 2], 4))  # none registered: release 0.1


def test_the_log_records_the_nodes_the_cluster_was_formed_with_and_an_edited_list_is_caught() -> None:
    from cluster.metadata_log import SetVoter
    from cluster.nodes import unknown_configured

    formed = _fold(InitCluster("id", 16, [0, 1, 2]))
    assert formed["original_nodes"] == [0, 1, 2]
    # no node joined yet: peers says (a cluster may still be given a new list, all nodes stopped)
    assert original_ids(PEERS[:2], formed, 0, joining=False) == [0, 1]
    assert unknown_configured([*PEERS, JOINER], formed, 0, joining=False) == []
    joined = _fold(InitCluster("id", 16, [0, 1, 2]), AddNode(3, "h3", 9093, 9193))
    # peers edited to name a node neither original nor added: its groups would start otherwise
    five = [*PEERS, JOINER, Peer(4, "h4", 9094, 9194)]
    assert unknown_configured(five, joined, 0, joining=False) == [4]
    assert unknown_configured(five, joined, 4, joining=True) == []  # a joiner's own list
    assert unknown_configured([*PEERS, JOINER], joined, 0, joining=False) == []
    assert original_ids([*PEERS, JOINER], joined, 0, joining=False) == [0, 1, 2]
    # a cluster formed before InitCluster named them: its registered voters at the first addition
    older = _fold(InitCluster("id", 16), SetVoter(0, "d0"), SetVoter(1, "d1"), SetVoter(2, "d2"),
                  AddNode(3, "h3", 9093, 9193), AddNode(1, "h1", 9092, 9192))
    assert older["original_nodes"] == [0, 1, 2] and added_peers(older) == [JOINER]
    assert list(older["results"].values())[-1][0] == "duplicate_voter"  # type: ignore[attr-defined]
    assert fold_metadata(compact_metadata([encode_change(InitCluster("id", 16, [0, 1]))]))["original_nodes"] == [0, 1]


def test_the_nodes_are_kept_in_the_data_directory_for_the_next_start(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    import pytest

    from cluster.data_dir import DataDirError
    from cluster.nodes import FILE_NAME, load, save

    assert load(str(tmp_path)) == {}
    state = _fold(InitCluster("id", 16, [0, 1, 2]), AddNode(3, "h3", 9093, 9193))
    kept = save(str(tmp_path), state, {})
    assert load(str(tmp_path)) == kept and added_peers(kept) == [JOINER] and kept["original_nodes"] == [0, 1, 2]
    assert original_ids(PEERS, kept, 0, joining=False) == [0, 1, 2] and nodes_at([0, 1, 2], kept) == [0, 1, 2, 3]
    assert save(str(tmp_path), _fold(InitCluster("id", 16)), kept) == kept  # says nothing of the nodes: kept
    (tmp_path / FILE_NAME).write_text("{not json")
    assert load(str(tmp_path)) == {}  # unreadable: peers serve, as before
    (tmp_path / FILE_NAME).write_text(json.dumps({"format": 2}))
    with pytest.raises(DataDirError, match="newer release"):
        load(str(tmp_path))


def test_a_removed_node_leaves_the_nodes_and_the_groups_created_after_and_its_id_is_never_taken_again() -> None:
    state = _fold(InitCluster("id", 16, [0, 1, 2]), CreateTopic("before", 1, "t1"), AddNode(3, "h3", 9093, 9193),
                  CreateTopic("joined", 1, "t2"), RemoveNode(0), RemoveNode(0), CreateTopic("after", 1, "t3"),
                  AddNode(0, "h0", 9092, 9192), RemoveNode(7), AddNode(4, "h4", 9094, 9194), CreateTopic("last", 1, "t4"))
    results = list(state["results"].values())  # type: ignore[attr-defined]
    assert results[4] == ["none", None] and results[5][0] == "voter_not_found"  # removed already
    assert results[7][0] == "duplicate_voter" and "never taken again" in results[7][1]
    assert results[8][0] == "voter_not_found"
    assert removed_ids(state) == [0]
    original = original_ids(PEERS, state, 1, joining=False)
    assert original == [0, 1, 2] and nodes_at(original, state) == [1, 2, 3, 4]
    topics = state["topics"]  # type: ignore[index]
    # each group starts with the nodes of its topic's creation; the leaders take node 0 out after
    assert [topic_nodes(original, state, topics[t]) for t in ("before", "joined", "after", "last")] == [  # type: ignore[index]
        [0, 1, 2], [0, 1, 2, 3], [1, 2, 3], [1, 2, 3, 4]]
    compacted = fold_metadata(compact_metadata([encode_change(c, f"c{i}", i) for i, c in enumerate((
        InitCluster("id", 16, [0, 1, 2]), RemoveNode(2)))]))
    assert removed_ids(compacted) == [2] and nodes_at([0, 1, 2], compacted) == [0, 1]
    # a peers list still naming the removed node is no edit to refuse
    from cluster.nodes import unknown_configured
    assert unknown_configured(PEERS, state, 1, joining=False) == []


def test_the_last_node_is_not_removed() -> None:
    state = _fold(InitCluster("id", 16, [0, 1]), RemoveNode(0), RemoveNode(1))
    results = list(state["results"].values())  # type: ignore[attr-defined]
    assert results[1] == ["none", None] and results[2][0] == "invalid_request" and "last node" in results[2][1]
    assert nodes_at([0, 1], state) == [1]


def test_a_removal_naming_another_directory_than_the_voters_is_refused() -> None:
    from cluster.metadata_log import SetVoter

    state = _fold(InitCluster("id", 16, [0, 1, 2]), SetVoter(2, "d2"), RemoveNode(2, "other"), RemoveNode(2, "d2"))
    results = list(state["results"].values())  # type: ignore[attr-defined]
    assert results[2][0] == "voter_not_found" and "directory d2" in results[2][1]
    assert results[3] == ["none", None] and removed_ids(state) == [2]


def test_an_observer_votes_in_no_group_until_promoted_once_and_groups_created_meanwhile_start_without_it() -> None:
    from cluster.metadata_log import SetVoter

    state = _fold(InitCluster("id", 16, [0, 1, 2]), AddNode(3, "h3", 9093, 9193, observer=True), SetVoter(3, "d3"),
                  CreateTopic("meanwhile", 1, "t1"), PromoteNode(3, "other"), PromoteNode(9), PromoteNode(1),
                  PromoteNode(3, "d3"), PromoteNode(3), CreateTopic("after", 1, "t2"))
    results = list(state["results"].values())  # type: ignore[attr-defined]
    assert results[4][0] == "request_timed_out" and "directory d3" in results[4][1]  # another replica
    assert results[5][0] == "request_timed_out" and "not an observer" in results[5][1]  # unknown, as Kafka
    assert results[6][0] == results[8][0] == "duplicate_voter"  # an original node; node 3 once promoted
    assert results[7] == ["none", None] and observer_ids(state) == []
    original = original_ids(PEERS, state, 0, joining=False)
    topics = state["topics"]  # type: ignore[index]
    assert topic_nodes(original, state, topics["meanwhile"]) == [0, 1, 2]  # type: ignore[index]
    assert topic_nodes(original, state, topics["after"]) == [0, 1, 2, 3]  # type: ignore[index]
    # kept by compaction (a version-6 state record while an observer waits), and a removed observer goes
    changes = (InitCluster("id", 16, [0, 1, 2]), AddNode(3, "h3", 9093, 9193, observer=True))
    compacted = compact_metadata([encode_change(c, f"c{i}", i) for i, c in enumerate(changes)])
    assert observer_ids(fold_metadata(compacted)) == [3]
    import msgpack
    assert msgpack.unpackb(compacted[0])["v"] == 6
    assert observer_ids(_fold(*changes, RemoveNode(3))) == []


def test_the_last_voting_node_is_not_removed_and_an_observer_without_a_replica_is_not_promoted() -> None:
    from cluster.metadata_log import SetVoter

    state = _fold(InitCluster("id", 16, [0]), AddNode(1, "h1", 9093, 9193, observer=True), PromoteNode(1),
                  RemoveNode(0), SetVoter(1, "d1"), PromoteNode(1, "d1"), RemoveNode(0))
    results = list(state["results"].values())  # type: ignore[attr-defined]
    assert results[2][0] == "request_timed_out" and "not registered its replica" in results[2][1]
    assert results[3][0] == "invalid_request" and "last voting node" in results[3][1]
    assert results[5] == ["none", None] and results[6] == ["none", None] and removed_ids(state) == [0]


def test_a_state_record_naming_first_voters_is_one_version_5_reads() -> None:
    import msgpack

    from cluster.metadata_log import SetVoter

    changes = (InitCluster("id", 16, [0, 1, 2]), AddNode(3, "h3", 9093, 9193, observer=True), SetVoter(3, "d3"),
               CreateTopic("meanwhile", 1, "t1"), PromoteNode(3))
    state = _fold(*changes)
    assert state["topics"]["meanwhile"]["nodes"] == [0, 1, 2]  # type: ignore[index]
    compacted = compact_metadata([encode_change(c, f"c{i}", i) for i, c in enumerate(changes)])
    assert msgpack.unpackb(compacted[0], strict_map_key=False)["v"] == 5
