"""Property-based round trips: for every advertised (api, version, direction), decode(encode(m)) == m."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.protocol import schema
from kbroker.protocol.types import BufferReader

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def value_strategy(f: schema.Field, version: int, flexible: bool):
    nullable = f.nullable is not None and version in f.nullable
    if f.is_array:
        element = (struct_strategy(f.fields, version, flexible) if f.is_struct
                   else scalar_strategy(f.element, False))
        base = st.lists(element, max_size=3)
    elif f.is_struct:
        base = struct_strategy(f.fields, version, flexible)
    else:
        base = scalar_strategy(f.type, nullable)
        nullable = False
    return st.one_of(st.none(), base) if nullable else base


def scalar_strategy(type_: str, nullable: bool):
    if type_ in _INTS:
        bits = _INTS[type_]
        base = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    elif type_ == "uint16":
        base = st.integers(0, 0xFFFF)
    elif type_ == "uint32":
        base = st.integers(0, 0xFFFFFFFF)
    elif type_ == "float64":
        base = st.floats(allow_nan=False)
    elif type_ == "bool":
        base = st.booleans()
    elif type_ == "uuid":
        base = st.binary(min_size=16, max_size=16)
    elif type_ == "string":
        base = st.text(max_size=20)
    elif type_ in ("bytes", "records"):
        base = st.binary(max_size=40)
    else:
        raise AssertionError(type_)
    return st.one_of(st.none(), base) if nullable else base


def struct_strategy(fields: list[schema.Field], version: int, flexible: bool):
    present = {f.name: value_strategy(f, version, flexible) for f in fields
               if version in f.versions and (f.tag is None or flexible)}
    return st.fixed_dictionaries(present)


def assert_matches(decoded, sent, path="") -> None:
    """Every field that was sent decodes to the same value (absent fields decode to defaults)."""
    if isinstance(sent, dict):
        for name, value in sent.items():
            assert_matches(decoded[name], value, f"{path}.{name}")
    elif isinstance(sent, list):
        assert len(decoded) == len(sent), path
        for i, (d, s) in enumerate(zip(decoded, sent)):
            assert_matches(d, s, f"{path}[{i}]")
    elif isinstance(decoded, memoryview):
        assert bytes(decoded) == sent, path
    else:
        assert decoded == sent, path


CASES = [(a.key, v, is_request) for a in schema.REGISTRY.values()
         for v in range(a.versions.low, a.versions.high + 1) for is_request in (True, False)]


@pytest.mark.parametrize("api_key,version,is_request", CASES,
                         ids=[f"{schema.REGISTRY[a].name}-v{v}-{'req' if r else 'resp'}" for a, v, r in CASES])
def test_round_trip(api_key, version, is_request):
    declared = schema.REGISTRY[api_key]
    fields = declared.request if is_request else declared.response
    flexible = declared.is_flexible(version)
    struct = schema.struct_for(api_key, version, is_request)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(struct_strategy(fields, version, flexible))
    def check(message):
        encoded, regions = schema.encode(struct, message)
        assert regions == []
        reader = BufferReader(encoded.getvalue())
        decoded = schema.decode(struct, reader)
        assert reader.remaining() == 0
        for name, value in message.items():
            tagged_default = next((f for f in fields if f.name == name and f.tag is not None), None)
            if tagged_default is not None and value == tagged_default.default:
                continue  # a tagged field equal to its default is not sent, and decodes to it
            assert_matches(decoded[name], value, name)

    check()


def test_unknown_tagged_fields_are_skipped():
    struct = schema.struct_for(18, 3, True)  # ApiVersions v3 request (flexible)
    body = b"\x05kcat\x041.0\x01" + b"\x07\x02ab"  # one unknown tagged field: tag 7, 2 bytes
    decoded = schema.decode(struct, BufferReader(body))
    assert decoded.client_software_name == "kcat"
