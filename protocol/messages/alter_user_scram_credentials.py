"""AlterUserScramCredentials: the declaration of every supported version."""

from kbroker.protocol.schema import api

ALTER_USER_SCRAM_CREDENTIALS = api(51, "AlterUserScramCredentials", "0", flexible="0+",
request="""
    deletions                            [ScramCredentialDeletion]
      name                               string
      mechanism                          int8
    upsertions                           [ScramCredentialUpsertion]
      name                               string
      mechanism                          int8
      iterations                         int32
      salt                               bytes
      salted_password                    bytes
""",
response="""
    throttle_time_ms                     int32
    results                              [AlterUserScramCredentialsResult]
      user                               string
      error_code                         int16
      error_message                      string?                        =null
""")
