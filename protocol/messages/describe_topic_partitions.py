"""DescribeTopicPartitions: the declaration of every supported version."""

from kbroker.protocol.schema import api

DESCRIBE_TOPIC_PARTITIONS = api(75, "DescribeTopicPartitions", "0", flexible="0+",
request="""
    topics                               [TopicRequest]
      name                               string
    response_partition_limit             int32                          =2000
    cursor                               Cursor?                        =null
      topic_name                         string
      partition_index                    int32
""",
response="""
    throttle_time_ms                     int32
    topics                               [DescribeTopicPartitionsResponseTopic]
      error_code                         int16
      name                               string?
      topic_id                           uuid
      is_internal                        bool
      partitions                         [DescribeTopicPartitionsResponsePartition]
        error_code                       int16
        partition_index                  int32
        leader_id                        int32
        leader_epoch                     int32                          =-1
        replica_nodes                    []int32
        isr_nodes                        []int32
        eligible_leader_replicas         []int32?                       =null
        last_known_elr                   []int32?                       =null
        offline_replicas                 []int32
      topic_authorized_operations        int32                          =-2147483648
    next_cursor                          Cursor?                        =null
      topic_name                         string
      partition_index                    int32
""")
