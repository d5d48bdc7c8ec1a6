"""IncrementalAlterConfigs: the declaration of every supported version."""

from kbroker.protocol.schema import api

INCREMENTAL_ALTER_CONFIGS = api(44, "IncrementalAlterConfigs", "0-1", flexible="1+",
request="""
    resources                            [AlterConfigsResource]
      resource_type                      int8
      resource_name                      string
      configs                            [AlterableConfig]
        name                             string
        config_operation                 int8
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

