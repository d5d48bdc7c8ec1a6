"""OffsetDelete: the declaration of every supported version."""

from kbroker.protocol.schema import api

OFFSET_DELETE = api(47, "OffsetDelete", "0-0", flexible=None,
request="""
    group_id                             string
    topics                               [OffsetDeleteRequestTopic]
      name                               string
      partitions                         [OffsetDeleteRequestPartition]
        partition_index                  int32
""",
response="""
    error_code                           int16
    throttle_time_ms                     int32
    topics                               [OffsetDeleteResponseTopic]
      name                               string
      partitions                         [OffsetDeleteResponsePartition]
        partition_index                  int32
        error_code                       int16
""")

