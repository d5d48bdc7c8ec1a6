"""AlterClientQuotas: the declaration of every supported version."""

from kbroker.protocol.schema import api

ALTER_CLIENT_QUOTAS = api(49, "AlterClientQuotas", "0-1", flexible="1+",
request="""
    entries                              [EntryData]
      entity                             [EntityData]
        entity_type                      string
        entity_name                      string?
      ops                                [OpData]
        key                              string
        value                            float64
        remove                           bool
    validate_only                        bool
""",
response="""
    throttle_time_ms                     int32
    entries                              [EntryData]
      error_code                         int16
      error_message                      string?                        =null
      entity                             [EntityData]
        entity_type                      string
        entity_name                      string?
""")
