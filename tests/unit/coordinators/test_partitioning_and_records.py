"""Coordinator partition choice (Java's String.hashCode) and the __consumer_offsets and __transaction_state
record formats."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.coordinators.group import records
from kbroker.coordinators.partitioning import java_string_hash, kafka_abs, partition_for
from kbroker.coordinators.share import records as share_records
from kbroker.coordinators.transaction import records as txn_records
from kbroker.protocol import schema


@pytest.mark.parametrize("value,expected", [
    ("", 0),
    ("hello", 99162322),                     # "hello".hashCode()
    ("polygenelubricants", -(1 << 31)),      # the classic string whose hash is Integer.MIN_VALUE
    ("\U0001F600", 0xD83D * 31 + 0xDE00),    # a surrogate pair counts as two UTF-16 units
    ("é", 0xE9),
])
def test_java_string_hash(value, expected):
    assert java_string_hash(value) == expected


def test_kafka_abs_maps_min_value_to_zero():
    assert kafka_abs(-(1 << 31)) == 0 and kafka_abs(-5) == 5


def test_partition_for():
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert all(0 <= partition_for(f"group-{i}", 50) < 50 for i in range(200))


def test_offset_commit_record_round_trip_and_layout():
    key = records.offset_commit_key("g", "t", 3)
    # int16 key version 1, then group, topic (int16-length strings) and int32 partition
    assert key == struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)
    decoded = records.decode_key(key)
    assert decoded == records.OffsetKey("g", "t", 3)
    value = records.decode_value(decoded, records.offset_commit_value(42, 7, "meta", 1000))
    assert (value.offset, value.leader_epoch, value.metadata, value.commit_timestamp) == (42, 7, "meta", 1000)
    assert records.decode_value(decoded, None) is None     # a tombstone


def test_group_metadata_record_round_trip():
    key = records.group_metadata_key("g")
    assert records.decode_key(key) == records.GroupKey("g")
    member = {"member_id": "m1", "group_instance_id": "i1", "client_id": "c", "client_host": "/127.0.0.1",
              "rebalance_timeout": 30000, "session_timeout": 10000, "subscription": b"sub", "assignment": b"asg"}
    raw = records.group_metadata_value({"protocol_type": "consumer", "generation": 4, "protocol": "range",
                                        "leader": "m1", "current_state_timestamp": 123, "members": [member]})
    value = records.decode_value(records.GroupKey("g"), raw)
    assert (value.generation, value.protocol, value.leader) == (4, "range", "m1")
    assert value.members[0].group_instance_id == "i1" and bytes(value.members[0].assignment) == b"asg"


def test_unknown_key_versions_are_rejected():
    with pytest.raises(ValueError):
        records.decode_key(struct.pack(">h", 9) + b"\x00\x00")


_TXN_VALUES = st.fixed_dictionaries({
    "producer_id": st.integers(-1, 2**63 - 1), "producer_epoch": st.integers(-1, 32767),
    "transaction_timeout_ms": st.integers(0, 2**31 - 1), "transaction_status": st.integers(0, 7),
    "transaction_partitions": st.none() | st.lists(st.fixed_dictionaries({
        "topic": st.text(max_size=40), "partition_ids": st.lists(st.integers(0, 2**31 - 1), max_size=20)}),
        max_size=5),
    "transaction_last_update_timestamp_ms": st.integers(-1, 2**62), "transaction_start_timestamp_ms": st.integers(-1, 2**62)})


@settings(max_examples=300, deadline=None)
@given(_TXN_VALUES)
def test_transaction_state_value_packs_as_the_schema_encodes_it(fields):
    """The directly packed TransactionLogValue v0 is the schema's encoding, byte for byte, and decodes back."""
    out, _ = schema.encode(schema.data_struct("TransactionLogValue", 0), fields)
    packed = txn_records.value(fields)
    assert packed == struct.pack(">h", 0) + out.getvalue()
    decoded = txn_records.decode_value(packed)
    assert decoded.producer_id == fields["producer_id"] and decoded.transaction_status == fields["transaction_status"]
    assert decoded.transaction_start_timestamp_ms == fields["transaction_start_timestamp_ms"]
    if fields["transaction_partitions"] is None:
        assert decoded.transaction_partitions is None
    else:
        assert [(p.topic, list(p.partition_ids)) for p in decoded.transaction_partitions] == \
            [(p["topic"], p["partition_ids"]) for p in fields["transaction_partitions"]]


def test_transaction_state_key_is_the_same_each_time_and_decodes():
    assert txn_records.key("tx-é") is txn_records.key("tx-é")
    assert txn_records.decode_key(txn_records.key("tx-é")) == "tx-é"


@settings(max_examples=300, deadline=None)
@given(offset=st.integers(-1, 2**63 - 1), leader_epoch=st.integers(-1, 2**31 - 1), metadata=st.text(max_size=300),
       commit_timestamp=st.integers(-1, 2**62), expire_timestamp=st.none() | st.integers(0, 2**62))
def test_offset_commit_value_packs_as_the_schema_encodes_it(offset, leader_epoch, metadata, commit_timestamp,
                                                            expire_timestamp):
    """The directly packed OffsetCommitValue (v3, or v1 with an expiry) is the schema's encoding, byte for byte,
    and decodes back to what was committed."""
    version = 3 if expire_timestamp is None else 1
    fields = {"offset": offset, "leader_epoch": leader_epoch, "metadata": metadata,
              "commit_timestamp": commit_timestamp,
              "expire_timestamp": -1 if expire_timestamp is None else expire_timestamp}
    out, _ = schema.encode(schema.data_struct("OffsetCommitValue", version), fields)
    packed = records.offset_commit_value(offset, leader_epoch, metadata, commit_timestamp, fields["expire_timestamp"])
    assert packed == struct.pack(">h", version) + out.getvalue()
    decoded = records.decode_value(records.OffsetKey("g", "t", 0), packed)
    assert (decoded.offset, decoded.metadata, decoded.commit_timestamp) == (offset, metadata, commit_timestamp)
    if version == 3:
        assert decoded.leader_epoch == leader_epoch
    else:
        assert decoded.expire_timestamp == expire_timestamp


def test_offset_commit_key_is_the_same_each_time():
    assert records.offset_commit_key("g-é", "t", 1) is records.offset_commit_key("g-é", "t", 1)
    assert records.decode_key(records.offset_commit_key("g-é", "t", 1)) == records.OffsetKey("g-é", "t", 1)


def test_share_group_records_have_kafka_42s_layout():
    # ShareGroupMetadataValue: MetadataHash is a plain int64 in Kafka 4.2, not a tagged field
    assert records.share_group_value(3, 7) == struct.pack(">hiqB", 0, 3, 7, 0)
    # ShareGroupStatePartitionMetadataValue: initializing, initialized and deleting topics, in that order
    topic_id = bytes(range(16))
    value = records.share_partitions_value({topic_id: ("t", frozenset({1, 0}))})
    initialized = topic_id + b"\x02t" + b"\x03" + struct.pack(">ii", 0, 1) + b"\x00"
    assert value == struct.pack(">h", 0) + b"\x01" + b"\x02" + initialized + b"\x01" + b"\x00"


def test_share_snapshot_value_has_kafka_42s_layout():
    value = share_records.snapshot_value(2, 1, 5, 10, [(10, 11, 2, 1)], delivery_complete_count=2)
    version, epochs, start = struct.unpack_from(">h3iq", value)[0], struct.unpack_from(">3i", value, 2), \
        struct.unpack_from(">q", value, 14)[0]
    assert (version, epochs, start) == (0, (2, 1, 5), 10)
    create, write = struct.unpack_from(">qq", value, 22)
    assert create == write > 0
    assert value[38:] == b"\x02" + struct.pack(">qqbh", 10, 11, 2, 1) + b"\x00" + b"\x01\x00\x04" + struct.pack(
        ">i", 2)
    decoded = share_records.decode_value(value)
    assert (decoded.snapshot_epoch, decoded.delivery_complete_count, decoded.create_timestamp) == (2, 2, create)


@pytest.mark.parametrize("name,fields,read", [
    ("ShareSnapshotValueKbroker01", {"snapshot_epoch": 3, "state_epoch": 1, "leader_epoch": 2, "start_offset": 5,
                                     "state_batches": [{"first_offset": 5, "last_offset": 9, "delivery_state": 2,
                                                        "delivery_count": 1}]},
     lambda data: share_records.decode_value(data)),
    ("ShareGroupMetadataValueKbroker01", {"epoch": 4, "metadata_hash": 99},
     lambda data: records.decode_value(records.ShareGroupKey("g", 11), data)),
    ("ShareGroupMetadataValueKbroker01", {"epoch": 4, "metadata_hash": 0},
     lambda data: records.decode_value(records.ShareGroupKey("g", 11), data)),
    ("ShareGroupStatePartitionMetadataValueKbroker01",
     {"initialized_topics": [{"topic_id": bytes(16), "topic_name": "t", "partitions": [0, 1]}], "deleting_topics": []},
     lambda data: records.decode_value(records.ShareGroupKey("g", 15), data)),
])
def test_share_records_kbroker_01_wrote_are_still_read(name, fields, read):
    decoded = read(schema.encode_record(name, 0, fields))
    for field, value in fields.items():
        got = decoded[field]
        if isinstance(value, list):
            got = [dict((k, bytes(v) if isinstance(v, (bytes, memoryview)) else v) for k, v in item.items()
                        if k in value[0]) for item in got]
        assert got == value, field
