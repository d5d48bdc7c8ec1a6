"""ZooKeeper and three kbroker processes for a test driver in another language (tests/java's KCluster):

    python -m tests.cluster_service <directory>

prints ``cluster bootstrap <host:port,...>`` once the cluster is formed, then reads commands on stdin, one a
line, answering ``ok`` (or ``error <why>``) to each: ``kill <id>`` (kill -9), ``start <id>`` (the same broker
again, same port and log dirs), ``stop`` (SIGTERM to all, as the end of stdin does).
"""

from __future__ import annotations

import sys

from tests.cluster import Cluster


def main() -> int:
    cluster = Cluster(sys.argv[1]).start()
    print(f"cluster bootstrap {cluster.bootstrap}", flush=True)
    try:
        for line in sys.stdin:
            command, *args = line.split()
            try:
                if command == "kill":
                    cluster.brokers[int(args[0])].kill()
                elif command == "start":
                    cluster.brokers[int(args[0])].start()
                elif command == "stop":
                    break
                else:
                    raise ValueError(f"unknown command {command}")
                print("ok", flush=True)
            except Exception as exc:   # the driver hears why and goes on
                print(f"error {exc!r}", flush=True)
    finally:
        codes = cluster.stop()
    return 0 if all(code == 0 for code in codes.values()) else 1   # (non-zero: the driver keeps the logs)


if __name__ == "__main__":
    sys.exit(main())
