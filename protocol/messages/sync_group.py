"""SyncGroup: the declaration of every supported version."""

from kbroker.protocol.schema import api

SYNC_GROUP = api(14, "SyncGroup", "0-5", flexible="4+",
request="""
    group_id                             string
    generation_id                        int32
    member_id                            string
    group_instance_id                    string?                        3+ =null
    protocol_type                        string?                        5+ =null
    protocol_name                        string?                        5+ =null
    assignments                          [SyncGroupRequestAssignment]
      member_id                          string
      assignment                         bytes
""",
response="""
    throttle_time_ms                     int32                          1+
    error_code                           int16
    protocol_type                        string?                        5+ =null
    protocol_name                        string?                        5+ =null
    assignment                           bytes
""")

