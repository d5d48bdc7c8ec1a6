"""ShareFetch (KIP-932): the declaration of every supported version (v1: Kafka 4.1's; v2 adds the acquire mode
and lock renewal, KIP-1222)."""

from kbroker.protocol.schema import api

SHARE_FETCH = api(78, "ShareFetch", "1-2", flexible="0+",
request="""
    group_id                             string?                        =null
    member_id                            string?                        =null
    share_session_epoch                  int32
    max_wait_ms                          int32
    min_bytes                            int32
    max_bytes                            int32                          =0x7fffffff
    max_records                          int32
    batch_size                           int32
    share_acquire_mode                   int8                           2+
    is_renew_ack                         bool                           2+
    topics                               [FetchTopic]
      topic_id                           uuid
      partitions                         [FetchPartition]
        partition_index                  int32
        acknowledgement_batches          [AcknowledgementBatch]
          first_offset                   int64
          last_offset                    int64
          acknowledge_types              []int8
    forgotten_topics_data                [ForgottenTopic]
      topic_id                           uuid
      partitions                         []int32
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?                        =null
    acquisition_lock_timeout_ms          int32
    responses                            [ShareFetchableTopicResponse]
      topic_id                           uuid
      partitions                         [PartitionData]
        partition_index                  int32
        error_code                       int16
        error_message                    string?                        =null
        acknowledge_error_code           int16
        acknowledge_error_message        string?                        =null
        current_leader                   LeaderIdAndEpoch
          leader_id                      int32
          leader_epoch                   int32
        records                          records?
        acquired_records                 [AcquiredRecords]
          first_offset                   int64
          last_offset                    int64
          delivery_count                 int16
    node_endpoints                       [NodeEndpoint]
      node_id                            int32
      host                               string
      port                               int32
      rack                               string?                        =null
""")
