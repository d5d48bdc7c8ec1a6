"""``make cluster``: ZooKeeper and three brokers as local processes, stopped cleanly on Ctrl-C.

Brokers listen on 127.0.0.1:9092, 9093 and 9094 with their data under
``./data/broker-<id>``; ZooKeeper on 127.0.0.1:2181 with its data under
``./data/zookeeper``, the cluster under the ``/kbroker`` chroot.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from kbroker.broker.cluster.zookeeper_server import ZooKeeperServer

BROKERS = 3
FIRST_PORT = 9092


def main(data: str = "data", properties: str = "config/server.properties") -> int:
    zookeeper = ZooKeeperServer(os.path.abspath(os.path.join(data, "zookeeper")), port=2181).start()
    print(f"zookeeper listening on {zookeeper.connect}", flush=True)
    brokers = []
    for broker_id in range(1, BROKERS + 1):
        overrides = {"broker.id": broker_id, "listeners": f"PLAINTEXT://127.0.0.1:{FIRST_PORT + broker_id - 1}",
                     "log.dirs": os.path.abspath(os.path.join(data, f"broker-{broker_id}")),
                     "zookeeper.connect": f"{zookeeper.connect}/kbroker",
                     # config/server.properties is written for one broker; three replicate everything.
                     "default.replication.factor": 3, "offsets.topic.replication.factor": 3,
                     "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
                     "share.coordinator.state.topic.replication.factor": 3,
                     "share.coordinator.state.topic.min.isr": 2}
        args = [sys.executable, "-m", "kbroker.broker.cli", "serve", properties]
        for key, value in overrides.items():
            args += ["--override", f"{key}={value}"]
        brokers.append(subprocess.Popen(args, start_new_session=True))
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop and all(b.poll() is None for b in brokers):
        time.sleep(0.2)
    print("stopping the cluster", flush=True)
    for b in brokers:   # one at a time: each hands its leaderships to the others (controlled shutdown)
        if b.poll() is None:
            b.send_signal(signal.SIGTERM)
            try:
                b.wait(60)
            except subprocess.TimeoutExpired:
                b.kill()
    zookeeper.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
