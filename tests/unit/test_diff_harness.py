"""The differential harness itself (tests/diff/harness.py): a planted difference in one error
code is reported with the field's path; what the server chooses (member ids, nodes, throttle
times, message wording) is not a difference."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from cluster.apis.common import resp_mod
from tests.diff.harness import Symbols, differences, flatten


def _join(error: ErrorCode, member: str, throttle_ms: int = 0, message: str | None = None) -> dict[str, object]:
    import datetime

    m = resp_mod(11, 5)
    resp = m.JoinGroupResponse(throttle_time=datetime.timedelta(milliseconds=throttle_ms), error_code=error,
                               generation_id=1, protocol_name="range", leader=member, member_id=member,
                               members=(m.JoinGroupResponseMember(member_id=member, group_instance_id=None,
                                                                  metadata=b"\x00"),))
    return flatten(resp, Symbols())


def test_a_planted_error_code_is_named_and_server_choices_are_not() -> None:
    kafka = _join(ErrorCode.none, "consumer-1-abc", throttle_ms=0)
    same = _join(ErrorCode.none, "rdkafka-zzz-123", throttle_ms=50)
    assert differences(kafka, same) == []
    planted = _join(ErrorCode.unknown_member_id, "rdkafka-zzz-123")
    assert differences(kafka, planted) == [("error_code", "none", "unknown_member_id")]
