"""DescribeClientQuotas: the declaration of every supported version."""

from kbroker.protocol.schema import api

DESCRIBE_CLIENT_QUOTAS = api(48, "DescribeClientQuotas", "0-1", flexible="1+",
request="""
    components                           [ComponentData]
      entity_type                        string
      match_type                         int8
      match                              string?
    strict                               bool
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?                        =null
    entries                              [EntryData]?
      entity                             [EntityData]
        entity_type                      string
        entity_name                      string?
      values                             [ValueData]
        key                              string
        value                            float64
""")
