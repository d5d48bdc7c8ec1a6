"""Every advertised (api, version) has Kafka 4.2's wire layout, as franz-go's definitions give it: kinds,
order, nullability and tags of every field (names differ between the two references and are left out), and
the flexible range. Covers the versions newer than the official JSON schemas, which test_conformance.py
holds field by field with names (franz-go leaves out when some tagged fields began, which the JSON has).
Skips where ``../shared/kafka-protocol/franz-go-definitions`` is absent (it is not part of the product)."""

from __future__ import annotations

import json
import os
import re

import pytest

from kbroker.broker.network.registry import HANDLERS  # noqa: F401  (registers every handled API's declaration)
from kbroker.protocol.schema import REGISTRY, Field
from tests.unit.protocol.franz_definitions import FOLDER, layout, load

pytestmark = pytest.mark.skipif(not os.path.isdir(FOLDER), reason="../shared/kafka-protocol is not beside the repo")
WIRE_KIND = {"records": "bytes"}   # (a records field is bytes on the wire)
DEFINITIONS = load() if os.path.isdir(FOLDER) else {}


def declared(fields: list[Field], version: int) -> list[tuple]:
    out = []
    for f in fields:
        if version not in f.versions:
            continue
        element = WIRE_KIND.get(f.element, f.element)
        kind = ("array:" if f.is_array else "") + ("struct" if f.is_struct else element)
        nullable = f.nullable is not None and version in f.nullable
        out.append((kind, nullable, f.tag, declared(f.fields, version) if f.is_struct else None))
    return out


def json_max(name: str) -> int:
    """The newest version the official JSON schema has and marks stable (-1 without one): a latest version
    then unstable is held to Kafka 4.2's layout here."""
    path = os.path.join(FOLDER, "..", "messages", name + "Request.json")
    if not os.path.exists(path):
        return -1
    with open(path, encoding="utf-8") as f:
        schema = json.loads(re.sub(r"//.*", "", f.read()))
    high = int(schema["validVersions"].split("-")[-1])
    return high - 1 if schema.get("latestVersionUnstable") else high


CASES = [(a.name, a.key, v, direction)
         for a in sorted(REGISTRY.values(), key=lambda a: a.key)
         for v in range(max(a.versions.low, json_max(a.name) + 1), a.versions.high + 1)
         for direction in ("request", "response")]


@pytest.mark.parametrize("name,api_key,version,direction", CASES, ids=[f"{c[0]}-{c[3]}-v{c[2]}" for c in CASES])
def test_layout_matches_kafka_4_2(name, api_key, version, direction):
    official = DEFINITIONS[api_key]
    ours = REGISTRY[api_key]
    assert version <= official.max_version
    flexible = official.flexible is not None and version >= official.flexible
    assert flexible == ours.is_flexible(version)
    assert declared(getattr(ours, direction), version) == layout(getattr(official, direction), version, flexible)
