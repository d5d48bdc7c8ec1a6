"""Every advertised (api, version) matches Kafka's official schema field by field.

Compares name, type, order, nullability, tagged fields (tag numbers) and the
flexible-version range with ``../shared/kafka-protocol/messages/<Name>.json``.
Skips where that reference folder is absent (it is not part of the product).
"""

from __future__ import annotations

import json
import os
import re

import pytest

from kbroker.broker.network.registry import HANDLERS
from kbroker.protocol.schema import DATA, REGISTRY, Field, Versions

SCHEMAS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "kafka-protocol", "messages")
pytestmark = pytest.mark.skipif(not os.path.isdir(SCHEMAS), reason="../shared/kafka-protocol is not beside the repo")


def load(name: str) -> dict:
    with open(os.path.join(SCHEMAS, name + ".json"), encoding="utf-8") as f:
        return json.loads(re.sub(r"//.*", "", f.read()))


def snake(name: str) -> str:
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name).lower()


def versions(spec: str | None) -> Versions | None:
    return None if spec in (None, "none") else Versions.parse(spec)


def official_fields(fields: list[dict], version: int, common: dict) -> list[tuple]:
    """(name, kind, nullable, tag, children) of the fields present at ``version``."""
    out = []
    for f in fields:
        # A field with only taggedVersions (TransactionLogValue's) exists in exactly those versions.
        if version not in Versions.parse(f.get("versions") or f["taggedVersions"]):
            continue
        type_ = f["type"]
        children = f.get("fields")
        element = type_[2:] if type_.startswith("[]") else type_
        is_struct = element[:1].isupper()
        if is_struct and children is None:
            children = common[element]
        kind = ("array:" if type_.startswith("[]") else "") + ("struct" if is_struct else element)
        nullable = (nv := versions(f.get("nullableVersions"))) is not None and version in nv
        tag = f.get("tag") if (tv := versions(f.get("taggedVersions"))) and version in tv else None
        out.append((snake(f["name"]), kind, nullable, tag,
                    official_fields(children, version, common) if is_struct else None))
    return out


def declared_fields(fields: list[Field], version: int) -> list[tuple]:
    out = []
    for f in fields:
        if version not in f.versions:
            continue
        kind = ("array:" if f.is_array else "") + ("struct" if f.is_struct else f.element)
        nullable = f.nullable is not None and version in f.nullable
        out.append((f.name, kind, nullable, f.tag, declared_fields(f.fields, version) if f.is_struct else None))
    return out


def newest(name: str) -> int:
    """The newest version of ``name`` the JSON schemas have (October 2024) and mark stable: test_conformance_42.py
    holds the newer ones, and a latest version then still unstable (``latestVersionUnstable``: KIP-932's, which
    changed before Kafka 4.0 shipped), to Kafka 4.2's layouts."""
    try:
        schema = load(name + "Request")
    except FileNotFoundError:
        return -1
    high = Versions.parse(schema["validVersions"]).high
    return high - 1 if schema.get("latestVersionUnstable") else high


# Every declaration at every version it declares: the advertised ones and those not wired to a handler yet.
CASES = [(a.name, a.key, v, direction)
         for a in sorted(REGISTRY.values(), key=lambda a: a.key)
         for v in range(a.versions.low, min(a.versions.high, newest(a.name)) + 1)
         for direction in ("Request", "Response")] if os.path.isdir(SCHEMAS) else []
INTERNAL = os.path.join(SCHEMAS, "..", "internal")
# The internal records whose official JSON ../shared holds (offsets, classic groups, transactions). KIP-848's
# records (key versions 3, 5-8) were checked against apache/kafka's group-coordinator JSON when they were
# declared; ConsumerGroupMetadataValue's tagged MetadataHash is Kafka 4.1's (KIP-1101), newer than that copy.
DATA_CASES = [(d.name, v) for d in DATA.values() for v in range(d.versions.low, d.versions.high + 1)
              if os.path.exists(os.path.join(INTERNAL, d.name + ".json"))]


@pytest.mark.parametrize("name,api_key,version,direction", CASES,
                         ids=[f"{c[0]}{c[3]}-v{c[2]}" for c in CASES])
def test_schema_matches_kafka(name, api_key, version, direction):
    official = load(name + direction)
    declared = REGISTRY[api_key]
    assert official["apiKey"] == api_key
    assert version in Versions.parse(official["validVersions"])
    flexible = versions(official["flexibleVersions"])
    assert (flexible is not None and version in flexible) == declared.is_flexible(version)
    common = {c["name"]: c["fields"] for c in official.get("commonStructs", [])}
    ours = declared.request if direction == "Request" else declared.response
    assert declared_fields(ours, version) == official_fields(official["fields"], version, common)


@pytest.mark.parametrize("name,version", DATA_CASES, ids=[f"{n}-v{v}" for n, v in DATA_CASES])
def test_internal_record_schema_matches_kafka(name, version):
    with open(os.path.join(INTERNAL, name + ".json"), encoding="utf-8") as f:
        official = json.loads(re.sub(r"//.*", "", f.read()))
    declared = DATA[name]
    assert version in Versions.parse(official["validVersions"])
    flexible = versions(official.get("flexibleVersions"))
    assert (flexible is not None and version in flexible) == declared.is_flexible(version)
    common = {c["name"]: c["fields"] for c in official.get("commonStructs", [])}
    assert declared_fields(declared.fields, version) == official_fields(official["fields"], version, common)


def test_every_api_key_is_advertised_once_with_its_declared_range():
    for handler in HANDLERS.values():
        declared = REGISTRY[handler.api_key]
        assert (handler.min_version, handler.max_version) == (declared.versions.low, declared.versions.high)


def test_headers_match_kafka():
    request = load("RequestHeader")
    assert [snake(f["name"]) for f in request["fields"]] == ["request_api_key", "request_api_version",
                                                             "correlation_id", "client_id"]
    client_id = request["fields"][3]
    assert client_id["flexibleVersions"] == "none", "client id is never a compact string"
    assert load("ResponseHeader")["flexibleVersions"] == "1+"
