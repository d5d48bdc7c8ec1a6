"""ShareGroupHeartbeat (KIP-932): the declaration of every supported version (Kafka 4.2 serves v1 only)."""

from kbroker.protocol.schema import api

SHARE_GROUP_HEARTBEAT = api(76, "ShareGroupHeartbeat", "1-1", flexible="0+",
request="""
    group_id                             string
    member_id                            string
    member_epoch                         int32
    rack_id                              string?                        =null
    subscribed_topic_names               []string?                      =null
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
