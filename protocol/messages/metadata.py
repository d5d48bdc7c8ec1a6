"""Metadata: the declaration of every supported version."""

from kbroker.protocol.schema import api

METADATA = api(3, "Metadata", "0-13", flexible="9+",
request="""
    topics                               [MetadataRequestTopic]?1+
      topic_id                           uuid                           10+
      name                               string?10+
    allow_auto_topic_creation            bool                           4+ =true
    include_cluster_authorized_operations bool                           8-10
    include_topic_authorized_operations  bool                           8+
""",
response="""
    throttle_time_ms                     int32                          3+
    brokers                              [MetadataResponseBroker]
      node_id                            int32
      host                               string
      port                               int32
      rack                               string?                        1+ =null
    cluster_id                           string?                        2+ =null
    controller_id                        int32                          1+ =-1
    topics                               [MetadataResponseTopic]
      error_code                         int16
      name                               string?12+
      topic_id                           uuid                           10+
      is_internal                        bool                           1+
      partitions                         [MetadataResponsePartition]
        error_code                       int16
        partition_index                  int32
        leader_id                        int32
        leader_epoch                     int32                          7+ =-1
        replica_nodes                    []int32
        isr_nodes                        []int32
        offline_replicas                 []int32                        5+
      topic_authorized_operations        int32                          8+ =-2147483648
    cluster_authorized_operations        int32                          8-10 =-2147483648
    error_code                           int16                          13+
""")

