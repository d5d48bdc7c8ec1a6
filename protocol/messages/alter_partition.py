"""AlterPartition: a partition leader asks the controller to change the ISR (Kafka 2.7+)."""

from kbroker.protocol.schema import api

ALTER_PARTITION = api(56, "AlterPartition", "0-3", flexible="0+",
request="""
    broker_id                            int32
    broker_epoch                         int64                          =-1
    topics                               [TopicData]
      topic_name                         string                         0-1
      topic_id                           uuid                           2+
      partitions                         [PartitionData]
        partition_index                  int32
        leader_epoch                     int32
        new_isr                          []int32                        0-2
        new_isr_with_epochs              [BrokerState]                  3+
          broker_id                      int32
          broker_epoch                   int64                          =-1
        leader_recovery_state            int8                           1+ =0
        partition_epoch                  int32
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    topics                               [TopicData]
      topic_name                         string                         0-1
      topic_id                           uuid                           2+
      partitions                         [PartitionData]
        partition_index                  int32
        error_code                       int16
        leader_id                        int32
        leader_epoch                     int32
        isr                              []int32
        leader_recovery_state            int8                           1+ =0
        partition_epoch                  int32
""")
