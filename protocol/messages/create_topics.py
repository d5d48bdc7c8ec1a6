"""CreateTopics: the declaration of every supported version."""

from kbroker.protocol.schema import api

CREATE_TOPICS = api(19, "CreateTopics", "2-7", flexible="5+",
request="""
    topics                               [CreatableTopic]
      name                               string
      num_partitions                     int32
      replication_factor                 int16
      assignments                        [CreatableReplicaAssignment]
        partition_index                  int32
        broker_ids                       []int32
      configs                            [CreatableTopicConfig]
        name                             string
        value                            string?
    timeout_ms                           int32                          =60000
    validate_only                        bool
""",
response="""
    throttle_time_ms                     int32
    topics                               [CreatableTopicResult]
      name                               string
      topic_id                           uuid                           7+
      error_code                         int16
      error_message                      string?
      topic_config_error_code            int16                          5+ @0
      num_partitions                     int32                          5+ =-1
      replication_factor                 int16                          5+ =-1
      configs                            [CreatableTopicConfigs]?       5+
        name                             string
        value                            string?
        read_only                        bool
        config_source                    int8                           =-1
        is_sensitive                     bool
""")

