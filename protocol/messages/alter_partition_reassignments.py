"""AlterPartitionReassignments: the declaration of every supported version."""

from kbroker.protocol.schema import api

ALTER_PARTITION_REASSIGNMENTS = api(45, "AlterPartitionReassignments", "0-1", flexible="0+",
request="""
    timeout_ms                           int32                          =60000
    allow_replication_factor_change      bool                           1+ =true
    topics                               [ReassignableTopic]
      name                               string
      partitions                         [ReassignablePartition]
        partition_index                  int32
        replicas                         []int32?                       =null
""",
response="""
    throttle_time_ms                     int32
    allow_replication_factor_change      bool                           1+ =true
    error_code                           int16
    error_message                        string?                        =null
    responses                            [ReassignableTopicResponse]
      name                               string
      partitions                         [ReassignablePartitionResponse]
        partition_index                  int32
        error_code                       int16
        error_message                    string?                        =null
""")
