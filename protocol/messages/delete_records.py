"""DeleteRecords: the declaration of every supported version."""

from kbroker.protocol.schema import api

DELETE_RECORDS = api(21, "DeleteRecords", "0-2", flexible="2+",
request="""
    topics                               [DeleteRecordsTopic]
      name                               string
      partitions                         [DeleteRecordsPartition]
        partition_index                  int32
        offset                           int64
    timeout_ms                           int32
""",
response="""
    throttle_time_ms                     int32
    topics                               [DeleteRecordsTopicResult]
      name                               string
      partitions                         [DeleteRecordsPartitionResult]
        partition_index                  int32
        low_watermark                    int64
        error_code                       int16
""")
