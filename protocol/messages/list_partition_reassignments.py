"""ListPartitionReassignments: the declaration of every supported version."""

from kbroker.protocol.schema import api

LIST_PARTITION_REASSIGNMENTS = api(46, "ListPartitionReassignments", "0", flexible="0+",
request="""
    timeout_ms                           int32                          =60000
    topics                               [ListPartitionReassignmentsTopics]?  =null
      name                               string
      partition_indexes                  []int32
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?                        =null
    topics                               [OngoingTopicReassignment]
      name                               string
      partitions                         [OngoingPartitionReassignment]
        partition_index                  int32
        replicas                         []int32
        adding_replicas                  []int32
        removing_replicas                []int32
""")
