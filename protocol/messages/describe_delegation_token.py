"""DescribeDelegationToken: the declaration of every supported version (Kafka 4.2's: v0 went with KIP-896)."""

from kbroker.protocol.schema import api

DESCRIBE_DELEGATION_TOKEN = api(41, "DescribeDelegationToken", "1-3", flexible="2+",
request="""
    owners                               [DescribeDelegationTokenOwner]?
      principal_type                     string
      principal_name                     string
""",
response="""
    error_code                           int16
    tokens                               [DescribedDelegationToken]
      principal_type                     string
      principal_name                     string
      token_requester_principal_type     string         3+
      token_requester_principal_name     string         3+
      issue_timestamp                    int64
      expiry_timestamp                   int64
      max_timestamp                      int64
      token_id                           string
      hmac                               bytes
      renewers                           [DescribedDelegationTokenRenewer]
        principal_type                   string
        principal_name                   string
    throttle_time_ms                     int32
""")
