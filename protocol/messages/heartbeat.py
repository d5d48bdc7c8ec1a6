"""Heartbeat: the declaration of every supported version."""

from kbroker.protocol.schema import api

HEARTBEAT = api(12, "Heartbeat", "0-4", flexible="4+",
request="""
    group_id                             string
    generation_id                        int32
    member_id                            string
    group_instance_id                    string?                        3+ =null
""",
response="""
    throttle_time_ms                     int32                          1+
    error_code                           int16
""")

