"""ControlledShutdown: a stopping broker asks the controller to move its leaderships away first."""

from kbroker.protocol.schema import api

CONTROLLED_SHUTDOWN = api(7, "ControlledShutdown", "1-3", flexible="3+",
request="""
    broker_id                            int32
    broker_epoch                         int64                          2+ =-1
""",
response="""
    error_code                           int16
    remaining_partitions                 [RemainingPartition]
      topic_name                         string
      partition_index                    int32
""")
