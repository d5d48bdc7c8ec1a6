"""AddOffsetsToTxn: the declaration of every supported version."""

from kbroker.protocol.schema import api

ADD_OFFSETS_TO_TXN = api(25, "AddOffsetsToTxn", "0-4", flexible="3+",
request="""
    transactional_id                     string
    producer_id                          int64
    producer_epoch                       int16
    group_id                             string
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
""")

