"""DescribeConfigs: the declaration of every supported version."""

from kbroker.protocol.schema import api

DESCRIBE_CONFIGS = api(32, "DescribeConfigs", "0-4", flexible="4+",
request="""
    resources                            [DescribeConfigsResource]
      resource_type                      int8
      resource_name                      string
      configuration_keys                 []string?
    include_synonyms                     bool                           1+
    include_documentation                bool                           3+
""",
response="""
    throttle_time_ms                     int32
    results                              [DescribeConfigsResult]
      error_code                         int16
      error_message                      string?
      resource_type                      int8
      resource_name                      string
      configs                            [DescribeConfigsResourceResult]
        name                             string
        value                            string?
        read_only                        bool
        is_default                       bool                           0
        config_source                    int8                           1+ =-1
        is_sensitive                     bool
        synonyms                         [DescribeConfigsSynonym]       1+
          name                           string
          value                          string?
          source                         int8
        config_type                      int8                           3+
        documentation                    string?                        3+
""")

