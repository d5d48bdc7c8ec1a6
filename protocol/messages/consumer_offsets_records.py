"""Records of __consumer_offsets: offset commits and group metadata, keyed and versioned as Kafka writes them.

The key's version (int16) precedes the key; the value's version precedes the value.
"""

from kbroker.protocol.schema import data

OFFSET_COMMIT_KEY = data("OffsetCommitKey", "0-1", flexible=None, fields="""
    group                                string
    topic                                string
    partition                            int32
""")


OFFSET_COMMIT_VALUE = data("OffsetCommitValue", "0-4", flexible="4+", fields="""
    offset                               int64
    leader_epoch                         int32                          3+ =-1
    metadata                             string
    commit_timestamp                     int64
    expire_timestamp                     int64                          1 =-1
""")


GROUP_METADATA_KEY = data("GroupMetadataKey", "2-2", flexible=None, fields="""
    group                                string
""")


GROUP_METADATA_VALUE = data("GroupMetadataValue", "0-4", flexible="4+", fields="""
    protocol_type                        string
    generation                           int32
    protocol                             string?
    leader                               string?
    current_state_timestamp              int64                          2+ =-1
    members                              [MemberMetadata]
      member_id                          string
      group_instance_id                  string?                        3+ =null
      client_id                          string
      client_host                        string
      rebalance_timeout                  int32                          1+ =-1
      session_timeout                    int32
      subscription                       bytes
      assignment                         bytes
""")


# KIP-848 consumer groups: one record kind per key version (3, 5-8), as Kafka 4 writes them. Kafka 4.1+
# (KIP-1101) keeps a hash of the subscribed topics' metadata in the group's record instead of the
# partition-metadata record of key version 4, which it no longer writes.
CONSUMER_GROUP_METADATA_KEY = data("ConsumerGroupMetadataKey", "3-3", flexible=None, fields="""
    group_id                             string
""")


CONSUMER_GROUP_METADATA_VALUE = data("ConsumerGroupMetadataValue", "0-0", flexible="0+", fields="""
    epoch                                int32
    metadata_hash                        int64                          @0 =0
""")


CONSUMER_GROUP_MEMBER_METADATA_KEY = data("ConsumerGroupMemberMetadataKey", "5-5", flexible=None, fields="""
    group_id                             string
    member_id                            string
""")


CONSUMER_GROUP_MEMBER_METADATA_VALUE = data("ConsumerGroupMemberMetadataValue", "0-0", flexible="0+", fields="""
    instance_id                          string?
    rack_id                              string?
    client_id                            string
    client_host                          string
    subscribed_topic_names               []string
    subscribed_topic_regex               string?
    rebalance_timeout_ms                 int32                          =-1
    server_assignor                      string?
    classic_member_metadata              ClassicMemberMetadata?         @0 =null
      session_timeout_ms                 int32
      supported_protocols                [ClassicProtocol]
        name                             string
        metadata                         bytes
""")


CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = data("ConsumerGroupTargetAssignmentMetadataKey", "6-6",
                                                     flexible=None, fields="""
    group_id                             string
""")


CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = data("ConsumerGroupTargetAssignmentMetadataValue", "0-0",
                                                       flexible="0+", fields="""
    assignment_epoch                     int32
""")


CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = data("ConsumerGroupTargetAssignmentMemberKey", "7-7",
                                                   flexible=None, fields="""
    group_id                             string
    member_id                            string
""")


CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = data("ConsumerGroupTargetAssignmentMemberValue", "0-0",
                                                     flexible="0+", fields="""
    topic_partitions                     [TopicPartition]
      topic_id                           uuid
      partitions                         []int32
""")


CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = data("ConsumerGroupCurrentMemberAssignmentKey", "8-8",
                                                    flexible=None, fields="""
    group_id                             string
    member_id                            string
""")


CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = data("ConsumerGroupCurrentMemberAssignmentValue", "0-0",
                                                      flexible="0+", fields="""
    member_epoch                         int32
    previous_member_epoch                int32
    state                                int8
    assigned_partitions                  [TopicPartitions]
      topic_id                           uuid
      partitions                         []int32
    partitions_pending_revocation        [TopicPartitions]
      topic_id                           uuid
      partitions                         []int32
""")
