"""SaslHandshake: the declaration of every supported version."""

from kbroker.protocol.schema import api

SASL_HANDSHAKE = api(17, "SaslHandshake", "0-1", flexible=None,
request="""
    mechanism                            string
""",
response="""
    error_code                           int16
    mechanisms                           []string
""")
