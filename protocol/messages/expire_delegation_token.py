"""ExpireDelegationToken: the declaration of every supported version (Kafka 4.2's: v0 went with KIP-896)."""

from kbroker.protocol.schema import api

EXPIRE_DELEGATION_TOKEN = api(40, "ExpireDelegationToken", "1-2", flexible="2+",
request="""
    hmac                                 bytes
    expiry_time_period_ms                int64
""",
response="""
    error_code                           int16
    expiry_timestamp_ms                  int64
    throttle_time_ms                     int32
""")
