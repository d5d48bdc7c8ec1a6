"""DescribeGroups: the declaration of every supported version."""

from kbroker.protocol.schema import api

DESCRIBE_GROUPS = api(15, "DescribeGroups", "0-6", flexible="5+",
request="""
    groups                               []string
    include_authorized_operations        bool                           3+
""",
response="""
    throttle_time_ms                     int32                          1+
    groups                               [DescribedGroup]
      error_code                         int16
      error_message                      string?                        6+ =null
      group_id                           string
      group_state                        string
      protocol_type                      string
      protocol_data                      string
      members                            [DescribedGroupMember]
        member_id                        string
        group_instance_id                string?                        4+ =null
        client_id                        string
        client_host                      string
        member_metadata                  bytes
        member_assignment                bytes
      authorized_operations              int32                          3+ =-2147483648
""")

