"""OffsetFetch: the declaration of every supported version."""

from kbroker.protocol.schema import api

OFFSET_FETCH = api(9, "OffsetFetch", "1-10", flexible="6+",
request="""
    group_id                             string                         1-7
    topics                               [OffsetFetchRequestTopic]?2+   1-7
      name                               string
      partition_indexes                  []int32
    groups                               [OffsetFetchRequestGroup]      8+
      group_id                           string
      member_id                          string?                        9+ =null
      member_epoch                       int32                          9+ =-1
      topics                             [OffsetFetchRequestTopics]?
        name                             string                         8-9
        topic_id                         uuid                           10+
        partition_indexes                []int32
    require_stable                       bool                           7+
""",
response="""
    throttle_time_ms                     int32                          3+
    topics                               [OffsetFetchResponseTopic]     1-7
      name                               string
      partitions                         [OffsetFetchResponsePartition]
        partition_index                  int32
        committed_offset                 int64
        committed_leader_epoch           int32                          5+ =-1
        metadata                         string?
        error_code                       int16
    error_code                           int16                          2-7
    groups                               [OffsetFetchResponseGroup]     8+
      group_id                           string
      topics                             [OffsetFetchResponseTopics]
        name                             string                         8-9
        topic_id                         uuid                           10+
        partitions                       [OffsetFetchResponsePartitions]
          partition_index                int32
          committed_offset               int64
          committed_leader_epoch         int32                          =-1
          metadata                       string?
          error_code                     int16
      error_code                         int16
""")

