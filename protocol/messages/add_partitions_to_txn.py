"""AddPartitionsToTxn: the declaration of every supported version (v4 is the brokers' batched form)."""

from kbroker.protocol.schema import api

ADD_PARTITIONS_TO_TXN = api(24, "AddPartitionsToTxn", "0-5", flexible="3+",
request="""
    transactions                         [AddPartitionsToTxnTransaction] 4+
      transactional_id                   string
      producer_id                        int64
      producer_epoch                     int16
      verify_only                        bool                           =false
      topics                             [AddPartitionsToTxnTopic]
        name                             string
        partitions                       []int32
    v3_and_below_transactional_id        string                         0-3
    v3_and_below_producer_id             int64                          0-3
    v3_and_below_producer_epoch          int16                          0-3
    v3_and_below_topics                  [AddPartitionsToTxnTopic]      0-3
      name                               string
      partitions                         []int32
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16                          4+
    results_by_transaction               [AddPartitionsToTxnResult]     4+
      transactional_id                   string
      topic_results                      [AddPartitionsToTxnTopicResult]
        name                             string
        results_by_partition             [AddPartitionsToTxnPartitionResult]
          partition_index                int32
          partition_error_code           int16
    results_by_topic_v3_and_below        [AddPartitionsToTxnTopicResult] 0-3
      name                               string
      results_by_partition               [AddPartitionsToTxnPartitionResult]
        partition_index                  int32
        partition_error_code             int16
""")

