"""DescribeLogDirs: the declaration of every supported version."""

from kbroker.protocol.schema import api

DESCRIBE_LOG_DIRS = api(35, "DescribeLogDirs", "0-4", flexible="2+",
request="""
    topics                               [DescribableLogDirTopic]?
      topic                              string
      partitions                         []int32
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16          3+
    results                              [DescribeLogDirsResult]
      error_code                         int16
      log_dir                            string
      topics                             [DescribeLogDirsTopic]
        name                             string
        partitions                       [DescribeLogDirsPartition]
          partition_index                int32
          partition_size                 int64
          offset_lag                     int64
          is_future_key                  bool
      total_bytes                        int64          4+              =-1
      usable_bytes                       int64          4+              =-1
""")
