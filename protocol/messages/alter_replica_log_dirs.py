"""AlterReplicaLogDirs: the declaration of every supported version."""

from kbroker.protocol.schema import api

ALTER_REPLICA_LOG_DIRS = api(34, "AlterReplicaLogDirs", "0-2", flexible="2+",
request="""
    dirs                                 [AlterReplicaLogDir]
      path                               string
      topics                             [AlterReplicaLogDirTopic]
        name                             string
        partitions                       []int32
""",
response="""
    throttle_time_ms                     int32
    results                              [AlterReplicaLogDirTopicResult]
      topic_name                         string
      partitions                         [AlterReplicaLogDirPartitionResult]
        partition_index                  int32
        error_code                       int16
""")
