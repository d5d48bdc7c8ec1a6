"""OffsetForLeaderEpoch: where a leader epoch ends on the leader (KIP-101/KIP-279 truncation)."""

from kbroker.protocol.schema import api

OFFSET_FOR_LEADER_EPOCH = api(23, "OffsetForLeaderEpoch", "0-4", flexible="4+",
request="""
    replica_id                           int32                          3+ =-2
    topics                               [OffsetForLeaderTopic]
      topic                              string
      partitions                         [OffsetForLeaderPartition]
        partition                        int32
        current_leader_epoch             int32                          2+ =-1
        leader_epoch                     int32
""",
response="""
    throttle_time_ms                     int32                          2+
    topics                               [OffsetForLeaderTopicResult]
      topic                              string
      partitions                         [EpochEndOffset]
        error_code                       int16
        partition                        int32
        leader_epoch                     int32                          1+ =-1
        end_offset                       int64                          =-1
""")
