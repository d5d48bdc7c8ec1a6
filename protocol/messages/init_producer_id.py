"""InitProducerId: the declaration of every supported version."""

from kbroker.protocol.schema import api

INIT_PRODUCER_ID = api(22, "InitProducerId", "0-5", flexible="2+",
request="""
    transactional_id                     string?
    transaction_timeout_ms               int32
    producer_id                          int64                          3+ =-1
    producer_epoch                       int16                          3+ =-1
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    producer_id                          int64                          =-1
    producer_epoch                       int16
""")

