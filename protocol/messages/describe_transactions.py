"""DescribeTransactions: the declaration of every supported version."""

from kbroker.protocol.schema import api

DESCRIBE_TRANSACTIONS = api(65, "DescribeTransactions", "0-0", flexible="0+",
request="""
    transactional_ids                    []string
""",
response="""
    throttle_time_ms                     int32
    transaction_states                   [TransactionState]
      error_code                         int16
      transactional_id                   string
      transaction_state                  string
      transaction_timeout_ms             int32
      transaction_start_time_ms          int64
      producer_id                        int64
      producer_epoch                     int16
      topics                             [TopicData]
        topic                            string
        partitions                       []int32
""")

