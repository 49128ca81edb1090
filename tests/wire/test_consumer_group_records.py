"""The consumer group records (coordinator/consumer_group/codec.py) byte for byte as Apache Kafka
4.4.0 writes them: its generated record classes, run from tests/wire/java/ConsumerGroupRecords.java
(the group coordinator's jars from Maven Central, cached outside the repository), serialize the same
records; then every record decodes back to itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from coordinator.consumer_group import records as r
from coordinator.consumer_group.codec import decode_key, decode_value, encode_key, encode_value
from tests.cluster.java_client import compile_program, maven_classpath

HERE = Path(__file__).resolve().parent
FOO = bytes(range(1, 17))
BAR = (-2).to_bytes(8, "big", signed=True) + (42).to_bytes(8, "big")


def records() -> list[tuple[r.ConsumerGroupKey, r.ConsumerGroupValue]]:
    """The records ConsumerGroupRecords.java builds, in its order."""
    member = r.MemberKey
    return [
        (r.GroupKey(r.GROUP_METADATA, "grp"), r.GroupEpochValue(7)),
        (r.GroupKey(r.GROUP_METADATA, "grp"), r.GroupEpochValue(8, -123456789)),
        (member(r.MEMBER_METADATA, "grp", "m-1"),
         r.MemberMetadataValue(None, "r1", "cli", "/127.0.0.1", ("foo", "bar"), None, 45000, "uniform")),
        (member(r.MEMBER_METADATA, "grp", "m-2"),
         r.MemberMetadataValue("i-2", None, "", "h", (), "fo.*", server_assignor="",  # Java's default
                               classic=r.ClassicMemberMetadata(10000, (r.ClassicProtocol("range", b"\x00\x01\x02"),)))),
        (r.GroupKey(r.TARGET_METADATA, "grp"), r.TargetEpochValue(8, 1700000000000)),
        (member(r.TARGET_MEMBER, "grp", "m-1"),
         r.TargetMemberValue((r.TopicPartitions(FOO, (0, 2)), r.TopicPartitions(BAR, ())))),
        (member(r.CURRENT_ASSIGNMENT, "grp", "m-1"),
         r.CurrentAssignmentValue(8, 7, 1, (r.TopicPartitions(FOO, (0,), (7,)), r.TopicPartitions(BAR, (1, 3), None)),
                                  (r.TopicPartitions(FOO, (2,), None),))),
    ]


@pytest.fixture(scope="module")
def kafka_bytes(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    java = shutil.which("java")
    assert java is not None, "this test needs Java 17 (java)"
    cp = maven_classpath("kafka-group-coordinator-4.4.0", [("org.apache.kafka", "kafka-group-coordinator", "4.4.0")])
    run_cp = compile_program(HERE / "java" / "ConsumerGroupRecords.java", tmp_path_factory.mktemp("java"), cp)
    out = subprocess.run([java, "-cp", run_cp, "ConsumerGroupRecords"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [tuple(x.split()) for x in out.stdout.splitlines() if x.strip()]
    return [(k, v) for k, v in lines]


def test_the_records_are_byte_for_byte_kafkas(kafka_bytes: list[tuple[str, str]]) -> None:
    ours = [(encode_key(k).hex(), encode_value(v).hex()) for k, v in records()]
    assert len(kafka_bytes) == len(ours)
    for i, (mine, theirs) in enumerate(zip(ours, kafka_bytes, strict=True)):
        assert mine == theirs, (i, records()[i])


def test_every_record_decodes_back_to_itself() -> None:
    for key, value in records():
        k = decode_key(encode_key(key))
        assert k == key
        got = decode_value(k.record_type, encode_value(value))
        if isinstance(value, r.MemberMetadataValue):  # names are written sorted
            value = r.MemberMetadataValue(**{**{f: getattr(value, f) for f in value.__slots__},
                                             "subscribed_topic_names": tuple(sorted(value.subscribed_topic_names))})
        assert got == value
