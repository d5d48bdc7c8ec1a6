"""StreamsGroupDescribe (KIP-1071): the declaration of every supported version (Kafka 4.2 serves v0)."""

from kbroker.protocol.schema import api

STREAMS_GROUP_DESCRIBE = api(89, "StreamsGroupDescribe", "0-0", flexible="0+",
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
      topology                           Topology?                      =null
        epoch                            int32
        subtopologies                    [Subtopology]?                 =null
          subtopology_id                 string
          source_topics                  []string
          repartition_sink_topics        []string
          state_changelog_topics         [TopicInfo]
            name                         string
            partitions                   int32
            replication_factor           int16
            topic_configs                [KeyValue]
              key                        string
              value                      string
          repartition_source_topics      [TopicInfo]
            name                         string
            partitions                   int32
            replication_factor           int16
            topic_configs                [KeyValue]
              key                        string
              value                      string
      members                            [Member]
        member_id                        string
        member_epoch                     int32
        instance_id                      string?                        =null
        rack_id                          string?                        =null
        client_id                        string
        client_host                      string
        topology_epoch                   int32
        process_id                       string
        user_endpoint                    Endpoint?                      =null
          host                           string
          port                           uint16
        client_tags                      [KeyValue]
          key                            string
          value                          string
        task_offsets                     [TaskOffset]
          subtopology_id                 string
          partition                      int32
          offset                         int64
        task_end_offsets                 [TaskOffset]
          subtopology_id                 string
          partition                      int32
          offset                         int64
        assignment                       Assignment
          active_tasks                   [TaskIds]
            subtopology_id               string
            partitions                   []int32
          standby_tasks                  [TaskIds]
            subtopology_id               string
            partitions                   []int32
          warmup_tasks                   [TaskIds]
            subtopology_id               string
            partitions                   []int32
        target_assignment                Assignment
          active_tasks                   [TaskIds]
            subtopology_id               string
            partitions                   []int32
          standby_tasks                  [TaskIds]
            subtopology_id               string
            partitions                   []int32
          warmup_tasks                   [TaskIds]
            subtopology_id               string
            partitions                   []int32
        is_classic                       bool
      authorized_operations              int32                          =-2147483648
""")
