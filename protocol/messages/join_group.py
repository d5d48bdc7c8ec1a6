"""JoinGroup: the declaration of every supported version."""

from kbroker.protocol.schema import api

JOIN_GROUP = api(11, "JoinGroup", "0-9", flexible="6+",
request="""
    group_id                             string
    session_timeout_ms                   int32
    rebalance_timeout_ms                 int32                          1+ =-1
    member_id                            string
    group_instance_id                    string?                        5+ =null
    protocol_type                        string
    protocols                            [JoinGroupRequestProtocol]
      name                               string
      metadata                           bytes
    reason                               string?                        8+ =null
""",
response="""
    throttle_time_ms                     int32                          2+
    error_code                           int16
    generation_id                        int32                          =-1
    protocol_type                        string?                        7+ =null
    protocol_name                        string?7+
    leader                               string
    skip_assignment                      bool                           9+
    member_id                            string
    members                              [JoinGroupResponseMember]
      member_id                          string
      group_instance_id                  string?                        5+ =null
      metadata                           bytes
""")

