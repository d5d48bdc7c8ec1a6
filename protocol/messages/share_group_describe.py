"""ShareGroupDescribe (KIP-932): the declaration of every supported version (Kafka 4.2 serves v1 only)."""

from kbroker.protocol.schema import api

SHARE_GROUP_DESCRIBE = api(77, "ShareGroupDescribe", "1-1", flexible="0+",
request="""
    group_ids                            []string
    include_authorized_operations        bool
""",
response="""
    throttle_time_ms                     int32
    groups                               [DescribedGroup]
      error_code                         int16
      error_message                      string?                        =null
      group_id                           string
      group_state                        string
      group_epoch                        int32
      assignment_epoch                   int32
      assignor_name                      string
      members                            [Member]
        member_id                        string
        rack_id                          string?                        =null
        member_epoch                     int32
        client_id                        string
        client_host                      string
        subscribed_topic_names           []string
        assignment                       Assignment
          topic_partitions               [TopicPartitions]
            topic_id                     uuid
            topic_name                   string
            partitions                   []int32
      authorized_operations              int32                          =-2147483648
""")
