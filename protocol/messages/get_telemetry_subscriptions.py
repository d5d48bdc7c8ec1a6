"""GetTelemetrySubscriptions (KIP-714): the declaration of every supported version."""

from kbroker.protocol.schema import api

GET_TELEMETRY_SUBSCRIPTIONS = api(71, "GetTelemetrySubscriptions", "0-0", flexible="0+",
request="""
    client_instance_id                   uuid
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    client_instance_id                   uuid
    subscription_id                      int32
    accepted_compression_types           []int8
    push_interval_ms                     int32
    telemetry_max_bytes                  int32
    delta_temporality                    bool
    requested_metrics                    []string
""")
