"""The generated codecs (protocol/codegen.py) against construct's interpretation, the source of truth: for
every (api, version, direction) and every internal record schema, random messages encode to the same bytes and
decode to the same values both ways; short and corrupted frames fail with an error the connection handles;
file regions in a records field come back at the same positions."""

from __future__ import annotations

import io
import os
import struct
import tempfile

import pytest
from construct import ConstructError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.protocol import schema
from kbroker.protocol.types import BufferReader, Encoded, FileRegion, Rows
from tests.unit.protocol.test_roundtrip import CASES, struct_strategy

HANDLED = (ConstructError, UnicodeDecodeError, ValueError, IndexError)   # what Connection._dispatch catches


def plain(value):
    """Decoded values made comparable: memoryviews as bytes, Messages as dicts, floats as their bits (a flipped
    byte can make a float64 NaN, which equals nothing, not even the same NaN from the other decoder)."""
    if isinstance(value, float):
        return ("float64", struct.pack(">d", value))
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def check_same(struct, message) -> bytes:
    by_construct = schema.encode_construct(struct, message)[0].getvalue()
    generated = schema.encode(struct, message)[0].getvalue()
    assert generated == by_construct
    reference = schema.decode_construct(struct, BufferReader(by_construct))
    reader = BufferReader(by_construct)
    decoded = schema.decode(struct, reader)
    assert plain(decoded) == plain(reference)
    assert reader.remaining() == 0
    assert_attributes_read_as_items(decoded)
    assert_attributes_read_as_items(reference)
    return by_construct


def assert_attributes_read_as_items(value) -> None:
    """Every field of a decoded message (at every depth) reads the same as an attribute as by its key, but for
    names that are dict methods, which stay methods."""
    if isinstance(value, list):
        for item in value:
            assert_attributes_read_as_items(item)
    elif isinstance(value, dict):
        assert isinstance(value, schema.Message)
        for key, item in value.items():
            if not hasattr(dict, key):
                assert getattr(value, key) is item
            assert_attributes_read_as_items(item)


def _check_declaration(struct, fields, version, flexible, response_of: int | None = None):
    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(struct_strategy(fields, version, flexible), st.data())
    def check(message, data):
        encoded = check_same(struct, message)
        assert schema.encode(struct, as_rows(fields, message))[0].getvalue() == encoded
        if response_of is not None:   # (a response: its top-level arrays of structs, each element encoded alone)
            assert schema.encode(struct, as_encoded(response_of, version, fields, message))[0].getvalue() == encoded
        # Cut short, or with a byte changed: both fail with an error the connection handles, or both decode
        # (a changed byte inside a number, say) to the same values.
        if encoded:
            cut = data.draw(st.integers(0, len(encoded) - 1))
            assert_same_outcome(struct, encoded[:cut])
            flip = data.draw(st.integers(0, len(encoded) - 1))
            corrupted = bytearray(encoded)
            corrupted[flip] ^= data.draw(st.integers(1, 255))
            assert_same_outcome(struct, bytes(corrupted))

    check()


def as_rows(fields, message: dict) -> dict:
    """``message`` with every array of structs in it (at any depth) given as ``Rows``: each element a tuple of
    the struct's declared fields in order, a field the message leaves out as its default."""
    out = dict(message)
    for f in fields:
        value = message.get(f.name)
        if not f.is_struct or value is None:
            continue
        if f.is_array:
            elements = (as_rows(f.fields, element or {}) for element in value)
            out[f.name] = Rows(tuple(e.get(g.name, g.default) for g in f.fields) for e in elements)
        else:
            out[f.name] = as_rows(f.fields, value)
    return out


def as_encoded(api_key: int, version: int, fields, message: dict) -> dict:
    """``message`` with each element of its top-level arrays of structs encoded on its own (``types.Encoded``)."""
    out = dict(message)
    for f in fields:
        value = message.get(f.name)
        if f.is_struct and f.is_array and value is not None and version in f.versions:
            encode = schema.element_encoder(api_key, version, f.name)
            out[f.name] = [encode(element or {}) for element in value]
            assert all(type(e) is Encoded for e in out[f.name])
    return out


def assert_same_outcome(struct, frame: bytes) -> None:
    outcomes = []
    for decode in (schema.decode, schema.decode_construct):
        reader = BufferReader(frame)
        try:
            outcomes.append(("decoded", plain(decode(struct, reader)), reader.remaining()))
        except HANDLED:
            outcomes.append(("refused",))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("api_key,version,is_request", CASES,
                         ids=[f"{schema.REGISTRY[a].name}-v{v}-{'req' if r else 'resp'}" for a, v, r in CASES])
def test_generated_codecs_match_construct(api_key, version, is_request):
    declared = schema.REGISTRY[api_key]
    fields = declared.request if is_request else declared.response
    _check_declaration(schema.struct_for(api_key, version, is_request), fields, version,
                       declared.is_flexible(version), None if is_request else api_key)


DATA_CASES = [(d.name, v) for d in schema.DATA.values() for v in range(d.versions.low, d.versions.high + 1)]


@pytest.mark.parametrize("name,version", DATA_CASES, ids=[f"{n}-v{v}" for n, v in DATA_CASES])
def test_generated_codecs_match_construct_for_internal_records(name, version):
    declared = schema.DATA[name]
    _check_declaration(schema.data_struct(name, version), declared.fields, version, declared.is_flexible(version))


@pytest.mark.parametrize("version", [4, 11, 12])
def test_file_regions_come_back_at_the_same_positions(version):
    with tempfile.TemporaryFile() as f:
        f.write(os.urandom(300))
        f.flush()
        regions = [FileRegion(f, 0, 100), FileRegion(f, 100, 200)]
        response = {"responses": [{"topic": "t", "topic_id": bytes(16), "partitions": [
            {"partition_index": 0, "records": regions[0]},
            {"partition_index": 1, "records": [b"head", regions[1]]}]}]}
        struct = schema.struct_for(1, version, False)
        generated_out, generated = schema.encode(struct, response, _at_end(io.BytesIO(b"xyz")))
        reference_out, reference = schema.encode_construct(struct, response,
                                                           _at_end(io.BytesIO(b"xyz")))
        assert generated == reference and len(generated) == 2
        assert generated_out.getvalue() == reference_out.getvalue()


def _at_end(out: io.BytesIO) -> io.BytesIO:
    out.seek(0, 2)
    return out


def test_a_nullable_struct_is_an_int8_marker_then_its_fields():
    """Kafka writes a struct field with nullableVersions as -1 (null) or 1 followed by the struct
    (DescribeTopicPartitions' cursor): both codecs agree on those bytes and read them back."""
    struct = schema.struct_for(75, 0, True)
    head = bytes.fromhex("02" "0261" "00" "000007d0")   # topics [{name: "a"}], response_partition_limit 2000
    without = {"topics": [{"name": "a"}], "response_partition_limit": 2000, "cursor": None}
    assert check_same(struct, without) == head + bytes.fromhex("ff" "00")
    cursor = {"topic_name": "a", "partition_index": 3}
    with_cursor = {**without, "cursor": cursor}
    assert check_same(struct, with_cursor) == head + bytes.fromhex("01" "0261" "00000003" "00" "00")
    assert plain(schema.decode(struct, BufferReader(head + bytes.fromhex("01" "0261" "00000003" "00" "00")))
                 ["cursor"]) == cursor
    with pytest.raises(HANDLED):
        schema.decode(struct, BufferReader(head))   # the marker cut off


def test_a_message_class_reads_its_fields_as_attributes_and_behaves_as_a_message():
    import copy
    import pickle

    cls = schema.message_class(("topics", "items", "error_code"))
    assert cls is schema.message_class(("topics", "items", "error_code"))     # one class per field list
    m = cls({"topics": [1], "items": 5, "error_code": 0})
    assert (m.topics, m.error_code) == ([1], 0)
    assert callable(m.items) and m["items"] == 5                              # a dict method stays one
    m.error_code = 7                                                           # writes go to the dict
    assert m["error_code"] == 7 and m.error_code == 7
    m.extra = "x"                                                              # so do keys it was not made with
    assert m.extra == "x"
    with pytest.raises(AttributeError):
        m.missing
    assert getattr(m, "missing", None) is None
    with pytest.raises(KeyError):
        m["missing"]
    del m["topics"]                                                            # a field of the class, gone
    assert getattr(m, "topics", None) is None and not hasattr(m, "topics")
    with pytest.raises(KeyError):
        m["topics"]
    m["topics"] = [1]
    assert m == {"topics": [1], "items": 5, "error_code": 7, "extra": "x"}
    for other in (pickle.loads(pickle.dumps(m)), copy.copy(m), copy.deepcopy(m)):
        assert type(other) is schema.Message and other == m and other.topics == [1]


def test_a_nan_float64_counts_as_the_same_outcome_from_both_decoders():
    """AlterClientQuotas v1 with a quota value whose bytes make a NaN (hypothesis found it by flipping a byte):
    both decoders give the same NaN bits, which the comparison must treat as the same value."""
    frame = (b"\x02\x01\x04\x01" + bytes(10) + b"\x01" + bytes(10) + b"\x01\x7f\xf1" + bytes(11))
    assert_same_outcome(schema.struct_for(49, 1, True), frame)
    reader = BufferReader(frame)
    value = schema.decode(schema.struct_for(49, 1, True), reader).entries[0].ops[2].value
    assert value != value   # a NaN indeed
