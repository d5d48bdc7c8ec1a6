"""``kbroker``: serve a broker, and console tools in the spirit of Kafka's.

    kbroker serve [server.properties] [--override key=value ...]
    kbroker topics create|list|describe|delete ...
    kbroker produce --topic T      (one record per stdin line, ``key<TAB>value`` with --keys)
    kbroker consume --topic T [--from-beginning] [--max-messages N]
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbroker", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a broker")
    serve.add_argument("properties", nargs="?", help="server.properties file")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    serve.add_argument("--log-level", default="INFO")

    def with_server(p):
        p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        from broker.main import serve

        return serve(args.properties, args.override, args.log_level)
    from client import tools

    return tools.run(args)


if __name__ == "__main__":
    sys.exit(main())
