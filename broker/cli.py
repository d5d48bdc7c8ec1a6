"""``kbroker``: serve a broker, and console tools in the spirit of Kafka's.

    kbroker serve [server.properties] [--override key=value ...]
    kbroker topics create|list|describe|delete ...
    kbroker produce --topic T      (one record per stdin line, ``key<TAB>value`` with --keys)
    kbroker consume --topic T [--from-beginning] [--max-messages N]
    kbroker configs describe|alter --entity-type topics|brokers --entity-name N|--entity-default [--add-config k=v ...]
    kbroker acls add|list|remove [--allow-principal User:U --operation Read --topic T ...]   (as kafka-acls)
    kbroker users add|list|delete [--user U --password P --mechanism SCRAM-SHA-256 ...]
                                  [--zookeeper host:port/chroot]   (SCRAM credentials, as kafka-configs sets them)

Every tool but ``serve`` takes ``--bootstrap-server`` and ``--command-config``
(a client properties file: security.protocol, sasl.*, ssl.*). The entry point is
the broker's so that ``client/`` never imports ``broker/``.
"""

from __future__ import annotations

import argparse
import os
import sys

from kbroker.protocol.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbroker", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a broker")
    serve.add_argument("properties", nargs="?", help="server.properties file")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    serve.add_argument("--log-level", default="INFO")

    def with_server(p):
        p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
        p.add_argument("--command-config", help="client properties: security.protocol, sasl.*, ssl.*")
        return p

    topics = with_server(sub.add_parser("topics", help="create, list, describe or delete topics"))
    topics.add_argument("action", choices=["create", "list", "describe", "delete"])
    topics.add_argument("--topic")
    topics.add_argument("--partitions", type=int, default=-1)
    topics.add_argument("--replication-factor", type=int, default=-1)
    topics.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")

    produce = with_server(sub.add_parser("produce", help="produce stdin lines"))
    produce.add_argument("--topic", required=True)
    produce.add_argument("--partition", type=int, default=0)
    produce.add_argument("--keys", action="store_true", help="lines are key<TAB>value")
    produce.add_argument("--acks", type=int, default=-1)

    consume = with_server(sub.add_parser("consume", help="print records"))
    consume.add_argument("--topic", required=True)
    consume.add_argument("--partition", type=int, default=None)
    consume.add_argument("--from-beginning", action="store_true")
    consume.add_argument("--max-messages", type=int, default=None)
    consume.add_argument("--timeout-ms", type=int, default=None)

    groups = with_server(sub.add_parser("groups", help="list, describe (offsets and lag) or delete groups"))
    groups.add_argument("action", choices=["list", "describe", "delete"])
    groups.add_argument("--group")

    configs = with_server(sub.add_parser("configs", help="describe or alter topic and broker configs "
                                                          "(as kafka-configs)"))
    configs.add_argument("action", choices=["describe", "alter"])
    configs.add_argument("--entity-type", required=True, choices=["topics", "brokers", "broker-loggers"])
    configs.add_argument("--entity-name")
    configs.add_argument("--entity-default", action="store_true",
                         help="brokers: the cluster-wide dynamic default (ZooKeeper's /config/brokers/<default>)")
    configs.add_argument("--add-config", help="k=v,k2=v2 (a list value in brackets: k=[a,b])")
    configs.add_argument("--delete-config", help="k,k2")
    configs.add_argument("--all", action="store_true", help="describe: defaults too")
    acls = with_server(sub.add_parser("acls", help="add, list or remove ACLs (as kafka-acls)"))
    acls.add_argument("action", choices=["add", "list", "remove"])
    for option in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host", "--operation",
                   "--topic", "--group", "--transactional-id"):
        acls.add_argument(option, action="append")
    acls.add_argument("--cluster", action="store_true")
    acls.add_argument("--principal", help="list: only this principal's ACLs")
    acls.add_argument("--resource-pattern-type", choices=["literal", "prefixed", "match", "any"],
                      help="default: literal for add and remove, any for list (as kafka-acls)")
    users = with_server(sub.add_parser("users", help="add, list or delete users' SCRAM credentials"))
    users.add_argument("action", choices=["add", "list", "delete"])
    users.add_argument("--user")
    users.add_argument("--password")
    users.add_argument("--mechanism", action="append", choices=list(MECHANISMS),
                       help="repeatable; default: both (add) or every one the user has (delete)")
    users.add_argument("--iterations", type=int, default=MIN_ITERATIONS)
    users.add_argument("--zookeeper", help="write to a cluster's ZooKeeper directly (before any broker runs)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        from kbroker.broker.main import serve

        return serve(args.properties, args.override, args.log_level)
    if args.command == "users" and args.zookeeper:
        return _users_in_zookeeper(args)
    from kbroker.client import tools

    return tools.run(args)


def _users_in_zookeeper(args) -> int:
    """``kafka-configs --zookeeper ... --entity-type users``: how a cluster gets the credentials its brokers
    authenticate to each other with before any of them runs."""
    from kbroker.broker.cluster.zk_client import KafkaZkClient
    from kbroker.client.users import user_line

    if args.action != "list" and (not args.user or (args.action == "add" and args.password is None)):
        print("kbroker: users add needs --user and --password, delete needs --user", file=sys.stderr)
        return 1
    if args.action == "add" and not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        # (what a broker answers AlterUserScramCredentials with: UNACCEPTABLE_CREDENTIAL)
        print(f"kbroker: --iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}, as Kafka accepts", file=sys.stderr)
        return 1
    zk = KafkaZkClient(args.zookeeper, 10000)
    zk.start()
    try:
        if args.action == "list":
            for user in ([args.user] if args.user else zk.user_names()):
                held = {k: ScramCredential.from_text(v) for k, v in zk.user_config(user).items() if k in MECHANISMS}
                print(user_line(user, [(m, c.iterations) for m, c in sorted(held.items())]))
            return 0
        texts = {k: v for k, v in zk.user_config(args.user).items() if k in MECHANISMS}
        for mechanism in args.mechanism or list(MECHANISMS):
            if args.action == "add":
                texts[mechanism] = ScramCredential.from_password(mechanism, args.password, os.urandom(32),
                                                                 args.iterations).to_text()
            else:
                texts.pop(mechanism, None)
        zk.set_user_scram_credentials(args.user, texts)
        print(f"{args.user}: " + ("credentials set" if args.action == "add" else "credentials deleted"))
        return 0
    finally:
        zk.stop()


if __name__ == "__main__":
    sys.exit(main())
