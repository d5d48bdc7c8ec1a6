"""ListGroups: the declaration of every supported version."""

from kbroker.protocol.schema import api

LIST_GROUPS = api(16, "ListGroups", "0-5", flexible="3+",
request="""
    states_filter                        []string                       4+
    types_filter                         []string                       5+
""",
response="""
    throttle_time_ms                     int32                          1+
    error_code                           int16
    groups                               [ListedGroup]
      group_id                           string
      protocol_type                      string
      group_state                        string                         4+
      group_type                         string                         5+
""")

