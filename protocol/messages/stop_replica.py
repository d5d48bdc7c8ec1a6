"""StopReplica: the controller tells a broker to stop (and maybe delete) replicas."""

from kbroker.protocol.schema import api

STOP_REPLICA = api(5, "StopReplica", "3-4", flexible="2+",
request="""
    controller_id                        int32
    is_k_raft_controller                 bool                           4+ =false
    controller_epoch                     int32
    broker_epoch                         int64                          =-1
    topic_states                         [StopReplicaTopicState]
      topic_name                         string
      partition_states                   [StopReplicaPartitionState]
        partition_index                  int32
        leader_epoch                     int32                          =-1
        delete_partition                 bool
""",
response="""
    error_code                           int16
    partition_errors                     [StopReplicaPartitionError]
      topic_name                         string
      partition_index                    int32
      error_code                         int16
""")
