"""A KIP-848 member subscribed by regular expression, over raw frames side by side: it is assigned the topics
the expression matches, a topic made later that matches is added to its assignment, and ConsumerGroupDescribe
shows the expression."""

from __future__ import annotations

import uuid

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_consumer_groups import DESCRIBE, HEARTBEAT, beat, first_join
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

METADATA = 3


async def _names(target) -> dict[bytes, str]:
    answer = await call(target, METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
    return {bytes(t.topic_id): t.name for t in answer.topics}


class Member:
    """A joined member heartbeating at its epoch; ``latest``: the last assignment an answer carried (an answer
    without one keeps it)."""

    def __init__(self, target, group: str, member: str, joined) -> None:
        self.target, self.group, self.member = target, group, member
        self.epoch, self.latest = joined.member_epoch, joined.assignment

    async def heartbeat(self):
        answer = await call(self.target, HEARTBEAT, 1, beat(self.group, self.member, self.epoch))
        if answer.error_code == 0:
            self.epoch = answer.member_epoch
            self.latest = answer.assignment if answer.assignment is not None else self.latest
        return answer


async def test_a_member_subscribed_by_regex(targets, topic):
    async def scenario(target):
        group, member = f"g-{topic}", uuid.uuid4().hex[:22]
        await create(target, f"rx-{topic}-a", partitions=2)
        await create(target, f"other-{topic}")
        joined = await first_join(target, group, member, None, subscribed_topic_regex=f"rx-{topic}-.*")
        beating = Member(target, group, member, joined)

        async def assigned():
            await beating.heartbeat()
            if beating.latest is None:
                return None
            names = await _names(target)
            return sorted((names.get(bytes(t.topic_id), "?").replace(topic, "T"), p)
                          for t in beating.latest.topic_partitions for p in t.partitions)
        first = await settled(assigned, lambda a: a is not None and len(a) == 2, timeout=30)
        await create(target, f"rx-{topic}-b")
        later = await settled(assigned, lambda a: a is not None and len(a) == 3, timeout=40)
        # a full heartbeat (what a client sends after an error: its timeout, subscription and owned partitions)
        # is answered with the whole assignment, the subscription a regex as much as names
        full = await call(target, HEARTBEAT, 1, beat(group, member, beating.epoch, rebalance_timeout_ms=30000,
                                                     subscribed_topic_regex=f"rx-{topic}-.*", topic_partitions=[]))
        described = await call(target, DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False})
        members = [(m.subscribed_topic_regex.replace(topic, "T"), m.subscribed_topic_names)
                   for g in described.groups for m in g.members]
        return {"first": first, "after a matching topic was made": later, "described": members,
                "a full heartbeat's answer": (full.error_code, full.assignment is not None)}
    await same(targets, scenario)


@pytest.mark.parametrize("regex, matching", [("(?=rx).*", None), ("(a)\\1", None), ("__consumer_offsets", None),
                                             ("[[:alpha:]]+-none<u>", "abc-none<u>"), ("\\p{Lu}x<u>", "Ax<u>")])
async def test_regexes_kafka_reads_otherwise(targets, topic, regex, matching):
    """Kafka reads the expression with RE2/J: no lookaround or back-references, POSIX classes and Unicode
    categories; internal topics match nothing. Where the expression matches, a topic it matches is made (its
    name letters only, ``<u>`` a token of this run) and the member waits until it is assigned it."""
    token = "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:10])
    regex = regex.replace("<u>", token)

    async def scenario(target):
        group, member = f"g-{topic}", uuid.uuid4().hex[:22]
        await create(target, f"rx-{topic}")
        if matching is not None:
            await create(target, matching.replace("<u>", token))
        joined = await first_join(target, group, member, None, subscribed_topic_regex=regex)
        if joined.error_code:
            return joined.error_code
        beating = Member(target, group, member, joined)
        if matching is None:   # (nothing to match: waited out, an answer with an assignment, empty, ends it)
            answer = await settled(beating.heartbeat, lambda a: a.error_code != 0 or a.assignment is not None,
                                   timeout=5)
        else:
            answer = await settled(beating.heartbeat, lambda a: a.error_code != 0 or beating.latest is not None
                                   and any(t.partitions for t in beating.latest.topic_partitions), timeout=20)
        assignment = beating.latest
        return answer.error_code, sorted(p for t in assignment.topic_partitions for p in t.partitions) \
            if assignment is not None else None
    answered = await same(targets, scenario)
    if matching is not None:
        assert answered == (0, [0])   # (Kafka read the expression so: the topic made for it is assigned)
