"""FindCoordinator at its edges, as raw frames side by side: empty keys of each type, a key type Kafka does not
have, several keys at once (v4+) and a key named twice, share keys (v6, KIP-932) that are malformed, and the
versions before batching."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_groups import coordinator_found
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

FIND_COORDINATOR = 10
GROUP, TRANSACTION, SHARE = 0, 1, 2
COORDINATOR_NOT_AVAILABLE = 15


CASES = {   # case -> (version, key type, keys as a function of the test's topic)
    "an empty group id": (4, GROUP, lambda t: [""]),
    "an empty transactional id": (4, TRANSACTION, lambda t: [""]),
    "a key type Kafka does not have": (4, 7, lambda t: [f"g-{t}"]),
    "several groups": (4, GROUP, lambda t: [f"g-{t}", f"h-{t}", f"i-{t}"]),
    "a group named twice": (4, GROUP, lambda t: [f"g-{t}", f"g-{t}"]),
    "no keys": (4, GROUP, lambda t: []),
    "a share key without a partition": (6, SHARE, lambda t: [f"s-{t}:AAAAAAAAAAAAAAAAAAAAAA"]),
    "a share key that is no key": (6, SHARE, lambda t: ["nonsense"]),
    "a share key at v5": (5, SHARE, lambda t: [f"s-{t}:AAAAAAAAAAAAAAAAAAAAAA:0"]),
    "v3, an empty group id": (3, GROUP, lambda t: ""),
    "v3, a key type Kafka does not have": (3, 7, lambda t: f"g-{t}"),
    "v3, a share key": (3, SHARE, lambda t: f"s-{t}:AAAAAAAAAAAAAAAAAAAAAA:0"),
    "share keys with odd parts": (6, SHARE, lambda t: [
        f"s:{t}:AAAAAAAAAAAAAAAAAAAAAA:0", " :AAAAAAAAAAAAAAAAAAAAAA:0", f"s-{t}:AAAAAAAAAAAAAAAAAAAAAA:0:",
        f"s-{t}:AAAA:0", f"s-{t}:AAAAAAAAAAAAAAAAAAAAAA:x", f"s-{t}:AAAAAAAAAAAAAAAAAAAAAA:+07",
        f"s-{t}:!AAAAAAAAAAAAAAAAAAAAA:0", f"s-{t}:AAAAAAAAAAAAAAAAAAAAAA==:1", ""]),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_find_coordinator_of_odd_keys(targets, topic, case):
    version, key_type, keys = CASES[case]

    async def scenario(target):
        await create(target, topic)
        await coordinator_found(target, f"warm-{topic}")   # (__consumer_offsets made: answers no longer wait on it)
        body = {"key": keys(topic), "key_type": key_type} if version < 4 else \
            {"key_type": key_type, "coordinator_keys": keys(topic)}
        try:
            answer = await settled(lambda: call(target, FIND_COORDINATOR, version, body),
                                   lambda a: COORDINATOR_NOT_AVAILABLE not in _codes(a, version))
        except (ConnectionError, OSError) as exc:   # (a request the broker cannot read closes the connection)
            return type(exc).__name__
        if version < 4:
            return answer.error_code, _message(answer), answer.node_id >= 0
        return sorted((c.key, c.error_code, _message(c), c.node_id >= 0) for c in answer.coordinators)
    await same(targets, scenario)


def _codes(answer, version: int) -> list[int]:
    return [answer.error_code] if version < 4 else [c.error_code for c in answer.coordinators]


def _message(answer):
    """Before v4 the error's words ("NONE" when found); from v4 a key's message is left "", unless the whole
    request was refused."""
    return answer.error_message
