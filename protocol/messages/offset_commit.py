"""OffsetCommit: the declaration of every supported version."""

from kbroker.protocol.schema import api

OFFSET_COMMIT = api(8, "OffsetCommit", "2-10", flexible="8+",
request="""
    group_id                             string
    generation_id_or_member_epoch        int32                          =-1
    member_id                            string
    group_instance_id                    string?                        7+ =null
    retention_time_ms                    int64                          2-4 =-1
    topics                               [OffsetCommitRequestTopic]
      name                               string                         0-9
      topic_id                           uuid                           10+
      partitions                         [OffsetCommitRequestPartition]
        partition_index                  int32
        committed_offset                 int64
        committed_leader_epoch           int32                          6+ =-1
        committed_metadata               string?
""",
response="""
    throttle_time_ms                     int32                          3+
    topics                               [OffsetCommitResponseTopic]
      name                               string                         0-9
      topic_id                           uuid                           10+
      partitions                         [OffsetCommitResponsePartition]
        partition_index                  int32
        error_code                       int16
""")

