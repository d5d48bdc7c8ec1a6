"""Metadata v12/v13 for named topics, side by side: by name, by id, both, unknown ones, invalid and repeated
names, and every topic."""

from __future__ import annotations

import uuid

import pytest

from tests.reference.differential import call, same
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

METADATA = 3


@pytest.mark.parametrize("case", ["by id", "an unknown id", "by name and id", "an unknown name", "an empty name",
                                  "an invalid name", "a name twice", "every topic", "an unknown name at v13"])
async def test_metadata_for_named_topics(targets, topic, case):
    async def scenario(target):
        await create(target, topic, 2)
        known = await call(target, METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
        tid = bytes(known.topics[0].topic_id)
        topics = {"by id": [{"name": None, "topic_id": tid}],
                  "an unknown id": [{"name": None, "topic_id": uuid.uuid4().bytes}],
                  "by name and id": [{"name": topic, "topic_id": tid}], "an empty name": [{"name": ""}],
                  "an invalid name": [{"name": "bad/name"}], "a name twice": [{"name": topic}, {"name": topic}],
                  "every topic": None}.get(case, [{"name": f"{topic}-none"}])
        answer = await call(target, METADATA, 13 if case.endswith("v13") else 12, {
            "topics": topics, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        return answer.get("error_code"), sorted(
            (t.error_code, t.name == topic, t.name is None, bytes(t.topic_id) == tid, len(t.partitions), t.is_internal)
            for t in answer.topics if case != "every topic" or t.name == topic)
    await same(targets, scenario)
