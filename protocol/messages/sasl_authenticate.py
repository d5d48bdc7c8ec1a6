"""SaslAuthenticate: the declaration of every supported version."""

from kbroker.protocol.schema import api

SASL_AUTHENTICATE = api(36, "SaslAuthenticate", "0-2", flexible="2+",
request="""
    auth_bytes                           bytes
""",
response="""
    error_code                           int16
    error_message                        string?                        =null
    auth_bytes                           bytes
    session_lifetime_ms                  int64                          1+ =0
""")
