"""DescribeCluster: the declaration of every supported version."""

from kbroker.protocol.schema import api

DESCRIBE_CLUSTER = api(60, "DescribeCluster", "0-2", flexible="0+",
request="""
    include_cluster_authorized_operations bool
    endpoint_type                        int8                           1+ =1
    include_fenced_brokers               bool                           2+
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?                        =null
    endpoint_type                        int8                           1+ =1
    cluster_id                           string
    controller_id                        int32                          =-1
    brokers                              [DescribeClusterBroker]
      broker_id                          int32
      host                               string
      port                               int32
      rack                               string?                        =null
      is_fenced                          bool                           2+
    cluster_authorized_operations        int32                          =-2147483648
""")

