"""PushTelemetry (KIP-714): the declaration of every supported version."""

from kbroker.protocol.schema import api

PUSH_TELEMETRY = api(72, "PushTelemetry", "0-0", flexible="0+",
request="""
    client_instance_id                   uuid
    subscription_id                      int32
    terminating                          bool
    compression_type                     int8
    metrics                              bytes
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
""")
