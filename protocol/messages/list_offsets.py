"""ListOffsets: the declaration of every supported version."""

from kbroker.protocol.schema import api

LIST_OFFSETS = api(2, "ListOffsets", "1-11", flexible="6+",
request="""
    replica_id                           int32
    isolation_level                      int8                           2+
    topics                               [ListOffsetsTopic]
      name                               string
      partitions                         [ListOffsetsPartition]
        partition_index                  int32
        current_leader_epoch             int32                          4+ =-1
        timestamp                        int64
    timeout_ms                           int32                          10+ =30000
""",
response="""
    throttle_time_ms                     int32                          2+
    topics                               [ListOffsetsTopicResponse]
      name                               string
      partitions                         [ListOffsetsPartitionResponse]
        partition_index                  int32
        error_code                       int16
        timestamp                        int64                          =-1
        offset                           int64                          =-1
        leader_epoch                     int32                          4+ =-1
""")

