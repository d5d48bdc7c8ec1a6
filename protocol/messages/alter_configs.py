"""AlterConfigs: the declaration of every supported version."""

from kbroker.protocol.schema import api

ALTER_CONFIGS = api(33, "AlterConfigs", "0-2", flexible="2+",
request="""
    resources                            [AlterConfigsResource]
      resource_type                      int8
      resource_name                      string
      configs                            [AlterableConfig]
        name                             string
        value                            string?
    validate_only                        bool
""",
response="""
    throttle_time_ms                     int32
    responses                            [AlterConfigsResourceResponse]
      error_code                         int16
      error_message                      string?
      resource_type                      int8
      resource_name                      string
""")

