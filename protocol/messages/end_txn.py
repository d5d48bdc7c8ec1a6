"""EndTxn: the declaration of every supported version."""

from kbroker.protocol.schema import api

END_TXN = api(26, "EndTxn", "0-4", flexible="3+",
request="""
    transactional_id                     string
    producer_id                          int64
    producer_epoch                       int16
    committed                            bool
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
""")

