"""DescribeUserScramCredentials: the declaration of every supported version."""

from kbroker.protocol.schema import api

DESCRIBE_USER_SCRAM_CREDENTIALS = api(50, "DescribeUserScramCredentials", "0", flexible="0+",
request="""
    users                                [UserName]?
      name                               string
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?                        =null
    results                              [DescribeUserScramCredentialsResult]
      user                               string
      error_code                         int16
      error_message                      string?                        =null
      credential_infos                   [CredentialInfo]
        mechanism                        int8
        iterations                       int32
""")
