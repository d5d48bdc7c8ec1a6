"""AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932): an empty share group's start offsets set or
forgotten, for the admin tools (kafka-share-groups --reset-offsets, --delete-offsets)."""

from kbroker.protocol.schema import api

ALTER_SHARE_GROUP_OFFSETS = api(91, "AlterShareGroupOffsets", "0-0", flexible="0+",
request="""
    group_id                             string
    topics                               [AlterShareGroupOffsetsRequestTopic]
      topic_name                         string
      partitions                         [AlterShareGroupOffsetsRequestPartition]
        partition_index                  int32
        start_offset                     int64
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?                        =null
    responses                            [AlterShareGroupOffsetsResponseTopic]
      topic_name                         string
      topic_id                           uuid
      partitions                         [AlterShareGroupOffsetsResponsePartition]
        partition_index                  int32
        error_code                       int16
        error_message                    string?                        =null
""")

DELETE_SHARE_GROUP_OFFSETS = api(92, "DeleteShareGroupOffsets", "0-0", flexible="0+",
request="""
    group_id                             string
    topics                               [DeleteShareGroupOffsetsRequestTopic]
      topic_name                         string
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?                        =null
    responses                            [DeleteShareGroupOffsetsResponseTopic]
      topic_name                         string
      topic_id                           uuid
      error_code                         int16
      error_message                      string?                        =null
""")
