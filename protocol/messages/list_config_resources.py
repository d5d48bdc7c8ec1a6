"""ListConfigResources (KIP-1000, renamed by KIP-1142 in Kafka 4.1): the declaration of every supported version."""

from kbroker.protocol.schema import api

LIST_CONFIG_RESOURCES = api(74, "ListConfigResources", "0-1", flexible="0+",
request="""
    resource_types                       []int8                         1+
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    config_resources                     [ConfigResource]
      resource_name                      string
      resource_type                      int8                           1+ =16
""")
