"""EndTxn: the declaration of every supported version."""

from kbroker.protocol.schema import api

END_TXN = api(26, "EndTxn", "0-5", flexible="3+",
request="""
    transactional_id                     string
    producer_id                          int64
    producer_epoch                       int16
    committed                            bool
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    producer_id                          int64                          5+ =-1
    producer_epoch                       int16                          5+ =-1
""")

