"""DescribeShareGroupOffsets (KIP-932): the declaration of every supported version (v1 adds the lag)."""

from kbroker.protocol.schema import api

DESCRIBE_SHARE_GROUP_OFFSETS = api(90, "DescribeShareGroupOffsets", "0-1", flexible="0+",
request="""
    groups                               [DescribeShareGroupOffsetsRequestGroup]
      group_id                           string
      topics                             [DescribeShareGroupOffsetsRequestTopic]?
        topic_name                       string
        partitions                       []int32
""",
response="""
    throttle_time_ms                     int32
    groups                               [DescribeShareGroupOffsetsResponseGroup]
      group_id                           string
      topics                             [DescribeShareGroupOffsetsResponseTopic]
        topic_name                       string
        topic_id                         uuid
        partitions                       [DescribeShareGroupOffsetsResponsePartition]
          partition_index                int32
          start_offset                   int64
          leader_epoch                   int32
          lag                            int64                          1+ =-1
          error_code                     int16
          error_message                  string?                        =null
      error_code                         int16
      error_message                      string?                        =null
""")
