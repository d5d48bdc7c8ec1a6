"""CreatePartitions: the declaration of every supported version."""

from kbroker.protocol.schema import api

CREATE_PARTITIONS = api(37, "CreatePartitions", "0-3", flexible="2+",
request="""
    topics                               [CreatePartitionsTopic]
      name                               string
      count                              int32
      assignments                        [CreatePartitionsAssignment]?
        broker_ids                       []int32
    timeout_ms                           int32
    validate_only                        bool
""",
response="""
    throttle_time_ms                     int32
    results                              [CreatePartitionsTopicResult]
      name                               string
      error_code                         int16
      error_message                      string?                        =null
""")

