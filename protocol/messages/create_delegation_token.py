"""CreateDelegationToken: the declaration of every supported version (Kafka 4.2's: v0 went with KIP-896)."""

from kbroker.protocol.schema import api

CREATE_DELEGATION_TOKEN = api(38, "CreateDelegationToken", "1-3", flexible="2+",
request="""
    owner_principal_type                 string?        3+
    owner_principal_name                 string?        3+
    renewers                             [CreatableRenewers]
      principal_type                     string
      principal_name                     string
    max_lifetime_ms                      int64
""",
response="""
    error_code                           int16
    principal_type                       string
    principal_name                       string
    token_requester_principal_type       string         3+
    token_requester_principal_name       string         3+
    issue_timestamp_ms                   int64
    expiry_timestamp_ms                  int64
    max_timestamp_ms                     int64
    token_id                             string
    hmac                                 bytes
    throttle_time_ms                     int32
""")
