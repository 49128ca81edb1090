"""SCRAM users (cluster/security/credentials.py): the replicated credentials over the bootstrap ones,
and Kafka's rules for AlterUserScramCredentials (ScramControlManagerTest's cases by behaviour)."""

from __future__ import annotations

from pathlib import Path

from cluster.metadata import ScramRow, with_scram
from cluster.security.credentials import ScramUsers, Upsertion, plan
from cluster.security.scram import make_credential, salted_password

SHA256, SHA512 = 1, 2


def upsert(name: str, mechanism: int = SHA512, iterations: int = 4096, password: str = "pw") -> Upsertion:
    mech = "SCRAM-SHA-256" if mechanism == SHA256 else "SCRAM-SHA-512"  # any other code: an unknown one
    salt = b"0123456789abcdef0123456789"
    return Upsertion(name, mechanism, iterations, salt, salted_password(mech, password, salt, iterations))


def test_alter_nothing_gives_no_results() -> None:
    assert plan([], [], {}) == ({}, [])


def test_an_upsert_stores_keys_never_the_salted_password() -> None:
    u = upsert("alice")
    results, change = plan([], [u], {})
    assert results == {"alice": (0, None)}
    (row,) = change
    name, mechanism, salt, stored, server, iterations = row
    assert (name, mechanism, iterations) == ("alice", SHA512, 4096) and bytes.fromhex(salt) == u.salt
    assert u.salted_password.hex() not in row
    expected = make_credential("SCRAM-SHA-512", "pw", u.salt, 4096)
    assert (bytes.fromhex(stored), bytes.fromhex(server)) == (expected.stored_key, expected.server_key)


def test_kafka_validation_one_result_per_user() -> None:
    """Seven alterations, five users: each gets exactly one result (testAlterUnknownMechanism)."""
    results, change = plan(
        [("gone", SHA256), ("twice", SHA256), ("", SHA512)],
        [upsert("twice", SHA512), upsert("weird", 3), upsert("few", iterations=4095), upsert("ok", SHA256)],
        {"twice": {SHA256: 4096}})
    assert {u: code for u, (code, _) in results.items()} == {
        "gone": 91,  # deleting what does not exist
        "twice": 92,  # named twice, even for two mechanisms: refused whole
        "": 93,  # no name
        "weird": 33,  # unknown mechanism
        "few": 93,  # fewer than 4096 iterations
        "ok": 0}
    assert [r[0] for r in change] == ["ok"]
    assert plan([], [upsert("many", iterations=16385)], {})[0]["many"][0] == 93
    # in order, as Kafka: a user's first error stands; a second alteration after an accepted one is 92
    assert plan([("carol", SHA512)], [upsert("carol")], {})[0]["carol"][0] == 91
    assert plan([], [upsert("dave"), upsert("dave", SHA256)], {})[0]["dave"][0] == 92


def test_replicated_rows_win_over_bootstrap_and_a_deletion_hides_it() -> None:
    boot = {("alice", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "old"),
            ("alice", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "old")}
    stored: list[frozenset[ScramRow]] = [frozenset()]
    users = ScramUsers(boot, lambda: stored[0])
    assert users.lookup("alice", "SCRAM-SHA-512") is boot[("alice", "SCRAM-SHA-512")]
    assert users.held() == {"alice": {SHA256: 4096, SHA512: 4096}}
    _, change = plan([("alice", SHA256)], [], users.held())
    _, more = plan([], [upsert("alice", SHA512, 8192, "new"), upsert("bob")], users.held())  # a second request
    stored[0] = with_scram(with_scram(stored[0], change), more)
    assert users.lookup("alice", "SCRAM-SHA-256") is None  # deleted: the bootstrap one no longer counts
    new = users.lookup("alice", "SCRAM-SHA-512")
    assert new is not None and new.iterations == 8192 and new != boot[("alice", "SCRAM-SHA-512")]
    assert users.held() == {"alice": {SHA512: 8192}, "bob": {SHA512: 4096}}
    assert users.lookup("carol", "SCRAM-SHA-512") is None


ALICE_512: ScramRow = ("alice", 2, "73616c74", "aa" * 64, "bb" * 64, 4096)
BOB_256: ScramRow = ("bob", 1, "73616c74", "cc" * 32, "dd" * 32, 8192)


def test_the_metadata_log_folds_credentials_and_compaction_keeps_them() -> None:
    from cluster.metadata_log import compact_metadata, fold_metadata
    from cluster.metadata_log import metadata_op as _op

    ops = [_op(op="init", cluster_id="c", n=16), _op(op="scram", rows=[list(ALICE_512), list(BOB_256)]),
           _op(op="scram", rows=[["bob", 1, "", "", "", 0]])]  # bob's deleted: a tombstone row
    state = fold_metadata(ops)
    assert state["scram"] == [list(ALICE_512), ["bob", 1, "", "", "", 0]]
    assert fold_metadata(compact_metadata(ops))["scram"] == state["scram"]


def test_a_single_node_keeps_credentials_on_disk_for_its_owner_only(tmp_path: Path) -> None:
    import os

    from cluster.metadata import ClusterMetadata

    meta = ClusterMetadata(str(tmp_path), offsets_partitions=4)
    meta.alter_scram([ALICE_512, BOB_256])
    meta.alter_scram([("bob", 1, "", "", "", 0)])
    again = ClusterMetadata(str(tmp_path), offsets_partitions=4)
    assert again.scram == {ALICE_512, ("bob", 1, "", "", "", 0)}
    assert oct(os.stat(tmp_path / "cluster.json").st_mode)[-3:] == "600"  # salts and keys
