"""A streams group's records in ``__consumer_offsets`` (KIP-1071), keyed and versioned as Kafka 4.2 writes them:
the group's epoch (key version 17), each member (19), the target assignment's epoch (20), each member's target
(21), each member's current assignment (22) and the group's topology (23)."""

from kbroker.protocol.schema import data

STREAMS_GROUP_METADATA_KEY = data("StreamsGroupMetadataKey", "17-17", flexible=None, fields="""
    group_id                             string
""")


STREAMS_GROUP_METADATA_VALUE = data("StreamsGroupMetadataValue", "0-0", flexible="0+", fields="""
    epoch                                int32
    metadata_hash                        int64
    validated_topology_epoch             int32                          @0 =-1
    last_assignment_configs              [LastAssignmentConfig]?        @1 =null
      key                                string
      value                              string
""")


STREAMS_GROUP_MEMBER_METADATA_KEY = data("StreamsGroupMemberMetadataKey", "19-19", flexible=None, fields="""
    group_id                             string
    member_id                            string
""")


STREAMS_GROUP_MEMBER_METADATA_VALUE = data("StreamsGroupMemberMetadataValue", "0-0", flexible="0+", fields="""
    instance_id                          string?
    rack_id                              string?
    client_id                            string
    client_host                          string
    rebalance_timeout_ms                 int32                          =-1
    topology_epoch                       int32
    process_id                           string
    user_endpoint                        Endpoint?                      =null
      host                               string
      port                               uint16
    client_tags                          [KeyValue]
      key                                string
      value                              string
""")


STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = data("StreamsGroupTargetAssignmentMetadataKey", "20-20",
                                                    flexible=None, fields="""
    group_id                             string
""")


STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = data("StreamsGroupTargetAssignmentMetadataValue", "0-0",
                                                      flexible="0+", fields="""
    assignment_epoch                     int32
""")


STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = data("StreamsGroupTargetAssignmentMemberKey", "21-21", flexible=None,
                                                  fields="""
    group_id                             string
    member_id                            string
""")


STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = data("StreamsGroupTargetAssignmentMemberValue", "0-0",
                                                    flexible="0+", fields="""
    active_tasks                         [TaskIds]
      subtopology_id                     string
      partitions                         []int32
    standby_tasks                        [TaskIds]
      subtopology_id                     string
      partitions                         []int32
    warmup_tasks                         [TaskIds]
      subtopology_id                     string
      partitions                         []int32
""")


STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = data("StreamsGroupCurrentMemberAssignmentKey", "22-22",
                                                   flexible=None, fields="""
    group_id                             string
    member_id                            string
""")


# AssignmentEpochs: the epoch each active task's partition was given at (fencing a zombie's commits).
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = data("StreamsGroupCurrentMemberAssignmentValue", "0-0",
                                                     flexible="0+", fields="""
    member_epoch                         int32
    previous_member_epoch                int32
    state                                int8
    active_tasks                         [TaskIds]
      subtopology_id                     string
      partitions                         []int32
      assignment_epochs                  []int32?                       @0 =null
    standby_tasks                        [TaskIds]
      subtopology_id                     string
      partitions                         []int32
      assignment_epochs                  []int32?                       @0 =null
    warmup_tasks                         [TaskIds]
      subtopology_id                     string
      partitions                         []int32
      assignment_epochs                  []int32?                       @0 =null
    active_tasks_pending_revocation      [TaskIds]
      subtopology_id                     string
      partitions                         []int32
      assignment_epochs                  []int32?                       @0 =null
    standby_tasks_pending_revocation     [TaskIds]
      subtopology_id                     string
      partitions                         []int32
      assignment_epochs                  []int32?                       @0 =null
    warmup_tasks_pending_revocation      [TaskIds]
      subtopology_id                     string
      partitions                         []int32
      assignment_epochs                  []int32?                       @0 =null
""")


STREAMS_GROUP_TOPOLOGY_KEY = data("StreamsGroupTopologyKey", "23-23", flexible=None, fields="""
    group_id                             string
""")


STREAMS_GROUP_TOPOLOGY_VALUE = data("StreamsGroupTopologyValue", "0-0", flexible="0+", fields="""
    epoch                                int32
    subtopologies                        [Subtopology]
      subtopology_id                     string
      source_topics                      []string
      source_topic_regex                 []string
      state_changelog_topics             [TopicInfo]
        name                             string
        partitions                       int32
        replication_factor               int16
        topic_configs                    [TopicConfig]
          key                            string
          value                          string
      repartition_sink_topics            []string
      repartition_source_topics          [TopicInfo]
        name                             string
        partitions                       int32
        replication_factor               int16
        topic_configs                    [TopicConfig]
          key                            string
          value                          string
      copartition_groups                 [CopartitionGroup]
        source_topics                    []int16
        source_topic_regex               []int16
        repartition_source_topics        []int16
""")
