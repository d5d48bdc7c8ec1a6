"""ConsumerGroupHeartbeat (KIP-848): the declaration of every supported version.

v1 (KIP-1082, Kafka 4.0): the member makes its own id and sends it from the first heartbeat on, and may
subscribe by regular expression.
"""

from kbroker.protocol.schema import api

CONSUMER_GROUP_HEARTBEAT = api(68, "ConsumerGroupHeartbeat", "0-1", flexible="0+",
request="""
    group_id                             string
    member_id                            string
    member_epoch                         int32
    instance_id                          string?                        =null
    rack_id                              string?                        =null
    rebalance_timeout_ms                 int32                          =-1
    subscribed_topic_names               []string?                      =null
    subscribed_topic_regex               string?                        1+ =null
    server_assignor                      string?                        =null
    topic_partitions                     [TopicPartitions]?             =null
      topic_id                           uuid
      partitions                         []int32
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?                        =null
    member_id                            string?                        =null
    member_epoch                         int32
    heartbeat_interval_ms                int32
    assignment                           Assignment?                    =null
      topic_partitions                   [TopicPartitions]
        topic_id                         uuid
        partitions                       []int32
""")
