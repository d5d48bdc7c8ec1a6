"""ApiVersions: the declaration of every supported version."""

from kbroker.protocol.schema import api

API_VERSIONS = api(18, "ApiVersions", "0-4", flexible="3+",
request="""
    client_software_name                 string                         3+
    client_software_version              string                         3+
""",
response="""
    error_code                           int16
    api_keys                             [ApiVersion]
      api_key                            int16
      min_version                        int16
      max_version                        int16
    throttle_time_ms                     int32                          1+
    supported_features                   [SupportedFeatureKey]          3+ @0
      name                               string
      min_version                        int16
      max_version                        int16
    finalized_features_epoch             int64                          3+ @1 =-1
    finalized_features                   [FinalizedFeatureKey]          3+ @2
      name                               string
      max_version_level                  int16
      min_version_level                  int16
    zk_migration_ready                   bool                           3+ @3
""")

