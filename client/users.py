"""``kbroker users``: SCRAM credentials through DescribeUserScramCredentials / AlterUserScramCredentials.

The password never leaves this process: the request carries a fresh random
salt and the salted password, from which the broker derives what it keeps.
"""

from __future__ import annotations

import os

from kbroker.protocol import scram

DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51


def user_line(user: str, credentials) -> str:
    """``alice: SCRAM-SHA-256 (iterations=4096), ...`` from (mechanism name, iterations) pairs."""
    return f"{user}: " + ", ".join(f"{m} (iterations={i})" for m, i in credentials)


def upsertion(user: str, mechanism: str, password: str, iterations: int) -> dict:
    salt = os.urandom(32)
    return {"name": user, "mechanism": scram.MECHANISMS[mechanism][1], "iterations": iterations, "salt": salt,
            "salted_password": scram.salted_password(mechanism, password, salt, iterations)}


async def users(conn, args) -> int:
    """Returns the exit code; prints one line per user (``list``) or per result."""
    if args.action == "list":
        body = {"users": [{"name": args.user}] if args.user else None}
        response = await conn.request(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, body)
        failed = response.error_code != 0
        for result in response.results:
            if result.error_code:
                print(f"{result.user}: error {result.error_code}: {result.error_message}")
                failed = True
                continue
            print(user_line(result.user, [(scram.MECHANISM_BY_TYPE.get(c.mechanism, c.mechanism), c.iterations)
                                          for c in result.credential_infos]))
        return 1 if failed else 0
    if not args.user:
        print("kbroker: users add and delete need --user")
        return 1
    mechanisms = args.mechanism or list(scram.MECHANISMS)
    if args.action == "add":
        if args.password is None:
            print("kbroker: users add needs --password")
            return 1
        body = {"deletions": [], "upsertions": [upsertion(args.user, m, args.password, args.iterations)
                                                for m in mechanisms]}
    else:
        if not args.mechanism:   # every mechanism the user has
            described = await conn.request(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": args.user}]})
            mechanisms = [scram.MECHANISM_BY_TYPE[c.mechanism] for r in described.results for c in r.credential_infos]
        body = {"deletions": [{"name": args.user, "mechanism": scram.MECHANISMS[m][1]} for m in mechanisms],
                "upsertions": []}
    response = await conn.request(ALTER_USER_SCRAM_CREDENTIALS, 0, body)
    for result in response.results:
        print(f"{result.user}: " + (f"error {result.error_code}: {result.error_message}" if result.error_code
                                   else ("credentials set" if args.action == "add" else "credentials deleted")))
    return 1 if any(r.error_code for r in response.results) or not response.results else 0
