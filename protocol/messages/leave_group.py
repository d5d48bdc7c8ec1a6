"""LeaveGroup: the declaration of every supported version."""

from kbroker.protocol.schema import api

LEAVE_GROUP = api(13, "LeaveGroup", "0-5", flexible="4+",
request="""
    group_id                             string
    member_id                            string                         0-2
    members                              [MemberIdentity]               3+
      member_id                          string
      group_instance_id                  string?                        =null
      reason                             string?                        5+ =null
""",
response="""
    throttle_time_ms                     int32                          1+
    error_code                           int16
    members                              [MemberResponse]               3+
      member_id                          string
      group_instance_id                  string?
      error_code                         int16
""")

