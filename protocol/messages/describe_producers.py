"""DescribeProducers: the declaration of every supported version."""

from kbroker.protocol.schema import api

DESCRIBE_PRODUCERS = api(61, "DescribeProducers", "0-0", flexible="0+",
request="""
    topics                               [TopicRequest]
      name                               string
      partition_indexes                  []int32
""",
response="""
    throttle_time_ms                     int32
    topics                               [TopicResponse]
      name                               string
      partitions                         [PartitionResponse]
        partition_index                  int32
        error_code                       int16
        error_message                    string?                        =null
        active_producers                 [ProducerState]
          producer_id                    int64
          producer_epoch                 int32
          last_sequence                  int32                          =-1
          last_timestamp                 int64                          =-1
          coordinator_epoch              int32
          current_txn_start_offset       int64                          =-1
""")

