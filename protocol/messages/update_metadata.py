"""UpdateMetadata: the controller tells every broker the live brokers and every partition's state."""

from kbroker.protocol.schema import api

UPDATE_METADATA = api(6, "UpdateMetadata", "5-8", flexible="6+",
request="""
    controller_id                        int32
    is_k_raft_controller                 bool                           8+ =false
    type                                 int8                           8+ @0 =0
    controller_epoch                     int32
    broker_epoch                         int64                          =-1
    topic_states                         [UpdateMetadataTopicState]
      topic_name                         string
      topic_id                           uuid                           7+
      partition_states                   [UpdateMetadataPartitionState]
        partition_index                  int32
        controller_epoch                 int32
        leader                           int32
        leader_epoch                     int32
        isr                              []int32
        zk_version                       int32
        replicas                         []int32
        offline_replicas                 []int32
    live_brokers                         [UpdateMetadataBroker]
      id                                 int32
      endpoints                          [UpdateMetadataEndpoint]
        port                             int32
        host                             string
        listener                         string
        security_protocol                int16
      rack                               string?
""",
response="""
    error_code                           int16
""")
