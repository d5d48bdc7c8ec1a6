"""Records of ``__share_group_state`` (the share coordinator's snapshots of a share partition) and the share
group's records in ``__consumer_offsets`` (key versions 10-15), in Kafka 4.2's layout: Kafka's
``kafka-dump-log --offsets-decoder`` / ``--share-group-state-decoder`` read them.

The ``...Kbroker01`` schemas are the layouts kbroker 0.1 wrote before it followed Kafka 4.2's (its share records
came from pre-release schemas): only read, so that a data directory from then keeps its share groups."""

from kbroker.protocol.schema import data

# Kafka's common structs, the same in each schema that has them.
STATE_BATCH = """
      first_offset                       int64
      last_offset                        int64
      delivery_state                     int8
      delivery_count                     int16
"""
TOPIC_PARTITIONS_INFO = """
      topic_id                           uuid
      topic_name                         string
      partitions                         []int32
"""

SHARE_SNAPSHOT_KEY = data("ShareSnapshotKey", "0-0", flexible=None, fields="""
    group_id                             string
    topic_id                             uuid
    partition                            int32
""")


SHARE_SNAPSHOT_VALUE = data("ShareSnapshotValue", "0-0", flexible="0+", fields="""
    snapshot_epoch                       int32
    state_epoch                          int32
    leader_epoch                         int32
    start_offset                         int64
    delivery_complete_count              int32                          @0 =-1
    create_timestamp                     int64
    write_timestamp                      int64
    state_batches                        [StateBatch]""" + STATE_BATCH)


SHARE_SNAPSHOT_VALUE_KBROKER01 = data("ShareSnapshotValueKbroker01", "0-0", flexible="0+", fields="""
    snapshot_epoch                       uint16
    state_epoch                          int32
    leader_epoch                         int32
    start_offset                         int64
    state_batches                        [StateBatch]""" + STATE_BATCH)


SHARE_GROUP_METADATA_KEY = data("ShareGroupMetadataKey", "11-11", flexible=None, fields="""
    group_id                             string
""")


SHARE_GROUP_METADATA_VALUE = data("ShareGroupMetadataValue", "0-0", flexible="0+", fields="""
    epoch                                int32
    metadata_hash                        int64
""")


SHARE_GROUP_METADATA_VALUE_KBROKER01 = data("ShareGroupMetadataValueKbroker01", "0-0", flexible="0+", fields="""
    epoch                                int32
    metadata_hash                        int64                          @0 =0
""")


# Which share partitions a share group has had (key version 15): their state is deleted with the group.
SHARE_GROUP_STATE_PARTITION_METADATA_KEY = data("ShareGroupStatePartitionMetadataKey", "15-15", flexible=None,
                                                fields="""
    group_id                             string
""")


SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = data("ShareGroupStatePartitionMetadataValue", "0-0", flexible="0+",
                                                  fields="""
    initializing_topics                  [TopicPartitionsInfo]""" + TOPIC_PARTITIONS_INFO + """
    initialized_topics                   [TopicPartitionsInfo]""" + TOPIC_PARTITIONS_INFO + """
    deleting_topics                      [TopicInfo]
      topic_id                           uuid
      topic_name                         string
""")


SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_KBROKER01 = data("ShareGroupStatePartitionMetadataValueKbroker01", "0-0",
                                                           flexible="0+", fields="""
    initialized_topics                   [TopicPartitionsInfo]""" + TOPIC_PARTITIONS_INFO + """
    deleting_topics                      [TopicInfo]
      topic_id                           uuid
      topic_name                         string
""")


# A share group's members, as Kafka 4 persists them: each member (key version 10), the target assignment's
# epoch (12) and each member's target (13), and each member's current assignment with its epoch (14).
SHARE_GROUP_MEMBER_METADATA_KEY = data("ShareGroupMemberMetadataKey", "10-10", flexible=None, fields="""
    group_id                             string
    member_id                            string
""")


SHARE_GROUP_MEMBER_METADATA_VALUE = data("ShareGroupMemberMetadataValue", "0-0", flexible="0+", fields="""
    rack_id                              string?
    client_id                            string
    client_host                          string
    subscribed_topic_names               []string
""")


SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = data("ShareGroupTargetAssignmentMetadataKey", "12-12", flexible=None,
                                                  fields="""
    group_id                             string
""")


SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = data("ShareGroupTargetAssignmentMetadataValue", "0-0",
                                                    flexible="0+", fields="""
    assignment_epoch                     int32
""")


SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = data("ShareGroupTargetAssignmentMemberKey", "13-13", flexible=None,
                                                fields="""
    group_id                             string
    member_id                            string
""")


SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = data("ShareGroupTargetAssignmentMemberValue", "0-0", flexible="0+",
                                                  fields="""
    topic_partitions                     [TopicPartition]
      topic_id                           uuid
      partitions                         []int32
""")


SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = data("ShareGroupCurrentMemberAssignmentKey", "14-14", flexible=None,
                                                 fields="""
    group_id                             string
    member_id                            string
""")


SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = data("ShareGroupCurrentMemberAssignmentValue", "0-0", flexible="0+",
                                                   fields="""
    member_epoch                         int32
    previous_member_epoch                int32
    state                                int8
    assigned_partitions                  [TopicPartitions]
      topic_id                           uuid
      partitions                         []int32
""")
