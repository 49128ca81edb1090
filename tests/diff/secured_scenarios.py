"""The differential scenarios of a secured pair of servers (``tests/diff/harness.py``): each side
has a SASL_PLAINTEXT listener with PLAIN users (``bench.kafka_peer.SASL_USERS``) and Kafka's
StandardAuthorizer, the PLAINTEXT listener's ANONYMOUS and ``admin`` its super users. SASL
handshakes and failures; a principal without an ACL, then with one, then without again."""

from __future__ import annotations

import datetime
from typing import Any

from cluster.apis.common import req_mod
from tests.diff.harness import Session, secured_scenario
from tests.diff.scenarios import NO_TOPIC_ID, _create_topic

MS = datetime.timedelta(milliseconds=1)
# Kafka's enum values (ResourceType, PatternType, AclOperation, AclPermissionType)
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, MATCH, ANY_PATTERN = 3, 2, 1
READ, DESCRIBE, ALL_OPS, ANY_OP = 3, 8, 2, 1
ALLOW, ANY_PERMISSION = 3, 1
ALICE = "User:alice"


def _metadata(s: Session, label: str, topic: str, via: Any, done: Any = None) -> Any:
    m = req_mod(3, 12)
    body = m.MetadataRequest(topics=(m.MetadataRequestTopic(topic_id=NO_TOPIC_ID, name=topic),),
                             allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    if done is None:
        return s.ask(label, 3, 12, body, via=via, only=lambda r: r.topics)
    return s.ask_settled(label, 3, 12, body, via=via, done=done)


def _find(s: Session, label: str, group: str, via: Any, done: Any = None) -> Any:
    m = req_mod(10, 4)
    body = m.FindCoordinatorRequest(key_type=0, coordinator_keys=(group,))
    return s.ask_settled(label, 10, 4, body, via=via, done=done or (lambda r: True))


def _commit(s: Session, label: str, group: str, topic: str, via: Any, allowed: bool = False) -> Any:
    """OffsetCommit as a simple consumer; ``allowed``: once the node asked has applied the ACLs
    (every node of either cluster does so a moment after the change is acknowledged)."""
    m = req_mod(8, 8)
    return s.ask_settled(label, 8, 8, m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(m.OffsetCommitRequestTopic(name=topic, partitions=(m.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=3, committed_leader_epoch=-1, committed_metadata=""),)),)), via=via,
        done=lambda r: not allowed or int(r.topics[0].partitions[0].error_code) == 0)


def _acl_filter(m: Any, cls: str, group: str) -> Any:
    return getattr(m, cls)(resource_type_filter=GROUP, resource_name_filter=group, pattern_type_filter=LITERAL,
                           principal_filter=ALICE, host_filter=None, operation=ANY_OP,
                           permission_type=ANY_PERMISSION)


@secured_scenario
def sasl_mechanisms_a_wrong_password_and_requests_before_authenticating(s: Session) -> None:
    assert s.sasl is not None
    shake, auth = req_mod(17, 1), req_mod(36, 2)
    s.ask("unknown_mechanism", 17, 1, shake.SaslHandshakeRequest(mechanism="SCRAM-SHA-999"), via=s.connect(s.sasl))
    wrong = s.connect(s.sasl)
    s.ask("handshake", 17, 1, shake.SaslHandshakeRequest(mechanism="PLAIN"), via=wrong)
    s.ask("wrong_password", 36, 2, auth.SaslAuthenticateRequest(auth_bytes=b"\0alice\0not-her-secret"), via=wrong)
    early = s.connect(s.sasl)
    versions = req_mod(18, 3)
    s.ask("api_versions_first", 18, 3, versions.ApiVersionsRequest(
        client_software_name="diff", client_software_version="1"), via=early, only=lambda r: r.error_code)
    _metadata(s, "metadata_before_authenticating", f"{s.name}-t", early)
    s.login("alice", "alice", "b-secret")


@secured_scenario
def a_principal_without_an_acl_then_with_one_then_without(s: Session) -> None:
    topic, group = f"{s.name}-t", f"{s.name}-g"
    _create_topic(s, topic)
    alice = s.login("alice", "alice", "b-secret")
    _metadata(s, "metadata_denied", topic, alice)
    _find(s, "find_coordinator_denied", group, alice)
    _commit(s, "commit_denied", group, topic, alice)
    create = req_mod(30, 3)
    s.ask("create_acls", 30, 3, create.CreateAclsRequest(creations=tuple(
        create.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=LITERAL, principal=ALICE,
                           host="*", operation=op, permission_type=ALLOW)
        for rtype, name, op in ((GROUP, group, READ), (TOPIC, topic, READ), (TOPIC, topic, DESCRIBE)))))
    describe = req_mod(29, 3)
    s.ask_settled("described", 29, 3, _acl_filter(describe, "DescribeAclsRequest", group),
                  done=lambda r: bool(r.resources))
    _metadata(s, "metadata_allowed", topic, alice, done=lambda r: int(r.topics[0].error_code) == 0)
    found = _find(s, "find_coordinator_allowed", group, alice,
                  done=lambda r: int(r.coordinators[0].error_code) == 0)
    c = found.coordinators[0]
    at_coordinator = s.login("alice_at_coordinator", "alice", "b-secret", f"{c.host}:{c.port}")
    _commit(s, "commit_allowed", group, topic, at_coordinator, allowed=True)
    s.ask("describe_acls_as_alice", 29, 3, _acl_filter(describe, "DescribeAclsRequest", group), via=alice)
    delete = req_mod(31, 3)
    s.ask("delete_acls", 31, 3, delete.DeleteAclsRequest(filters=(_acl_filter(delete, "DeleteAclsFilter", group),)))
    _find(s, "find_coordinator_denied_again", group, alice,
          done=lambda r: int(r.coordinators[0].error_code) != 0)


@secured_scenario
def acls_the_authorizer_refuses(s: Session) -> None:
    create = req_mod(30, 3)
    group = f"{s.name}-g"
    s.ask("create_match", 30, 3, create.CreateAclsRequest(creations=(
        create.AclCreation(resource_type=GROUP, resource_name=group, resource_pattern_type=MATCH, principal=ALICE,
                           host="*", operation=READ, permission_type=ALLOW),)))  # MATCH is a filter, not a pattern
    s.ask("create_bad", 30, 3, create.CreateAclsRequest(creations=(
        create.AclCreation(resource_type=GROUP, resource_name=group, resource_pattern_type=LITERAL,
                           principal="alice", host="*", operation=READ, permission_type=ALLOW),  # no principal type
        create.AclCreation(resource_type=CLUSTER, resource_name="not-kafka-cluster", resource_pattern_type=LITERAL,
                           principal=ALICE, host="*", operation=ALL_OPS, permission_type=ALLOW),
    )))
    alice = s.login("alice", "alice", "b-secret")
    s.ask("create_as_alice", 30, 3, create.CreateAclsRequest(creations=(
        create.AclCreation(resource_type=GROUP, resource_name=group, resource_pattern_type=LITERAL, principal=ALICE,
                           host="*", operation=READ, permission_type=ALLOW),)), via=alice)
    describe = req_mod(29, 3)
    s.ask("described_none", 29, 3, _acl_filter(describe, "DescribeAclsRequest", group))
