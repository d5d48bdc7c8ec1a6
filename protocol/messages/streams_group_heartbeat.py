"""StreamsGroupHeartbeat (KIP-1071): the declaration of every supported version (Kafka 4.2 serves v0)."""

from kbroker.protocol.schema import api

STREAMS_GROUP_HEARTBEAT = api(88, "StreamsGroupHeartbeat", "0-0", flexible="0+",
request="""
    group_id                             string
    member_id                            string
    member_epoch                         int32
    endpoint_information_epoch           int32
    instance_id                          string?                        =null
    rack_id                              string?                        =null
    rebalance_timeout_ms                 int32                          =-1
    topology                             Topology?                      =null
      epoch                              int32
      subtopologies                      [Subtopology]
        subtopology_id                   string
        source_topics                    []string
        source_topic_regex               []string
        state_changelog_topics           [TopicInfo]
          name                           string
          partitions                     int32
          replication_factor             int16
          topic_configs                  [KeyValue]
            key                          string
            value                        string
        repartition_sink_topics          []string
        repartition_source_topics        [TopicInfo]
          name                           string
          partitions                     int32
          replication_factor             int16
          topic_configs                  [KeyValue]
            key                          string
            value                        string
        copartition_groups               [CopartitionGroup]
          source_topics                  []int16
          source_topic_regex             []int16
          repartition_source_topics      []int16
    active_tasks                         [TaskIds]?                     =null
      subtopology_id                     string
      partitions                         []int32
    standby_tasks                        [TaskIds]?                     =null
      subtopology_id                     string
      partitions                         []int32
    warmup_tasks                         [TaskIds]?                     =null
      subtopology_id                     string
      partitions                         []int32
    process_id                           string?                        =null
    user_endpoint                        Endpoint?                      =null
      host                               string
      port                               uint16
    client_tags                          [KeyValue]?                    =null
      key                                string
      value                              string
    task_offsets                         [TaskOffset]?                  =null
      subtopology_id                     string
      partition                          int32
      offset                             int64
    task_end_offsets                     [TaskOffset]?                  =null
      subtopology_id                     string
      partition                          int32
      offset                             int64
    shutdown_application                 bool                           =false
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?                        =null
    member_id                            string
    member_epoch                         int32
    heartbeat_interval_ms                int32
    acceptable_recovery_lag              int32
    task_offset_interval_ms              int32
    status                               [Status]?                      =null
      status_code                        int8
      status_detail                      string
    active_tasks                         [TaskIds]?                     =null
      subtopology_id                     string
      partitions                         []int32
    standby_tasks                        [TaskIds]?                     =null
      subtopology_id                     string
      partitions                         []int32
    warmup_tasks                         [TaskIds]?                     =null
      subtopology_id                     string
      partitions                         []int32
    endpoint_information_epoch           int32
    partitions_by_user_endpoint          [EndpointToPartitions]?        =null
      user_endpoint                      Endpoint
        host                             string
        port                             uint16
      active_partitions                  [TopicPartition]
        topic                            string
        partitions                       []int32
      standby_partitions                 [TopicPartition]
        topic                            string
        partitions                       []int32
""")
