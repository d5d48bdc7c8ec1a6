"""AlterUserScramCredentials and DescribeUserScramCredentials side by side: what is stored and described,
what is refused."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled

pytestmark = pytest.mark.reference

DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51
SHA_256 = 1


def upsertion(name: str, mechanism: int = SHA_256, iterations: int = 4096) -> dict:
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": b"s" * 16,
            "salted_password": b"p" * 32}


@pytest.mark.parametrize("case", ["a credential", "an unknown mechanism", "too few iterations",
                                  "too many iterations", "an empty user name", "deleting what is not there",
                                  "describing an unknown user", "describing every user"])
async def test_scram_credentials(targets, topic, case):
    user = f"s-{topic}"
    deletions = [{"name": user, "mechanism": SHA_256}] if case == "deleting what is not there" else []
    upsertions = {"a credential": [upsertion(user)], "an unknown mechanism": [upsertion(user, mechanism=9)],
                  "too few iterations": [upsertion(user, iterations=100)],
                  "too many iterations": [upsertion(user, iterations=20000)],
                  "an empty user name": [upsertion("")]}.get(case, [])

    async def scenario(target):
        seen = []
        try:
            if deletions or upsertions:
                altered = await call(target, ALTER_SCRAM, 0, {"deletions": deletions, "upsertions": upsertions})
                seen.append(sorted((r.user == user, r.error_code, r.error_message is not None)
                                   for r in altered.results))
            # (Kafka's broker describes what its metadata image holds: a new credential a moment after)
            described = await settled(lambda: call(target, DESCRIBE_SCRAM, 0, {
                "users": None if case == "describing every user" else [{"name": user}]}),
                lambda d: case != "a credential" or any(r.credential_infos for r in d.results))
            seen.append((described.error_code, [(r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
                                                 for r in described.results if r.user == user]))
            return seen
        finally:
            if case == "a credential":
                await call(target, ALTER_SCRAM, 0, {"deletions": [{"name": user, "mechanism": SHA_256}],
                                                    "upsertions": []})
    await same(targets, scenario)
