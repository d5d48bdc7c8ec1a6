"""DeleteGroups: the declaration of every supported version."""

from kbroker.protocol.schema import api

DELETE_GROUPS = api(42, "DeleteGroups", "0-2", flexible="2+",
request="""
    groups_names                         []string
""",
response="""
    throttle_time_ms                     int32
    results                              [DeletableGroupResult]
      group_id                           string
      error_code                         int16
""")

