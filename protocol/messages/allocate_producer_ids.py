"""AllocateProducerIds (KIP-730): a broker asks the controller for a block of producer ids. Kafka's brokers of a
ZooKeeper cluster (3.0+) take their blocks this way; kbroker's take theirs from ZooKeeper itself."""

from kbroker.protocol.schema import api

ALLOCATE_PRODUCER_IDS = api(67, "AllocateProducerIds", "0-0", flexible="0+",
request="""
    broker_id                            int32
    broker_epoch                         int64                          =-1
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    producer_id_start                    int64
    producer_id_len                      int32
""")
