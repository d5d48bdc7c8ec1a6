"""Group configs (the GROUP resource) side by side: every name Kafka 4.2 has (the streams ones too, none it lacks),
values parsed and bounded as Kafka's GroupConfig does them, refusals in Kafka's words and order, AlterConfigs
replacing a group's set, and what DescribeConfigs then shows."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled

pytestmark = pytest.mark.reference

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
GROUP = 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def described(target, group: str) -> tuple[int, list]:
    answer = await call(target, DESCRIBE_CONFIGS, 4, {"resources": [{
        "resource_type": GROUP, "resource_name": group, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    (r,) = answer.results
    return r.error_code, sorted((c.name, c.value, c.config_source, c.config_type) for c in r.configs)


def incremental(group: str, ops, validate_only: bool = False) -> dict:
    return {"resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": validate_only}


CASES = {   # case -> [(name, operation, value)] SET on one group, one request
    "the streams configs": [("streams.session.timeout.ms", SET, "50000"), ("streams.num.standby.replicas", SET, "2"),
                            ("streams.heartbeat.interval.ms", SET, "6000"),
                            ("streams.initial.rebalance.delay.ms", SET, "0")],
    "more standby replicas than the broker allows": [("streams.num.standby.replicas", SET, "3")],
    "a name Kafka 4.2 does not have": [("share.delivery.count.limit", SET, "3")],
    "values parsed as Java parses them": [("consumer.session.timeout.ms", SET, " 50000 "),
                                          ("share.heartbeat.interval.ms", SET, "+6000"),
                                          ("share.auto.offset.reset", SET, " earliest")],
    "no number": [("consumer.session.timeout.ms", SET, "5_000")],
    "past an int": [("share.session.timeout.ms", SET, "2147483648")],
    "below a config's floor, named as parsed": [("share.record.lock.duration.ms", SET, " +999")],
    "below the broker's bound": [("share.record.lock.duration.ms", SET, "14999")],
    "an isolation level in capitals, named trimmed": [("share.isolation.level", SET, " READ_COMMITTED")],
    "a consumer's strategy that is no share group's": [("share.auto.offset.reset", SET, "none")],
    "two values refused: the first in Kafka's order": [("streams.session.timeout.ms", SET, "x"),
                                                        ("consumer.heartbeat.interval.ms", SET, "y")],
    "two bounds broken: the first Kafka checks": [("share.session.timeout.ms", SET, "1"),
                                                  ("consumer.session.timeout.ms", SET, "99999")],
    "two unknown names": [("no.such.config", SET, "1"), ("group.consumer.session.timeout.ms", SET, "1")],
    "APPEND to two configs": [("share.session.timeout.ms", APPEND, "1"), ("streams.session.timeout.ms", SUBTRACT, "1"),
                              ("consumer.session.timeout.ms", APPEND, "1")],
    "APPEND beside an unknown name": [("no.such.config", SET, "1"), ("share.isolation.level", APPEND, "x")],
    "two null values": [("share.session.timeout.ms", SET, None), ("streams.session.timeout.ms", APPEND, None),
                        ("consumer.session.timeout.ms", DELETE, None)],
}


@pytest.mark.parametrize("case", list(CASES))
async def test_group_configs_are_checked_as_kafka_checks_them(targets, topic, case):
    async def scenario(target):
        group = f"g-{topic}"
        before = await described(target, group)
        answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, incremental(group, CASES[case]))
        (r,) = answer.responses
        # (Kafka's broker describes a change once its metadata image has the controller's record)
        after = await settled(lambda: described(target, group), lambda got: r.error_code != 0 or got != before)
        return r.error_code, r.error_message, after
    await same(targets, scenario)


DURATIONS = ["PT0S", "P1D", "pt1h", "PT1.5S", "PT1H-30M", "PT-0.5S", "-PT1H", "P-1DT25H", "P1DT", "PT", "P", "PT1H ",
             "PT1.1234567891S", "PT,5S", "P9223372036854775807D", "P1W", "1H"]


async def test_by_duration_strategies_are_read_as_java_reads_durations(targets, topic):
    async def scenario(target):
        answers = {}
        for duration in DURATIONS:
            answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, incremental(
                f"g-{topic}", [("share.auto.offset.reset", SET, f"by_duration:{duration}")], validate_only=True))
            answers[duration] = answer.responses[0].error_code
        return answers
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["replaces the set", "refused", "an empty group name", "validate only"])
async def test_legacy_alter_configs_replaces_a_groups_configs(targets, topic, case):
    async def scenario(target):
        group = "" if case == "an empty group name" else f"g-{topic}"
        first = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, incremental(
            f"g-{topic}", [("share.auto.offset.reset", SET, "earliest"), ("streams.num.standby.replicas", SET, "1")]))
        start = await settled(lambda: described(target, f"g-{topic}"), lambda got: ("share.auto.offset.reset",
                              "earliest", 8, 2) in got[1])
        value = "x" if case == "refused" else "20000"
        answer = await call(target, ALTER_CONFIGS, 2, {"resources": [{
            "resource_type": GROUP, "resource_name": group, "configs": [
                {"name": "share.record.lock.duration.ms", "value": value}]}],
            "validate_only": case == "validate only"})
        (r,) = answer.responses
        after = await settled(lambda: described(target, f"g-{topic}"),
                              lambda got: r.error_code != 0 or case == "validate only" or got != start)
        return first.responses[0].error_code, r.error_code, r.error_message, after
    await same(targets, scenario)


async def test_an_empty_group_name_is_refused_by_describe_configs(targets):
    async def scenario(target):
        answer = await call(target, DESCRIBE_CONFIGS, 4, {"resources": [{
            "resource_type": GROUP, "resource_name": "", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
        return [(r.error_code, r.error_message, len(r.configs)) for r in answer.results]
    await same(targets, scenario)


async def test_a_groups_own_heartbeat_interval_is_the_one_its_members_are_told(targets, topic):
    """``consumer.heartbeat.interval.ms`` and ``share.heartbeat.interval.ms`` set on a group (GROUP resource)
    are what ConsumerGroupHeartbeat and ShareGroupHeartbeat tell its members, from their join on and after a
    change; a group with configs of its own but not this one is told the broker's."""
    import asyncio
    import uuid

    from tests.reference.test_consumer_groups import first_join
    from tests.reference.test_groups import coordinator_found, set_group_config
    from tests.reference.test_produce_fetch import create
    from tests.reference.test_share_groups import HEARTBEAT as SHARE_HEARTBEAT, heartbeat
    from tests.waiting import settled

    async def scenario(target):
        await create(target, topic)
        consumer, share, other = f"c-{topic}", f"s-{topic}", f"o-{topic}"
        seen = {}
        for group in (consumer, share, other):
            await coordinator_found(target, group)
        await asyncio.to_thread(set_group_config, target, consumer, consumer_heartbeat_interval_ms=7000)
        await asyncio.to_thread(set_group_config, target, share, share_heartbeat_interval_ms=6000)
        await asyncio.to_thread(set_group_config, target, other, share_auto_offset_reset="earliest")
        member = uuid.uuid4().hex
        joined = await first_join(target, consumer, member, [topic])
        seen["consumer"] = (joined.error_code, joined.heartbeat_interval_ms)

        async def share_join(group):
            answer = await settled(lambda: call(target, SHARE_HEARTBEAT, 1, heartbeat(group, uuid.uuid4().hex, 0,
                                                                                      [topic])),
                                   lambda a: a.error_code not in (14, 16))
            return answer.error_code, answer.heartbeat_interval_ms
        seen["share"] = await share_join(share)
        seen["share, another config set"] = await share_join(other)
        await asyncio.to_thread(set_group_config, target, share, share_heartbeat_interval_ms=8000)
        seen["share, changed"] = await share_join(share)
        return seen
    await same(targets, scenario)
