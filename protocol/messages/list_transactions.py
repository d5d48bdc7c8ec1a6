"""ListTransactions: the declaration of every supported version."""

from kbroker.protocol.schema import api

LIST_TRANSACTIONS = api(66, "ListTransactions", "0-2", flexible="0+",
request="""
    state_filters                        []string
    producer_id_filters                  []int64
    duration_filter                      int64                          1+ =-1
    transactional_id_pattern             string?                        2+ =null
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    unknown_state_filters                []string
    transaction_states                   [TransactionState]
      transactional_id                   string
      producer_id                        int64
      transaction_state                  string
""")

