"""WriteTxnMarkers: the declaration of every supported version."""

from kbroker.protocol.schema import api

WRITE_TXN_MARKERS = api(27, "WriteTxnMarkers", "1-2", flexible="1+",
request="""
    markers                              [WritableTxnMarker]
      producer_id                        int64
      producer_epoch                     int16
      transaction_result                 bool
      topics                             [WritableTxnMarkerTopic]
        name                             string
        partition_indexes                []int32
      coordinator_epoch                  int32
      transaction_version                int8                           2+ =0
""",
response="""
    markers                              [WritableTxnMarkerResult]
      producer_id                        int64
      topics                             [WritableTxnMarkerTopicResult]
        name                             string
        partitions                       [WritableTxnMarkerPartitionResult]
          partition_index                int32
          error_code                     int16
""")

