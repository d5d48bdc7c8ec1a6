"""The consumer protocol embedded in the classic group protocol: what a consumer puts in JoinGroup's protocol
metadata (its subscription) and what SyncGroup hands it back (its assignment). The coordinator reads them
only where a classic member meets a KIP-848 consumer group (online migration)."""

from kbroker.protocol.schema import data

CONSUMER_PROTOCOL_SUBSCRIPTION = data("ConsumerProtocolSubscription", "0-3", flexible=None, fields="""
    topics                               []string
    user_data                            bytes?                         =null
    owned_partitions                     [TopicPartition]               1+
      topic                              string
      partitions                         []int32
    generation_id                        int32                          2+ =-1
    rack_id                              string?                        3+ =null
""")


CONSUMER_PROTOCOL_ASSIGNMENT = data("ConsumerProtocolAssignment", "0-3", flexible=None, fields="""
    assigned_partitions                  [TopicPartition]
      topic                              string
      partitions                         []int32
    user_data                            bytes?                         =null
""")
