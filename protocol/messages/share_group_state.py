"""The share coordinator's APIs (KIP-932): a share-partition leader initializes, reads and writes the state of
a share partition at the coordinator of its key (group, topic id, partition)."""

from kbroker.protocol.schema import api

INITIALIZE_SHARE_GROUP_STATE = api(83, "InitializeShareGroupState", "0-0", flexible="0+",
request="""
    group_id                             string
    topics                               [InitializeStateData]
      topic_id                           uuid
      partitions                         [PartitionData]
        partition                        int32
        state_epoch                      int32
        start_offset                     int64
""",
response="""
    results                              [InitializeStateResult]
      topic_id                           uuid
      partitions                         [PartitionResult]
        partition                        int32
        error_code                       int16
        error_message                    string?                        =null
""")

READ_SHARE_GROUP_STATE = api(84, "ReadShareGroupState", "0-0", flexible="0+",
request="""
    group_id                             string
    topics                               [ReadStateData]
      topic_id                           uuid
      partitions                         [PartitionData]
        partition                        int32
        leader_epoch                     int32
""",
response="""
    results                              [ReadStateResult]
      topic_id                           uuid
      partitions                         [PartitionResult]
        partition                        int32
        error_code                       int16
        error_message                    string?                        =null
        state_epoch                      int32
        start_offset                     int64
        state_batches                    [StateBatch]
          first_offset                   int64
          last_offset                    int64
          delivery_state                 int8
          delivery_count                 int16
""")

WRITE_SHARE_GROUP_STATE = api(85, "WriteShareGroupState", "0-1", flexible="0+",
request="""
    group_id                             string
    topics                               [WriteStateData]
      topic_id                           uuid
      partitions                         [PartitionData]
        partition                        int32
        state_epoch                      int32
        leader_epoch                     int32
        start_offset                     int64
        delivery_complete_count          int32                          1+ =-1
        state_batches                    [StateBatch]
          first_offset                   int64
          last_offset                    int64
          delivery_state                 int8
          delivery_count                 int16
""",
response="""
    results                              [WriteStateResult]
      topic_id                           uuid
      partitions                         [PartitionResult]
        partition                        int32
        error_code                       int16
        error_message                    string?                        =null
""")

DELETE_SHARE_GROUP_STATE = api(86, "DeleteShareGroupState", "0-0", flexible="0+",
request="""
    group_id                             string
    topics                               [DeleteStateData]
      topic_id                           uuid
      partitions                         [PartitionData]
        partition                        int32
""",
response="""
    results                              [DeleteStateResult]
      topic_id                           uuid
      partitions                         [PartitionResult]
        partition                        int32
        error_code                       int16
        error_message                    string?                        =null
""")

READ_SHARE_GROUP_STATE_SUMMARY = api(87, "ReadShareGroupStateSummary", "0-1", flexible="0+",
request="""
    group_id                             string
    topics                               [ReadStateSummaryData]
      topic_id                           uuid
      partitions                         [PartitionData]
        partition                        int32
        leader_epoch                     int32
""",
response="""
    results                              [ReadStateSummaryResult]
      topic_id                           uuid
      partitions                         [PartitionResult]
        partition                        int32
        error_code                       int16
        error_message                    string?                        =null
        state_epoch                      int32
        leader_epoch                     int32
        start_offset                     int64
        delivery_complete_count          int32                          1+ =-1
""")
