"""Produce: the declaration of every supported version."""

from kbroker.protocol.schema import api

PRODUCE = api(0, "Produce", "3-13", flexible="9+",
request="""
    transactional_id                     string?                        =null
    acks                                 int16
    timeout_ms                           int32
    topic_data                           [TopicProduceData]
      name                               string                         0-12
      topic_id                           uuid                           13+
      partition_data                     [PartitionProduceData]
        index                            int32
        records                          records?
""",
response="""
    responses                            [TopicProduceResponse]
      name                               string                         0-12
      topic_id                           uuid                           13+
      partition_responses                [PartitionProduceResponse]
        index                            int32
        error_code                       int16
        base_offset                      int64
        log_append_time_ms               int64                          =-1
        log_start_offset                 int64                          5+ =-1
        record_errors                    [BatchIndexAndErrorMessage]    8+
          batch_index                    int32
          batch_index_error_message      string?                        =null
        error_message                    string?                        8+ =null
        current_leader                   LeaderIdAndEpoch               10+ @0
          leader_id                      int32                          =-1
          leader_epoch                   int32                          =-1
    throttle_time_ms                     int32
    node_endpoints                       [NodeEndpoint]                 10+ @0
      node_id                            int32
      host                               string
      port                               int32
      rack                               string?                        =null
""")

