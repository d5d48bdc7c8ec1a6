"""TxnOffsetCommit: the declaration of every supported version."""

from kbroker.protocol.schema import api

TXN_OFFSET_COMMIT = api(28, "TxnOffsetCommit", "0-5", flexible="3+",
request="""
    transactional_id                     string
    group_id                             string
    producer_id                          int64
    producer_epoch                       int16
    generation_id                        int32                          3+ =-1
    member_id                            string                         3+
    group_instance_id                    string?                        3+ =null
    topics                               [TxnOffsetCommitRequestTopic]
      name                               string
      partitions                         [TxnOffsetCommitRequestPartition]
        partition_index                  int32
        committed_offset                 int64
        committed_leader_epoch           int32                          2+ =-1
        committed_metadata               string?
""",
response="""
    throttle_time_ms                     int32
    topics                               [TxnOffsetCommitResponseTopic]
      name                               string
      partitions                         [TxnOffsetCommitResponsePartition]
        partition_index                  int32
        error_code                       int16
""")

