"""RenewDelegationToken: the declaration of every supported version (Kafka 4.2's: v0 went with KIP-896)."""

from kbroker.protocol.schema import api

RENEW_DELEGATION_TOKEN = api(39, "RenewDelegationToken", "1-2", flexible="2+",
request="""
    hmac                                 bytes
    renew_period_ms                      int64
""",
response="""
    error_code                           int16
    expiry_timestamp_ms                  int64
    throttle_time_ms                     int32
""")
