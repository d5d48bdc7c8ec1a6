"""ElectLeaders: preferred (0) or unclean (1) leader election for the given partitions, or all."""

from kbroker.protocol.schema import api

ELECT_LEADERS = api(43, "ElectLeaders", "0-2", flexible="2+",
request="""
    election_type                        int8                           1+
    topic_partitions                     [TopicPartitions]?
      topic                              string
      partitions                         []int32
    timeout_ms                           int32                          =60000
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16                          1+
    replica_election_results             [ReplicaElectionResult]
      topic                              string
      partition_result                   [PartitionResult]
        partition_id                     int32
        error_code                       int16
        error_message                    string?
""")
