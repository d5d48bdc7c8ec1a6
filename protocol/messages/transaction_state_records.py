"""Records of the internal topic ``__transaction_state`` (Kafka's TransactionLogKey/Value).

The key's version (int16) precedes the key; the value's version precedes the value.
"""

from kbroker.protocol.schema import data

TRANSACTION_LOG_KEY = data("TransactionLogKey", "0-0", flexible=None, fields="""
    transactional_id                     string
""")

TRANSACTION_LOG_VALUE = data("TransactionLogValue", "0-1", flexible="1+", fields="""
    producer_id                          int64
    previous_producer_id                 int64                          1+ @0 =-1
    next_producer_id                     int64                          1+ @1 =-1
    producer_epoch                       int16
    transaction_timeout_ms               int32
    transaction_status                   int8
    transaction_partitions               [PartitionsSchema]?
      topic                              string
      partition_ids                      []int32
    transaction_last_update_timestamp_ms int64
    transaction_start_timestamp_ms       int64
    client_transaction_version           int16                          1+ @2 =0
""")
