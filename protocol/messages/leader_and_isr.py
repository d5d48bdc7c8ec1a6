"""LeaderAndIsr: the controller tells a broker which partitions it leads or follows (ZooKeeper mode)."""

from kbroker.protocol.schema import api

LEADER_AND_ISR = api(4, "LeaderAndIsr", "5-7", flexible="4+",
request="""
    controller_id                        int32
    is_k_raft_controller                 bool                           7+ =false
    controller_epoch                     int32
    broker_epoch                         int64                          =-1
    type                                 int8
    topic_states                         [LeaderAndIsrTopicState]
      topic_name                         string
      topic_id                           uuid
      partition_states                   [LeaderAndIsrPartitionState]
        partition_index                  int32
        controller_epoch                 int32
        leader                           int32
        leader_epoch                     int32
        isr                              []int32
        partition_epoch                  int32
        replicas                         []int32
        adding_replicas                  []int32
        removing_replicas                []int32
        is_new                           bool                           =false
        leader_recovery_state            int8                           6+ =0
    live_leaders                         [LeaderAndIsrLiveLeader]
      broker_id                          int32
      host_name                          string
      port                               int32
""",
response="""
    error_code                           int16
    topics                               [LeaderAndIsrTopicError]
      topic_id                           uuid
      partition_errors                   [LeaderAndIsrPartitionError]
        partition_index                  int32
        error_code                       int16
""")
