"""UpdateFeatures (KIP-584; KIP-778's upgrade types from v1): the declaration of every supported version."""

from kbroker.protocol.schema import api

UPDATE_FEATURES = api(57, "UpdateFeatures", "0-2", flexible="0+",
request="""
    timeout_ms                           int32                          =60000
    feature_updates                      [FeatureUpdateKey]
      feature                            string
      max_version_level                  int16
      allow_downgrade                    bool                           0-0
      upgrade_type                       int8                           1+ =1
    validate_only                        bool                           1+
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?
    results                              [UpdatableFeatureResult]       0-1
      feature                            string
      error_code                         int16
      error_message                      string?
""")
