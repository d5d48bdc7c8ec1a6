"""ShareAcknowledge (KIP-932): the declaration of every supported version (v2: lock renewal, KIP-1222)."""

from kbroker.protocol.schema import api

SHARE_ACKNOWLEDGE = api(79, "ShareAcknowledge", "1-2", flexible="0+",
request="""
    group_id                             string?                        =null
    member_id                            string?                        =null
    share_session_epoch                  int32
    is_renew_ack                         bool                           2+
    topics                               [AcknowledgeTopic]
      topic_id                           uuid
      partitions                         [AcknowledgePartition]
        partition_index                  int32
        acknowledgement_batches          [AcknowledgementBatch]
          first_offset                   int64
          last_offset                    int64
          acknowledge_types              []int8
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?                        =null
    acquisition_lock_timeout_ms          int32                          2+
    responses                            [ShareAcknowledgeTopicResponse]
      topic_id                           uuid
      partitions                         [PartitionData]
        partition_index                  int32
        error_code                       int16
        error_message                    string?                        =null
        current_leader                   LeaderIdAndEpoch
          leader_id                      int32
          leader_epoch                   int32
    node_endpoints                       [NodeEndpoint]
      node_id                            int32
      host                               string
      port                               int32
      rack                               string?                        =null
""")
