"""Fetch: the declaration of every supported version."""

from kbroker.protocol.schema import api

FETCH = api(1, "Fetch", "4-18", flexible="12+",
request="""
    cluster_id                           string?                        12+ @0 =null
    replica_id                           int32                          0-14 =-1
    replica_state                        ReplicaState                   15+ @1
      replica_id                         int32                          =-1
      replica_epoch                      int64                          =-1
    max_wait_ms                          int32
    min_bytes                            int32
    max_bytes                            int32                          =0x7fffffff
    isolation_level                      int8
    session_id                           int32                          7+
    session_epoch                        int32                          7+ =-1
    topics                               [FetchTopic]
      topic                              string                         0-12
      topic_id                           uuid                           13+
      partitions                         [FetchPartition]
        partition                        int32
        current_leader_epoch             int32                          9+ =-1
        fetch_offset                     int64
        last_fetched_epoch               int32                          12+ =-1
        log_start_offset                 int64                          5+ =-1
        partition_max_bytes              int32
        replica_directory_id             uuid                           17+ @0
        high_watermark                   int64                          18+ @1 =0x7fffffffffffffff
    forgotten_topics_data                [ForgottenTopic]               7+
      topic                              string                         7-12
      topic_id                           uuid                           13+
      partitions                         []int32
    rack_id                              string                         11+
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16                          7+
    session_id                           int32                          7+
    responses                            [FetchableTopicResponse]
      topic                              string                         0-12
      topic_id                           uuid                           13+
      partitions                         [PartitionData]
        partition_index                  int32
        error_code                       int16
        high_watermark                   int64
        last_stable_offset               int64                          =-1
        log_start_offset                 int64                          5+ =-1
        diverging_epoch                  EpochEndOffset                 12+ @0
          epoch                          int32                          =-1
          end_offset                     int64                          =-1
        current_leader                   LeaderIdAndEpoch               12+ @1
          leader_id                      int32                          =-1
          leader_epoch                   int32                          =-1
        snapshot_id                      SnapshotId                     12+ @2
          end_offset                     int64                          =-1
          epoch                          int32                          =-1
        aborted_transactions             [AbortedTransaction]?
          producer_id                    int64
          first_offset                   int64
        preferred_read_replica           int32                          11+ =-1
        records                          records?
    node_endpoints                       [NodeEndpoint]                 16+ @0
      node_id                            int32
      host                               string
      port                               int32
      rack                               string?                        =null
""")

